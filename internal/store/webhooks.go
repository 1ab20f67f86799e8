// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/corral-dev/corral/errdefs"
	"github.com/corral-dev/corral/internal/webhook"
)

// The webhooks' subscriptions and outbox (webhook.Store).

// InsertWebhook adds a subscription.
func (s *Store) InsertWebhook(ctx context.Context, w *webhook.Webhook) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO webhooks (id, tenant, url, types, secret, description, created_at, cursor)
		VALUES (?,?,?,?,?,?,?,?)`, w.ID, w.Tenant, w.URL, mustJSON(nonNilSlice(w.Types)), w.Secret, w.Description,
		nanos(w.CreatedAt), w.Cursor)
	if err != nil {
		return fmt.Errorf("webhooks: %w", err)
	}
	return nil
}

// Webhooks lists a tenant's subscriptions (every tenant's for ""),
// oldest first.
func (s *Store) Webhooks(ctx context.Context, tenant string) ([]*webhook.Webhook, error) {
	q := `SELECT id, tenant, url, types, secret, description, created_at, cursor FROM webhooks`
	var args []any
	if tenant != "" {
		q += ` WHERE tenant = ?`
		args = append(args, tenant)
	}
	rows, err := s.db.QueryContext(ctx, q+` ORDER BY created_at, id`, args...)
	if err != nil {
		return nil, fmt.Errorf("webhooks: %w", err)
	}
	defer rows.Close()
	var out []*webhook.Webhook
	for rows.Next() {
		w := &webhook.Webhook{}
		var types string
		var created int64
		if err := rows.Scan(&w.ID, &w.Tenant, &w.URL, &types, &w.Secret, &w.Description, &created, &w.Cursor); err != nil {
			return nil, fmt.Errorf("webhooks: %w", err)
		}
		if err := json.Unmarshal([]byte(types), &w.Types); err != nil {
			return nil, fmt.Errorf("webhooks: %s: types: %w", w.ID, err)
		}
		w.CreatedAt = fromNanos(created)
		out = append(out, w)
	}
	return out, rows.Err()
}

// DeleteWebhook removes a tenant's subscription and (by cascade) its
// deliveries.
func (s *Store) DeleteWebhook(ctx context.Context, tenant, id string) error {
	res, err := s.db.ExecContext(ctx, `DELETE FROM webhooks WHERE tenant = ? AND id = ?`, tenant, id)
	if err != nil {
		return fmt.Errorf("webhooks: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("webhook %s: %w", id, errdefs.ErrNotFound)
	}
	return nil
}

// Enqueue adds a subscription's deliveries and moves its cursor, in one
// transaction; an event already queued for it is skipped.
func (s *Store) Enqueue(ctx context.Context, webhookID string, ds []*webhook.Delivery, cursor int64) error {
	return s.tx(ctx, func(tx *sql.Tx) error {
		for _, d := range ds {
			if _, err := tx.ExecContext(ctx, `INSERT INTO webhook_deliveries (webhook_id, event_seq, event_id, event_type, body,
				state, next_at, created_at, updated_at) VALUES (?,?,?,?,?,?,?,?,?)
				ON CONFLICT (webhook_id, event_seq) WHERE event_seq > 0 DO NOTHING`,
				webhookID, d.EventSeq, d.EventID, d.EventType, d.Body, d.State, nanos(d.NextAt), nanos(d.CreatedAt), nanos(d.UpdatedAt)); err != nil {
				return fmt.Errorf("webhooks: enqueue: %w", err)
			}
		}
		if _, err := tx.ExecContext(ctx, `UPDATE webhooks SET cursor = ? WHERE id = ? AND cursor < ?`, cursor, webhookID, cursor); err != nil {
			return fmt.Errorf("webhooks: enqueue: %w", err)
		}
		return nil
	})
}

// InsertDelivery records a delivery outside the outbox (a ping).
func (s *Store) InsertDelivery(ctx context.Context, d *webhook.Delivery) error {
	res, err := s.db.ExecContext(ctx, `INSERT INTO webhook_deliveries (webhook_id, event_seq, event_id, event_type, body,
		state, next_at, created_at, updated_at) VALUES (?,?,?,?,?,?,?,?,?)`,
		d.WebhookID, d.EventSeq, d.EventID, d.EventType, d.Body, d.State, nanos(d.NextAt), nanos(d.CreatedAt), nanos(d.UpdatedAt))
	if err != nil {
		return fmt.Errorf("webhooks: %w", err)
	}
	d.ID, err = res.LastInsertId()
	return err
}

const deliveryColumns = `id, webhook_id, event_seq, event_id, event_type, body, state, attempts, last_status, last_error,
	next_at, created_at, updated_at, delivered_at`

func scanDeliveries(rows *sql.Rows) ([]*webhook.Delivery, error) {
	defer rows.Close()
	var out []*webhook.Delivery
	for rows.Next() {
		d := &webhook.Delivery{}
		var next, created, updated, delivered int64
		if err := rows.Scan(&d.ID, &d.WebhookID, &d.EventSeq, &d.EventID, &d.EventType, &d.Body, &d.State, &d.Attempts,
			&d.LastStatus, &d.LastError, &next, &created, &updated, &delivered); err != nil {
			return nil, fmt.Errorf("webhooks: %w", err)
		}
		d.NextAt, d.CreatedAt, d.UpdatedAt, d.DeliveredAt = fromNanos(next), fromNanos(created), fromNanos(updated), fromNanos(delivered)
		out = append(out, d)
	}
	return out, rows.Err()
}

// ClaimDue returns the due pending deliveries, earliest first, with their
// due time moved to now+lease in the same transaction.
func (s *Store) ClaimDue(ctx context.Context, now time.Time, lease time.Duration, limit int) ([]*webhook.Delivery, time.Time, error) {
	var out []*webhook.Delivery
	var next time.Time
	err := s.tx(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT `+deliveryColumns+` FROM webhook_deliveries
			WHERE state = 'pending' AND next_at <= ? ORDER BY next_at, id LIMIT ?`, nanos(now), limit)
		if err != nil {
			return err
		}
		if out, err = scanDeliveries(rows); err != nil {
			return err
		}
		until := now.Add(lease)
		for _, d := range out {
			if _, err := tx.ExecContext(ctx, `UPDATE webhook_deliveries SET next_at = ? WHERE id = ?`, nanos(until), d.ID); err != nil {
				return err
			}
		}
		var n sql.NullInt64
		if err := tx.QueryRowContext(ctx, `SELECT MIN(next_at) FROM webhook_deliveries WHERE state = 'pending'`).Scan(&n); err != nil {
			return err
		}
		if n.Valid {
			next = fromNanos(n.Int64)
		}
		return nil
	})
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("webhooks: claim: %w", err)
	}
	return out, next, nil
}

