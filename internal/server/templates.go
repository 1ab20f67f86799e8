// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"time"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/errdefs"
	"github.com/corral-dev/corral/errdefs/errhttp"
	"github.com/corral-dev/corral/internal/lifecycle"
	"github.com/corral-dev/corral/internal/template"
)

func (s *Server) templatesOff(w http.ResponseWriter, r *http.Request) bool {
	if s.cfg.Templates == nil {
		s.writeError(w, r, errdefs.New(errdefs.ErrNotImplemented, api.CodeAPINotSupported, "this server keeps no templates"))
		return true
	}
	return false
}

// maxTemplates bounds a tenant's templates (and the public ones).
const maxTemplates = 100

func templateNotFound(name string) error {
	return errdefs.Newf(errdefs.ErrNotFound, api.CodeTemplateNotFound, "template %s not found", name)
}

// findTemplate is the tenant's own template of that name, else the
// public one.
func (s *Server) findTemplate(ctx context.Context, tenant, name string) (*template.Template, error) {
	if err := template.ValidName(name); err != nil {
		return nil, templateNotFound(name)
	}
	for _, owner := range []string{tenant, ""} {
		t, err := s.cfg.Templates.GetTemplate(ctx, owner, name)
		if err == nil {
			return t, nil
		}
		if !errors.Is(err, errdefs.ErrNotFound) {
			return nil, err
		}
	}
	return nil, templateNotFound(name)
}

// templateFromRequest reads and checks a template body: its form, and
// its spec as a create (with a stand-in image when a create must give
// one). A public template needs an admin key.
func (s *Server) templateFromRequest(r *http.Request) (*template.Template, error) {
	var in api.Template
	if err := decodeStrict(r, &in); err != nil {
		return nil, err
	}
	if name := r.PathValue("name"); name != "" {
		if in.Name == "" {
			in.Name = name
		} else if in.Name != name {
			return nil, invalid("name %q differs from the path's %q", in.Name, name)
		}
	}
	t, err := template.FromWire(tenant(r), in)
	if err != nil {
		return nil, err
	}
	if p, _ := principalFrom(r.Context()); t.Tenant == "" && !p.Admin {
		return nil, errdefs.New(errdefs.ErrPermissionDenied, errhttp.CodePermissionDenied, "a public template needs an admin API key")
	}
	probe := *t
	probe.AllowOverride = template.Fields
	stand, _ := json.Marshal(map[string]any{"image": map[string]string{"uri": "template-check"}})
	var spec map[string]json.RawMessage
	_ = json.Unmarshal(t.Spec, &spec)
	if _, ok := spec["image"]; ok {
		stand = []byte(`{}`)
	}
	body, err := probe.Merge(stand)
	if err != nil {
		return nil, err
	}
	var req api.CreateSandboxRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeTemplateInvalid, "spec: %v", jsonError(err))
	}
	if _, err := createRequest(tenant(r), &req, body, ""); err != nil {
		msg, _ := errdefs.UserMessage(err)
		return nil, errdefs.Wrap(errdefs.ErrInvalidArgument, api.CodeTemplateInvalid, "spec: "+msg, err)
	}
	if _, ok := spec["image"]; !ok && !slices.Contains(t.AllowOverride, "image") {
		return nil, errdefs.New(errdefs.ErrInvalidArgument, api.CodeTemplateInvalid, "spec.image is required unless allowOverride has image")
	}
	if t.WarmPool > 0 {
		req, err := warmRequest(t)
		if err == nil {
			err = s.mgr.CheckWarmPool(req)
		}
		if err != nil {
			return nil, err
		}
	}
	now := time.Now().UTC()
	t.CreatedAt, t.UpdatedAt = now, now
	return t, nil
}

func (s *Server) createTemplate(w http.ResponseWriter, r *http.Request) {
	if s.templatesOff(w, r) {
		return
	}
	t, err := s.templateFromRequest(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if _, err := s.cfg.Templates.GetTemplate(r.Context(), t.Tenant, t.Name); err == nil {
		s.writeError(w, r, errdefs.Newf(errdefs.ErrAlreadyExists, api.CodeTemplateExists, "template %s exists; PUT /v1/templates/%s replaces it", t.Name, t.Name))
		return
	}
	if have, err := s.cfg.Templates.ListTemplates(r.Context(), t.Tenant); err != nil || len(have) >= maxTemplates {
		if err == nil {
			err = errdefs.Newf(errdefs.ErrFailedPrecondition, api.CodeTemplateLimit, "a tenant keeps at most %d templates; delete one first", maxTemplates)
		}
		s.writeError(w, r, err)
		return
	}
	if _, err := s.cfg.Templates.PutTemplate(r.Context(), t); err != nil {
		s.writeError(w, r, err)
		return
	}
	s.syncWarmPool(r.Context(), t)
	writeJSON(w, http.StatusCreated, s.wire(t))
}

// warmRequest is the create t's spec alone makes: what its warm pool
// keeps ready.
func warmRequest(t *template.Template) (lifecycle.CreateRequest, error) {
	var in api.CreateSandboxRequest
	if err := json.Unmarshal(t.Spec, &in); err != nil {
		return lifecycle.CreateRequest{}, errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeTemplateInvalid, "spec: %v", jsonError(err))
	}
	req, err := createRequest(t.Tenant, &in, t.Spec, "")
	req.Pool = t.PoolKey()
	return req, err
}

