// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package records

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/errdefs"
	"github.com/corral-dev/corral/internal/webhook"
)

// LabelWebhook marks the Secrets holding webhook subscriptions.
const LabelWebhook = "corral.dev/webhook"

// Bounds of a subscription's outbox, which lives in its Secret.
const (
	// KeepFinished is how many finished deliveries stay listed.
	KeepFinished = 100
	// outboxBytes bounds the bodies of pending deliveries: past it the
	// oldest are dead-lettered unsent.
	outboxBytes = 640 << 10
)

// Webhooks is a webhook.Store in Secrets the replicas share: one per
// subscription, holding it, its cursor in the event log and its outbox.
// Every change is a compare-and-swap of that Secret, so two replicas
// neither enqueue an event twice (the cursor moves in the same write)
// nor claim one delivery both.
type Webhooks struct {
	*secrets
}

// NewWebhooks connects to the cluster and fills the cache before it
// returns.
func NewWebhooks(ctx context.Context, cfg Config) (*Webhooks, error) {
	s, err := openSecrets(ctx, cfg, LabelWebhook)
	if err != nil {
		return nil, err
	}
	return &Webhooks{s}, nil
}

// subscription is a subscription Secret's content.
type subscription struct {
	Webhook    webhook.Webhook     `json:"webhook"`
	NextID     int64               `json:"nextId"`
	Deliveries []*webhook.Delivery `json:"deliveries"`
}

func (ws *Webhooks) name(id string) string { return "corral-webhook-" + digest(ws.cfg.ServerID, id) }

func decodeSubscription(data map[string][]byte) (*subscription, error) {
	var s subscription
	if err := json.Unmarshal(data["subscription"], &s); err != nil {
		return nil, fmt.Errorf("webhooks: %w", err)
	}
	return &s, nil
}

// change applies f to subscription id by compare and swap; f returns
// whether to write. An unknown subscription is errdefs.ErrNotFound.
func (ws *Webhooks) change(ctx context.Context, id string, f func(*subscription) (bool, error)) error {
	return ws.mutate(ctx, ws.name(id), LabelWebhook, nil, func(data map[string][]byte) (map[string][]byte, error) {
		if data == nil {
			return nil, fmt.Errorf("webhook %s: %w", id, errdefs.ErrNotFound)
		}
		s, err := decodeSubscription(data)
		if err != nil {
			return nil, err
		}
		write, err := f(s)
		if err != nil {
			return nil, err
		}
		if !write {
			return nil, errNoChange
		}
		s.bound()
		b, err := json.Marshal(s)
		if err != nil {
			return nil, err
		}
		return map[string][]byte{"subscription": b}, nil
	})
}

// bound keeps the outbox within its Secret: the newest KeepFinished
// finished deliveries (without their bodies), and pending bodies within
// outboxBytes, dead-lettering the oldest pending ones past it.
func (s *subscription) bound() {
	pending := 0
	for i := len(s.Deliveries) - 1; i >= 0; i-- {
		d := s.Deliveries[i]
		if d.State != api.DeliveryPending {
			d.Body = nil
			continue
		}
		pending += len(d.Body)
		if pending > outboxBytes {
			d.State, d.Body, d.LastError, d.UpdatedAt = api.DeliveryDead, nil, "dropped unsent: the subscription's outbox is full", time.Now().UTC()
		}
	}
	finished := 0
	for i := len(s.Deliveries) - 1; i >= 0; i-- {
		if s.Deliveries[i].State != api.DeliveryPending {
			finished++
			if finished > KeepFinished {
				s.Deliveries = slices.Delete(s.Deliveries, i, i+1)
			}
		}
	}
}

// InsertWebhook stores a new subscription.
func (ws *Webhooks) InsertWebhook(ctx context.Context, w *webhook.Webhook) error {
	b, err := json.Marshal(subscription{Webhook: *w})
	if err != nil {
		return err
	}
	sec := &corev1.Secret{ObjectMeta: ws.meta(ws.name(w.ID), LabelWebhook), Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{"subscription": b}}
	if err := ws.c.Create(ctx, sec); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("webhook %s: %w", w.ID, errdefs.ErrAlreadyExists)
		}
		return apiErr("store a webhook", err)
	}
	return nil
}

// cached is every subscription in the cache.
func (ws *Webhooks) cached(ctx context.Context) ([]*subscription, error) {
	items, err := ws.list(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]*subscription, 0, len(items))
	for i := range items {
		s, err := decodeSubscription(items[i].Data)
		if err != nil {
			ws.cfg.logger().WarnContext(ctx, "an unreadable webhook subscription is skipped", "secret", items[i].Name, "err", err)
			continue
		}
		out = append(out, s)
	}
	return out, nil
}

