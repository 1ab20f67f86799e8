// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/corral-dev/corral/internal/sandbox"
)

// TenantEvents returns a tenant's published events after q.After, oldest
// first (the lifecycle's EventLog). One connection writes and reads, and an
// event's position is given at its insert: a position is readable only
// once every lower one is.
func (s *Store) TenantEvents(ctx context.Context, q sandbox.EventQuery) ([]sandbox.Event, error) {
	query := `SELECT ` + eventColumns + ` FROM events WHERE tenant = ? AND seq > ? AND kind != ''`
	args := []any{q.Tenant, q.After}
	if q.SandboxID != "" {
		query += ` AND sandbox_id = ?`
		args = append(args, q.SandboxID)
	}
	if len(q.Kinds) > 0 {
		query += ` AND kind IN (?` + strings.Repeat(",?", len(q.Kinds)-1) + `)`
		for _, k := range q.Kinds {
			args = append(args, k)
		}
	}
	query += ` ORDER BY seq LIMIT ?`
	args = append(args, q.Limit)
	return s.queryEvents(ctx, query, args)
}

// eventColumns are what queryEvents scans.
const eventColumns = `seq, at, tenant, sandbox_id, type, state, reason, message, detail, kind, metadata`

// queryEvents runs an events query selecting eventColumns.
func (s *Store) queryEvents(ctx context.Context, query string, args []any) ([]sandbox.Event, error) {
	rows, err := s.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("events: %w", err)
	}
	defer rows.Close()
	var out []sandbox.Event
	for rows.Next() {
		var ev sandbox.Event
		var at int64
		var md string
		if err := rows.Scan(&ev.Seq, &at, &ev.Tenant, &ev.SandboxID, &ev.Type, &ev.State, &ev.Reason, &ev.Message,
			&ev.Detail, &ev.Kind, &md); err != nil {
			return nil, fmt.Errorf("events: %w", err)
		}
		ev.At = fromNanos(at)
		if md != "" {
			if err := json.Unmarshal([]byte(md), &ev.Metadata); err != nil {
				return nil, fmt.Errorf("events: event %d: metadata: %w", ev.Seq, err)
			}
		}
		out = append(out, ev)
	}
	return out, rows.Err()
}

// LastSeq is the newest event's position (0: none).
func (s *Store) LastSeq(ctx context.Context) (int64, error) {
	var n int64
	// sqlite_sequence keeps AUTOINCREMENT's high-water mark, which a trim
	// of the newest rows cannot lower.
	err := s.db.QueryRowContext(ctx, `SELECT COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'events'), 0)`).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("events: %w", err)
	}
	return n, nil
}