// UpdateDelivery records an attempt's outcome.
func (s *Store) UpdateDelivery(ctx context.Context, d *webhook.Delivery) error {
	_, err := s.db.ExecContext(ctx, `UPDATE webhook_deliveries SET state = ?, attempts = ?, last_status = ?, last_error = ?,
		next_at = ?, updated_at = ?, delivered_at = ? WHERE id = ?`,
		d.State, d.Attempts, d.LastStatus, d.LastError, nanos(d.NextAt), nanos(d.UpdatedAt), nanos(d.DeliveredAt), d.ID)
	if err != nil {
		return fmt.Errorf("webhooks: %w", err)
	}
	return nil
}

// Deliveries returns a subscription's newest deliveries first.
func (s *Store) Deliveries(ctx context.Context, webhookID string, limit int) ([]*webhook.Delivery, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+deliveryColumns+` FROM webhook_deliveries WHERE webhook_id = ?
		ORDER BY id DESC LIMIT ?`, webhookID, limit)
	if err != nil {
		return nil, fmt.Errorf("webhooks: %w", err)
	}
	return scanDeliveries(rows)
}

// PurgeDeliveries removes finished deliveries last updated before before.
func (s *Store) PurgeDeliveries(ctx context.Context, before time.Time) error {
	_, err := s.db.ExecContext(ctx, `DELETE FROM webhook_deliveries WHERE state != 'pending' AND updated_at < ?`, nanos(before))
	if err != nil {
		return fmt.Errorf("webhooks: purge: %w", err)
	}
	return nil
}

var _ webhook.Store = (*Store)(nil)
