// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package records

import (
	"context"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/internal/quota"
)

// LabelQuotas marks the Secret holding the tenants' quota overrides.
const LabelQuotas = "corral.dev/quotas"

// Quotas is a lifecycle.QuotaStore in one Secret the replicas share:
// every tenant's overrides in their wire form.
type Quotas struct {
	*secrets
}

// NewQuotas connects to the cluster and fills the cache before it
// returns.
func NewQuotas(ctx context.Context, cfg Config) (*Quotas, error) {
	s, err := openSecrets(ctx, cfg, LabelQuotas)
	if err != nil {
		return nil, err
	}
	return &Quotas{s}, nil
}

func (q *Quotas) name() string { return "corral-quotas-" + digest(q.cfg.ServerID) }

// Quotas reads every tenant's overrides from the cache.
func (q *Quotas) Quotas(ctx context.Context) (map[string]quota.Overrides, error) {
	items, err := q.list(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]quota.Overrides{}
	for i := range items {
		if items[i].Name != q.name() {
			continue
		}
		var all map[string]api.QuotaRequest
		if err := json.Unmarshal(items[i].Data["overrides"], &all); err != nil {
			return nil, fmt.Errorf("quotas: %w", err)
		}
		for tenant, w := range all {
			o, err := quota.FromWire(w)
			if err != nil {
				return nil, fmt.Errorf("quotas: tenant %s: %w", tenant, err)
			}
			out[tenant] = o
		}
	}
	return out, nil
}

// PutQuota replaces a tenant's overrides.
func (q *Quotas) PutQuota(ctx context.Context, tenant string, o quota.Overrides) error {
	w := o.Wire()
	return q.change(ctx, func(all map[string]api.QuotaRequest) bool { all[tenant] = w; return true })
}

// DeleteQuota drops a tenant's overrides; none is not an error.
func (q *Quotas) DeleteQuota(ctx context.Context, tenant string) error {
	return q.change(ctx, func(all map[string]api.QuotaRequest) bool {
		_, ok := all[tenant]
		delete(all, tenant)
		return ok
	})
}

// change applies f to the overrides by compare and swap.
func (q *Quotas) change(ctx context.Context, f func(map[string]api.QuotaRequest) bool) error {
	return q.mutate(ctx, q.name(), LabelQuotas, labels.Set{}, func(data map[string][]byte) (map[string][]byte, error) {
		all := map[string]api.QuotaRequest{}
		if data != nil {
			if err := json.Unmarshal(data["overrides"], &all); err != nil {
				return nil, fmt.Errorf("quotas: %w", err)
			}
		}
		if !f(all) {
			return nil, errNoChange
		}
		b, err := json.Marshal(all)
		if err != nil {
			return nil, err
		}
		return map[string][]byte{"overrides": b}, nil
	})
}
