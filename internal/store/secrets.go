// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/corral-dev/corral/errdefs"
	"github.com/corral-dev/corral/internal/secrets"
)

// PutSecret creates or replaces a secret; created reports which.
func (s *Store) PutSecret(ctx context.Context, sec secrets.Secret) (created bool, err error) {
	err = s.tx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE secrets SET value=?, updated_at=? WHERE tenant=? AND name=?`,
			sec.Value, nanos(sec.UpdatedAt), sec.Tenant, sec.Name)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n > 0 {
			return nil
		}
		created = true
		_, err = tx.ExecContext(ctx, `INSERT INTO secrets (tenant, name, value, created_at, updated_at) VALUES (?,?,?,?,?)`,
			sec.Tenant, sec.Name, sec.Value, nanos(sec.CreatedAt), nanos(sec.UpdatedAt))
		return err
	})
	if err != nil {
		return false, fmt.Errorf("put secret: %w", err)
	}
	return created, nil
}

// GetSecret returns one secret, value included.
func (s *Store) GetSecret(ctx context.Context, tenant, name string) (secrets.Secret, error) {
	sec := secrets.Secret{Tenant: tenant, Name: name}
	var c, u int64
	err := s.db.QueryRowContext(ctx, `SELECT value, created_at, updated_at FROM secrets WHERE tenant=? AND name=?`, tenant, name).Scan(&sec.Value, &c, &u)
	if errors.Is(err, sql.ErrNoRows) {
		return sec, fmt.Errorf("secret %q: %w", name, errdefs.ErrNotFound)
	}
	if err != nil {
		return sec, fmt.Errorf("get secret: %w", err)
	}
	sec.CreatedAt, sec.UpdatedAt = fromNanos(c), fromNanos(u)
	return sec, nil
}

// ListSecrets returns a tenant's secrets without their values, by name.
func (s *Store) ListSecrets(ctx context.Context, tenant string) ([]secrets.Secret, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT name, created_at, updated_at FROM secrets WHERE tenant=? ORDER BY name`, tenant)
	if err != nil {
		return nil, fmt.Errorf("list secrets: %w", err)
	}
	defer rows.Close()
	var out []secrets.Secret
	for rows.Next() {
		sec := secrets.Secret{Tenant: tenant}
		var c, u int64
		if err := rows.Scan(&sec.Name, &c, &u); err != nil {
			return nil, fmt.Errorf("list secrets: %w", err)
		}
		sec.CreatedAt, sec.UpdatedAt = fromNanos(c), fromNanos(u)
		out = append(out, sec)
	}
	return out, rows.Err()
}

// DeleteSecret removes a secret.
func (s *Store) DeleteSecret(ctx context.Context, tenant, name string) error {
	res, err := s.db.ExecContext(ctx, `DELETE FROM secrets WHERE tenant=? AND name=?`, tenant, name)
	if err != nil {
		return fmt.Errorf("delete secret: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("secret %q: %w", name, errdefs.ErrNotFound)
	}
	return nil
}
