// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

// Package template is the model of sandbox templates: named create
// presets of a tenant (or public, an admin's), which fields of a create
// may override one, and the merge of a create into its template's spec.
// Merging works on the JSON of a create body, field by field, so a
// template holds exactly what a create would, and a merged body is then
// checked by the same rules as any create. The server's store keeps
// templates; internal/server serves them.
package template

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/errdefs"
)

// Template is a stored template. Tenant is "" for a public one.
type Template struct {
	Tenant        string
	Name          string
	Description   string
	Spec          json.RawMessage
	AllowOverride []string
	// WarmPool is how many sandboxes of it are kept started ahead of
	// time (0: none).
	WarmPool  int
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Store keeps templates (internal/store implements it). Get and Delete
// answer errdefs.ErrNotFound for an unknown one; Put creates or
// replaces.
type Store interface {
	PutTemplate(ctx context.Context, t *Template) (created bool, err error)
	GetTemplate(ctx context.Context, tenant, name string) (*Template, error)
	ListTemplates(ctx context.Context, tenant string) ([]*Template, error)
	DeleteTemplate(ctx context.Context, tenant, name string) error
	// WarmTemplates lists every tenant's templates with a warm pool.
	WarmTemplates(ctx context.Context) ([]*Template, error)
}

// Fields are the create fields a template's spec may hold, and a create
// may override when allowed.
var Fields = []string{"image", "entrypoint", "env", "resourceLimits", "networkPolicy", "volumes", "timeout", "extensions", "metadata", "platform"}

// mapFields merge key by key.
var mapFields = []string{"env", "resourceLimits", "extensions", "metadata"}

// DefaultAllow is what a create may override when a template says
// nothing: its environment and metadata.
var DefaultAllow = []string{"env", "metadata"}

// Limits.
const (
	maxSpec        = 256 << 10
	maxDescription = 256
	// MaxWarmPool bounds a template's warm pool.
	MaxWarmPool = 32
)

func invalid(format string, args ...any) error {
	return errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeTemplateInvalid, format, args...)
}

// ValidName checks a template name: 1 to 63 of a-z, 0-9, '-', '.', '_', starting with a letter
// or digit.
func ValidName(n string) error {
	if n == "" || len(n) > 63 {
		return invalid("template name %q: 1 to 63 characters", n)
	}
	for i, c := range n {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || i > 0 && (c == '-' || c == '.' || c == '_')) {
			return invalid("template name %q: lower-case letters, digits, '-', '.' and '_', starting with a letter or digit", n)
		}
	}
	return nil
}

// FromWire checks a template's request (its spec is then checked as a
// create by the caller) and returns the stored form.
func FromWire(tenant string, in api.Template) (*Template, error) {
	if err := ValidName(in.Name); err != nil {
		return nil, err
	}
	if len(in.Description) > maxDescription {
		return nil, invalid("description is longer than %d bytes", maxDescription)
	}
	if len(in.Spec) > maxSpec {
		return nil, invalid("spec is larger than %d bytes", maxSpec)
	}
	spec, err := object(in.Spec, "spec")
	if err != nil {
		return nil, err
	}
	for k := range spec {
		if !slices.Contains(Fields, k) {
			return nil, invalid("spec.%s: a template holds %s", k, strings.Join(Fields, ", "))
		}
	}
	if ext, ok := spec["extensions"]; ok {
		var m map[string]string
		if json.Unmarshal(ext, &m) == nil {
			if _, nested := m[api.ExtensionTemplate]; nested {
				return nil, invalid("spec.extensions[%s]: a template cannot name another", api.ExtensionTemplate)
			}
		}
	}
	if in.WarmPool < 0 || in.WarmPool > MaxWarmPool {
		return nil, invalid("warmPool %d: 0 to %d", in.WarmPool, MaxWarmPool)
	}
	if in.WarmReady != 0 {
		return nil, invalid("warmReady is the server's answer, not a field to set")
	}
	allow := slices.Clone(in.AllowOverride)
	for _, f := range allow {
		if !slices.Contains(Fields, f) {
			return nil, invalid("allowOverride %q: the fields are %s", f, strings.Join(Fields, ", "))
		}
	}
	if allow == nil {
		allow = slices.Clone(DefaultAllow)
	}
	slices.Sort(allow)
	owner := tenant
	if in.Public {
		owner = ""
	}
	canon, _ := json.Marshal(spec)
	return &Template{Tenant: owner, Name: in.Name, Description: in.Description, Spec: canon, AllowOverride: slices.Compact(allow),
		WarmPool: in.WarmPool}, nil
}

// Wire is t as the API shows it.
func (t *Template) Wire() api.Template {
	return api.Template{Name: t.Name, Description: t.Description, Public: t.Tenant == "", Spec: t.Spec,
		AllowOverride: t.AllowOverride, WarmPool: t.WarmPool, CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt}
}

// PoolKey names t's warm pool (public templates' and tenants' apart).
func (t *Template) PoolKey() string { return "template:" + t.Tenant + "/" + t.Name }

// object decodes a JSON object, refusing anything else.
func object(raw json.RawMessage, what string) (map[string]json.RawMessage, error) {
	var m map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(raw))
	if len(bytes.TrimSpace(raw)) == 0 || dec.Decode(&m) != nil || m == nil || dec.More() {
		return nil, invalid("%s must be a JSON object", what)
	}
	return m, nil
}

// Merge returns the create body of t with the fields of body (a create
// naming t) laid over it: each field body gives must be one t allows,
// but for extensions that only name the template; map fields (env,
// resourceLimits, extensions, metadata) merge key by key, the others are
// replaced. The template's name stays in the result's extensions.
func (t *Template) Merge(body []byte) ([]byte, error) {
	req, err := object(body, "the request body")
	if err != nil {
		return nil, err
	}
	out, err := object(t.Spec, "the template's spec")
	if err != nil {
		return nil, err
	}
	for k, v := range req {
		if k == "extensions" {
			var m map[string]string
			if json.Unmarshal(v, &m) == nil && len(m) == 1 {
				continue // only the template's name: handled below
			}
		}
		if !slices.Contains(t.AllowOverride, k) {
			if !slices.Contains(Fields, k) {
				out[k] = v // not a template field: the create's own checks answer it
				continue
			}
			return nil, errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeTemplateOverride,
				"template %s does not let a create set %s (it allows %s)", t.Name, k, strings.Join(t.AllowOverride, ", "))
		}
		if !slices.Contains(mapFields, k) {
			out[k] = v
			continue
		}
		merged := map[string]json.RawMessage{}
		if base, ok := out[k]; ok {
			if err := json.Unmarshal(base, &merged); err != nil {
				return nil, invalid("the template's %s is not an object", k)
			}
		}
		var over map[string]json.RawMessage
		if err := json.Unmarshal(v, &over); err != nil {
			return nil, errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeInvalidRequestBody, "%s must be an object", k)
		}
		maps.Copy(merged, over)
		out[k], _ = json.Marshal(merged)
	}
	ext := map[string]json.RawMessage{}
	if base, ok := out["extensions"]; ok {
		_ = json.Unmarshal(base, &ext)
	}
	if v, ok := req["extensions"]; ok && slices.Contains(t.AllowOverride, "extensions") {
		var over map[string]json.RawMessage
		_ = json.Unmarshal(v, &over)
		maps.Copy(ext, over)
	}
	name, _ := json.Marshal(t.Name)
	ext[api.ExtensionTemplate] = name
	out["extensions"], _ = json.Marshal(ext)
	b, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("template %s: %w", t.Name, err)
	}
	return b, nil
}