// Webhooks lists a tenant's subscriptions (every tenant's for ""), oldest
// first, from the cache.
func (ws *Webhooks) Webhooks(ctx context.Context, tenant string) ([]*webhook.Webhook, error) {
	subs, err := ws.cached(ctx)
	if err != nil {
		return nil, err
	}
	var out []*webhook.Webhook
	for _, s := range subs {
		if tenant == "" || s.Webhook.Tenant == tenant {
			w := s.Webhook
			out = append(out, &w)
		}
	}
	slices.SortFunc(out, func(a, b *webhook.Webhook) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out, nil
}

// DeleteWebhook removes a tenant's subscription and its outbox.
func (ws *Webhooks) DeleteWebhook(ctx context.Context, tenant, id string) error {
	found := false
	err := ws.mutate(ctx, ws.name(id), LabelWebhook, nil, func(data map[string][]byte) (map[string][]byte, error) {
		if data == nil {
			return nil, errNoChange
		}
		s, err := decodeSubscription(data)
		if err != nil {
			return nil, err
		}
		if s.Webhook.Tenant != tenant {
			return nil, errNoChange
		}
		found = true
		return nil, errRemove
	})
	if err != nil {
		return err
	}
	if !found {
		return fmt.Errorf("webhook %s: %w", id, errdefs.ErrNotFound)
	}
	return nil
}

// Enqueue adds deliveries and moves the cursor in one write; deliveries
// of events at or below the stored cursor (another replica enqueued them
// first) are left out.
func (ws *Webhooks) Enqueue(ctx context.Context, webhookID string, ds []*webhook.Delivery, cursor int64) error {
	err := ws.change(ctx, webhookID, func(s *subscription) (bool, error) {
		if cursor <= s.Webhook.Cursor {
			return false, nil
		}
		for _, d := range ds {
			if d.EventSeq > s.Webhook.Cursor {
				c := *d
				s.NextID++
				c.ID = s.NextID
				s.Deliveries = append(s.Deliveries, &c)
			}
		}
		s.Webhook.Cursor = cursor
		return true, nil
	})
	if errors.Is(err, errdefs.ErrNotFound) {
		return nil // deleted meanwhile
	}
	return err
}

// InsertDelivery records a delivery outside the outbox (a ping).
func (ws *Webhooks) InsertDelivery(ctx context.Context, d *webhook.Delivery) error {
	return ws.change(ctx, d.WebhookID, func(s *subscription) (bool, error) {
		s.NextID++
		d.ID = s.NextID
		c := *d
		s.Deliveries = append(s.Deliveries, &c)
		return true, nil
	})
}

// ClaimDue claims the due pending deliveries of every subscription, each
// subscription's in one write, and says when the next other one is due.
func (ws *Webhooks) ClaimDue(ctx context.Context, now time.Time, lease time.Duration, limit int) ([]*webhook.Delivery, time.Time, error) {
	subs, err := ws.cached(ctx)
	if err != nil {
		return nil, time.Time{}, err
	}
	var out []*webhook.Delivery
	var next time.Time
	later := func(t time.Time) {
		if next.IsZero() || t.Before(next) {
			next = t
		}
	}
	for _, cached := range subs {
		due := false
		for _, d := range cached.Deliveries {
			if d.State == api.DeliveryPending {
				if !d.NextAt.After(now) {
					due = true
				} else {
					later(d.NextAt)
				}
			}
		}
		if !due || len(out) >= limit {
			continue
		}
		var claimed []*webhook.Delivery
		err := ws.change(ctx, cached.Webhook.ID, func(s *subscription) (bool, error) {
			claimed = claimed[:0]
			for _, d := range s.Deliveries {
				if d.State == api.DeliveryPending && !d.NextAt.After(now) && len(out)+len(claimed) < limit {
					c := *d
					claimed = append(claimed, &c)
					d.NextAt = now.Add(lease)
				}
			}
			return len(claimed) > 0, nil
		})
		if errors.Is(err, errdefs.ErrNotFound) {
			continue
		}
		if err != nil {
			return out, next, err
		}
		out = append(out, claimed...)
		if len(claimed) > 0 {
			later(now.Add(lease))
		}
	}
	slices.SortFunc(out, func(a, b *webhook.Delivery) int { return a.NextAt.Compare(b.NextAt) })
	return out, next, nil
}

// UpdateDelivery records an attempt's outcome.
func (ws *Webhooks) UpdateDelivery(ctx context.Context, d *webhook.Delivery) error {
	err := ws.change(ctx, d.WebhookID, func(s *subscription) (bool, error) {
		i := slices.IndexFunc(s.Deliveries, func(x *webhook.Delivery) bool { return x.ID == d.ID })
		if i < 0 {
			return false, nil
		}
		x := s.Deliveries[i]
		x.State, x.Attempts, x.LastStatus, x.LastError = d.State, d.Attempts, d.LastStatus, d.LastError
		x.NextAt, x.UpdatedAt, x.DeliveredAt = d.NextAt, d.UpdatedAt, d.DeliveredAt
		return true, nil
	})
	if errors.Is(err, errdefs.ErrNotFound) {
		return nil
	}
	return err
}

// Deliveries returns a subscription's newest deliveries first, read
// from the API server.
func (ws *Webhooks) Deliveries(ctx context.Context, webhookID string, limit int) ([]*webhook.Delivery, error) {
	var sec corev1.Secret
	err := ws.getOurs(ctx, ws.name(webhookID), &sec)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, apiErr("read webhook "+webhookID, err)
	}
	s, err := decodeSubscription(sec.Data)
	if err != nil {
		return nil, err
	}
	out := slices.Clone(s.Deliveries)
	slices.Reverse(out)
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// PurgeDeliveries removes finished deliveries last updated before before.
func (ws *Webhooks) PurgeDeliveries(ctx context.Context, before time.Time) error {
	subs, err := ws.cached(ctx)
	if err != nil {
		return err
	}
	old := func(d *webhook.Delivery) bool { return d.State != api.DeliveryPending && d.UpdatedAt.Before(before) }
	for _, cached := range subs {
		if !slices.ContainsFunc(cached.Deliveries, old) {
			continue
		}
		err := ws.change(ctx, cached.Webhook.ID, func(s *subscription) (bool, error) {
			n := len(s.Deliveries)
			s.Deliveries = slices.DeleteFunc(s.Deliveries, old)
			return len(s.Deliveries) < n, nil
		})
		if err != nil && !errors.Is(err, errdefs.ErrNotFound) {
			return err
		}
	}
	return nil
}

var _ webhook.Store = (*Webhooks)(nil)
