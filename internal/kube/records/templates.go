// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package records

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/corral-dev/corral/errdefs"
	"github.com/corral-dev/corral/internal/template"
)

// LabelTemplate marks the Secrets holding sandbox templates.
const LabelTemplate = "corral.dev/template"

// Templates is a template.Store in Secrets the replicas share, one per
// template (named after a digest of its tenant and name).
type Templates struct {
	*secrets
}

// NewTemplates connects to the cluster and fills the cache before it
// returns.
func NewTemplates(ctx context.Context, cfg Config) (*Templates, error) {
	s, err := openSecrets(ctx, cfg, LabelTemplate)
	if err != nil {
		return nil, err
	}
	return &Templates{s}, nil
}

func (ts *Templates) name(tenant, name string) string {
	return "corral-template-" + digest(ts.cfg.ServerID, tenant, name)
}

// PutTemplate creates or replaces a template, keeping its creation time.
func (ts *Templates) PutTemplate(ctx context.Context, t *template.Template) (bool, error) {
	created := false
	err := ts.mutate(ctx, ts.name(t.Tenant, t.Name), LabelTemplate, nil, func(data map[string][]byte) (map[string][]byte, error) {
		created = data == nil
		if !created {
			prev, err := decodeTemplate(data)
			if err != nil {
				return nil, err
			}
			t.CreatedAt = prev.CreatedAt
		}
		b, err := json.Marshal(t)
		if err != nil {
			return nil, err
		}
		return map[string][]byte{"template": b}, nil
	})
	return created, err
}

func decodeTemplate(data map[string][]byte) (*template.Template, error) {
	var t template.Template
	if err := json.Unmarshal(data["template"], &t); err != nil {
		return nil, fmt.Errorf("templates: %w", err)
	}
	return &t, nil
}

// GetTemplate reads one template of a tenant ("": the public ones) from
// the API server.
func (ts *Templates) GetTemplate(ctx context.Context, tenant, name string) (*template.Template, error) {
	var sec corev1.Secret
	err := ts.getOurs(ctx, ts.name(tenant, name), &sec)
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("template %s: %w", name, errdefs.ErrNotFound)
	}
	if err != nil {
		return nil, apiErr("read template "+name, err)
	}
	found, err := decodeTemplate(sec.Data)
	if err != nil {
		return nil, err
	}
	if found == nil || found.Tenant != tenant || found.Name != name {
		return nil, fmt.Errorf("template %s: %w", name, errdefs.ErrNotFound)
	}
	return found, nil
}

// ListTemplates lists a tenant's templates ("": the public ones) by name,
// from the cache.
func (ts *Templates) ListTemplates(ctx context.Context, tenant string) ([]*template.Template, error) {
	return ts.cached(ctx, func(t *template.Template) bool { return t.Tenant == tenant })
}

// WarmTemplates lists every tenant's templates with a warm pool.
func (ts *Templates) WarmTemplates(ctx context.Context) ([]*template.Template, error) {
	return ts.cached(ctx, func(t *template.Template) bool { return t.WarmPool > 0 })
}

// cached is the templates in the cache that keep passes, by tenant and
// name.
func (ts *Templates) cached(ctx context.Context, keep func(*template.Template) bool) ([]*template.Template, error) {
	items, err := ts.list(ctx)
	if err != nil {
		return nil, err
	}
	var out []*template.Template
	for i := range items {
		t, err := decodeTemplate(items[i].Data)
		if err != nil {
			return nil, err
		}
		if keep(t) {
			out = append(out, t)
		}
	}
	slices.SortFunc(out, func(a, b *template.Template) int {
		return strings.Compare(a.Tenant+"\x00"+a.Name, b.Tenant+"\x00"+b.Name)
	})
	return out, nil
}

// DeleteTemplate removes a template.
func (ts *Templates) DeleteTemplate(ctx context.Context, tenant, name string) error {
	found := false
	err := ts.mutate(ctx, ts.name(tenant, name), LabelTemplate, nil, func(data map[string][]byte) (map[string][]byte, error) {
		if data == nil {
			return nil, errNoChange
		}
		t, err := decodeTemplate(data)
		if err != nil {
			return nil, err
		}
		if t.Tenant != tenant || t.Name != name {
			return nil, errNoChange
		}
		found = true
		return nil, errRemove
	})
	if err != nil {
		return err
	}
	if !found {
		return fmt.Errorf("template %s: %w", name, errdefs.ErrNotFound)
	}
	return nil
}

var _ template.Store = (*Templates)(nil)