// syncWarmPool keeps t's warm pool at its size (none when it has none).
func (s *Server) syncWarmPool(ctx context.Context, t *template.Template) {
	if t.WarmPool == 0 {
		s.mgr.SetWarmPool(ctx, t.PoolKey(), lifecycle.CreateRequest{}, 0)
		return
	}
	req, err := warmRequest(t)
	if err != nil {
		s.log.WarnContext(ctx, "a template's warm pool cannot be kept", "template", t.Name, "err", err)
		return
	}
	s.mgr.SetWarmPool(ctx, t.PoolKey(), req, t.WarmPool)
}

// StartWarmPools fills the warm pools of every template that keeps one
// (at the server's start).
func (s *Server) StartWarmPools(ctx context.Context) error {
	if s.cfg.Templates == nil {
		return nil
	}
	ts, err := s.cfg.Templates.WarmTemplates(ctx)
	if err != nil {
		return err
	}
	for _, t := range ts {
		s.syncWarmPool(ctx, t)
	}
	return nil
}

// wire is t as the API shows it, with its warm sandboxes ready now.
func (s *Server) wire(t *template.Template) api.Template {
	w := t.Wire()
	if t.WarmPool > 0 {
		w.WarmReady = s.mgr.WarmReady(t.PoolKey())
	}
	return w
}

func (s *Server) putTemplate(w http.ResponseWriter, r *http.Request) {
	if s.templatesOff(w, r) {
		return
	}
	t, err := s.templateFromRequest(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	created, err := s.cfg.Templates.PutTemplate(r.Context(), t)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.syncWarmPool(r.Context(), t)
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	writeJSON(w, status, s.wire(t))
}

func (s *Server) listTemplates(w http.ResponseWriter, r *http.Request) {
	if s.templatesOff(w, r) {
		return
	}
	out := api.TemplateList{Items: []api.Template{}}
	for _, owner := range []string{tenant(r), ""} {
		ts, err := s.cfg.Templates.ListTemplates(r.Context(), owner)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		for _, t := range ts {
			out.Items = append(out.Items, s.wire(t))
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) getTemplate(w http.ResponseWriter, r *http.Request) {
	if s.templatesOff(w, r) {
		return
	}
	t, err := s.findTemplate(r.Context(), tenant(r), r.PathValue("name"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, s.wire(t))
}

// deleteTemplate removes the tenant's own template; ?public=true (an
// admin key) the public one.
func (s *Server) deleteTemplate(w http.ResponseWriter, r *http.Request) {
	if s.templatesOff(w, r) {
		return
	}
	name, owner := r.PathValue("name"), tenant(r)
	switch v := r.URL.Query().Get("public"); v {
	case "", "false":
	case "true":
		if p, _ := principalFrom(r.Context()); !p.Admin {
			s.writeError(w, r, errdefs.New(errdefs.ErrPermissionDenied, errhttp.CodePermissionDenied, "a public template needs an admin API key"))
			return
		}
		owner = ""
	default:
		s.writeError(w, r, invalid("public %q: must be true or false", v))
		return
	}
	if template.ValidName(name) != nil {
		s.writeError(w, r, templateNotFound(name))
		return
	}
	if err := s.cfg.Templates.DeleteTemplate(r.Context(), owner, name); err != nil {
		if errors.Is(err, errdefs.ErrNotFound) {
			err = templateNotFound(name)
		}
		s.writeError(w, r, err)
		return
	}
	s.syncWarmPool(r.Context(), &template.Template{Tenant: owner, Name: name})
	w.WriteHeader(http.StatusNoContent)
}

// fromTemplate lays a create over the template it names (in becomes the
// merged create) and returns the template, or nil when it names none.
func (s *Server) fromTemplate(r *http.Request, in *api.CreateSandboxRequest, body []byte) (*template.Template, error) {
	name, ok := in.Extensions[api.ExtensionTemplate]
	if !ok {
		return nil, nil
	}
	if s.cfg.Templates == nil {
		return nil, errdefs.New(errdefs.ErrInvalidArgument, api.CodeAPINotSupported, "this server keeps no templates")
	}
	t, err := s.findTemplate(r.Context(), tenant(r), name)
	if err != nil {
		// In a create, a bad reference is the request's fault: 400.
		return nil, errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeTemplateNotFound, "extensions[%s]: template %s not found", api.ExtensionTemplate, name)
	}
	merged, err := t.Merge(body)
	if err != nil {
		return nil, err
	}
	*in = api.CreateSandboxRequest{}
	if err := json.Unmarshal(merged, in); err != nil {
		return nil, jsonError(err)
	}
	return t, nil
}
