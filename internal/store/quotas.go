// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/internal/quota"
)

// Quotas reads every tenant's overrides.
func (s *Store) Quotas(ctx context.Context) (map[string]quota.Overrides, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT tenant, spec FROM quotas`)
	if err != nil {
		return nil, fmt.Errorf("quotas: %w", err)
	}
	defer rows.Close()
	out := map[string]quota.Overrides{}
	for rows.Next() {
		var tenant, spec string
		if err := rows.Scan(&tenant, &spec); err != nil {
			return nil, fmt.Errorf("quotas: %w", err)
		}
		var w api.QuotaRequest
		if err := json.Unmarshal([]byte(spec), &w); err != nil {
			return nil, fmt.Errorf("quotas: tenant %s: %w", tenant, err)
		}
		o, err := quota.FromWire(w)
		if err != nil {
			return nil, fmt.Errorf("quotas: tenant %s: %w", tenant, err)
		}
		out[tenant] = o
	}
	return out, rows.Err()
}

// PutQuota replaces a tenant's overrides.
func (s *Store) PutQuota(ctx context.Context, tenant string, o quota.Overrides) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO quotas (tenant, spec, updated_at) VALUES (?,?,?)
		ON CONFLICT (tenant) DO UPDATE SET spec = excluded.spec, updated_at = excluded.updated_at`,
		tenant, mustJSON(o.Wire()), time.Now().UnixNano())
	if err != nil {
		return fmt.Errorf("quotas: %w", err)
	}
	return nil
}

// DeleteQuota drops a tenant's overrides; none is not an error.
func (s *Store) DeleteQuota(ctx context.Context, tenant string) error {
	if _, err := s.db.ExecContext(ctx, `DELETE FROM quotas WHERE tenant = ?`, tenant); err != nil {
		return fmt.Errorf("quotas: %w", err)
	}
	return nil
}
