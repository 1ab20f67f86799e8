// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/corral-dev/corral/errdefs"
	"github.com/corral-dev/corral/internal/auth"
)

// InsertKey stores a new key. ErrAlreadyExists if its hash is known.
func (s *Store) InsertKey(ctx context.Context, k *auth.APIKey) error {
	admin := 0
	if k.Admin {
		admin = 1
	}
	var n int
	if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM api_keys WHERE hash=?`, k.Hash).Scan(&n); err != nil {
		return fmt.Errorf("insert key: %w", err)
	}
	if n > 0 {
		return fmt.Errorf("insert key: %w", errdefs.ErrAlreadyExists)
	}
	_, err := s.db.ExecContext(ctx, `INSERT INTO api_keys (id, tenant, name, hash, prefix, admin, created_at, revoked_at) VALUES (?,?,?,?,?,?,?,?)`,
		k.ID, k.Tenant, k.Name, k.Hash, k.Prefix, admin, nanos(k.CreatedAt), nullNanos(k.RevokedAt))
	if err != nil {
		return fmt.Errorf("insert key: %w", err)
	}
	return nil
}

// LoadKeys returns every key, revoked ones included, oldest first.
func (s *Store) LoadKeys(ctx context.Context) ([]*auth.APIKey, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id, tenant, name, hash, prefix, admin, created_at, revoked_at FROM api_keys ORDER BY created_at, id`)
	if err != nil {
		return nil, fmt.Errorf("load keys: %w", err)
	}
	defer rows.Close()
	var out []*auth.APIKey
	for rows.Next() {
		var k auth.APIKey
		var admin int
		var created int64
		var revoked sql.NullInt64
		if err := rows.Scan(&k.ID, &k.Tenant, &k.Name, &k.Hash, &k.Prefix, &admin, &created, &revoked); err != nil {
			return nil, fmt.Errorf("load keys: %w", err)
		}
		k.Admin, k.CreatedAt = admin == 1, fromNanos(created)
		if revoked.Valid {
			k.RevokedAt = fromNanos(revoked.Int64)
		}
		out = append(out, &k)
	}
	return out, rows.Err()
}

// RevokeKey marks a key revoked. ErrNotFound if unknown; revoking twice keeps
// the first time.
func (s *Store) RevokeKey(ctx context.Context, id string, at time.Time) error {
	res, err := s.db.ExecContext(ctx, `UPDATE api_keys SET revoked_at = COALESCE(revoked_at, ?) WHERE id=?`, nanos(at), id)
	if err != nil {
		return fmt.Errorf("revoke key: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("key %s: %w", id, errdefs.ErrNotFound)
	}
	return nil
}
