// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	"github.com/corral-dev/corral/internal/sandbox"
)

// PutSnapshot inserts or replaces a snapshot record and appends ev.
func (s *Store) PutSnapshot(ctx context.Context, sn *sandbox.Snapshot, ev *sandbox.Event) error {
	err := s.tx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO snapshots (id, tenant, sandbox_id, name, state, reason, message,
			last_transition_at, created_at, driver, ref) VALUES (?,?,?,?,?,?,?,?,?,?,?)`,
			sn.ID, sn.Tenant, sn.SandboxID, sn.Name, sn.State.String(), sn.Reason, sn.Message,
			nanos(sn.LastTransitionAt), nanos(sn.CreatedAt), sn.Driver, nullString(string(sn.Ref)))
		if err != nil {
			return err
		}
		return insertEvent(ctx, tx, ev)
	})
	if err != nil {
		return fmt.Errorf("put snapshot %s: %w", sn.ID, err)
	}
	return nil
}

// DeleteSnapshot removes a snapshot record and appends ev.
func (s *Store) DeleteSnapshot(ctx context.Context, id string, ev *sandbox.Event) error {
	err := s.tx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM snapshots WHERE id=?`, id); err != nil {
			return err
		}
		return insertEvent(ctx, tx, ev)
	})
	if err != nil {
		return fmt.Errorf("delete snapshot %s: %w", id, err)
	}
	return nil
}

// LoadSnapshots returns every snapshot record, oldest first.
func (s *Store) LoadSnapshots(ctx context.Context) ([]*sandbox.Snapshot, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id, tenant, sandbox_id, name, state, reason, message, last_transition_at,
		created_at, driver, ref FROM snapshots ORDER BY created_at, id`)
	if err != nil {
		return nil, fmt.Errorf("load snapshots: %w", err)
	}
	defer rows.Close()
	var out []*sandbox.Snapshot
	for rows.Next() {
		var sn sandbox.Snapshot
		var state string
		var lta, created int64
		var ref sql.NullString
		if err := rows.Scan(&sn.ID, &sn.Tenant, &sn.SandboxID, &sn.Name, &state, &sn.Reason, &sn.Message, &lta, &created, &sn.Driver, &ref); err != nil {
			return nil, fmt.Errorf("load snapshots: %w", err)
		}
		st, err := sandbox.ParseSnapshotState(state)
		if err != nil {
			return nil, fmt.Errorf("snapshot %s: %w", sn.ID, err)
		}
		sn.State, sn.LastTransitionAt, sn.CreatedAt = st, fromNanos(lta), fromNanos(created)
		if ref.Valid {
			sn.Ref = json.RawMessage(ref.String)
		}
		out = append(out, &sn)
	}
	return out, rows.Err()
}
