// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/corral-dev/corral/errdefs"
	"github.com/corral-dev/corral/internal/template"
)

// PutTemplate creates or replaces a template, keeping its creation time.
func (s *Store) PutTemplate(ctx context.Context, t *template.Template) (bool, error) {
	var created bool
	err := s.tx(ctx, func(tx *sql.Tx) error {
		var at int64
		err := tx.QueryRowContext(ctx, `SELECT created_at FROM templates WHERE tenant = ? AND name = ?`, t.Tenant, t.Name).Scan(&at)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			created = true
		case err != nil:
			return err
		default:
			t.CreatedAt = fromNanos(at)
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO templates (tenant, name, description, spec, allow_override, warm_pool, created_at, updated_at)
			VALUES (?,?,?,?,?,?,?,?) ON CONFLICT (tenant, name) DO UPDATE SET description = excluded.description, spec = excluded.spec,
			allow_override = excluded.allow_override, warm_pool = excluded.warm_pool, updated_at = excluded.updated_at`,
			t.Tenant, t.Name, t.Description, string(t.Spec), mustJSON(nonNilSlice(t.AllowOverride)), t.WarmPool, nanos(t.CreatedAt), nanos(t.UpdatedAt))
		return err
	})
	if err != nil {
		return false, fmt.Errorf("templates: %w", err)
	}
	return created, nil
}

const templateColumns = `tenant, name, description, spec, allow_override, warm_pool, created_at, updated_at`

func scanTemplate(sc interface{ Scan(...any) error }) (*template.Template, error) {
	t := &template.Template{}
	var spec, allow string
	var created, updated int64
	if err := sc.Scan(&t.Tenant, &t.Name, &t.Description, &spec, &allow, &t.WarmPool, &created, &updated); err != nil {
		return nil, err
	}
	t.Spec = json.RawMessage(spec)
	if err := json.Unmarshal([]byte(allow), &t.AllowOverride); err != nil {
		return nil, err
	}
	t.CreatedAt, t.UpdatedAt = fromNanos(created), fromNanos(updated)
	return t, nil
}

// GetTemplate reads one template of a tenant ("": the public ones).
func (s *Store) GetTemplate(ctx context.Context, tenant, name string) (*template.Template, error) {
	t, err := scanTemplate(s.db.QueryRowContext(ctx, `SELECT `+templateColumns+` FROM templates WHERE tenant = ? AND name = ?`, tenant, name))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("template %s: %w", name, errdefs.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("templates: %w", err)
	}
	return t, nil
}

// WarmTemplates lists every tenant's templates that keep a warm pool.
func (s *Store) WarmTemplates(ctx context.Context) ([]*template.Template, error) {
	return s.queryTemplates(ctx, `SELECT `+templateColumns+` FROM templates WHERE warm_pool > 0 ORDER BY tenant, name`)
}

// queryTemplates runs a query selecting templateColumns.
func (s *Store) queryTemplates(ctx context.Context, query string, args ...any) ([]*template.Template, error) {
	rows, err := s.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("templates: %w", err)
	}
	defer rows.Close()
	var out []*template.Template
	for rows.Next() {
		t, err := scanTemplate(rows)
		if err != nil {
			return nil, fmt.Errorf("templates: %w", err)
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// ListTemplates lists a tenant's templates ("": the public ones) by name.
func (s *Store) ListTemplates(ctx context.Context, tenant string) ([]*template.Template, error) {
	return s.queryTemplates(ctx, `SELECT `+templateColumns+` FROM templates WHERE tenant = ? ORDER BY name`, tenant)
}

// DeleteTemplate removes a template.
func (s *Store) DeleteTemplate(ctx context.Context, tenant, name string) error {
	res, err := s.db.ExecContext(ctx, `DELETE FROM templates WHERE tenant = ? AND name = ?`, tenant, name)
	if err != nil {
		return fmt.Errorf("templates: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("template %s: %w", name, errdefs.ErrNotFound)
	}
	return nil
}

var _ template.Store = (*Store)(nil)
