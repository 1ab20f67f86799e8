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
	writeJSON(w, http.StatusCreated, t.Wire())
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
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	writeJSON(w, status, t.Wire())
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
			out.Items = append(out.Items, t.Wire())
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
	writeJSON(w, http.StatusOK, t.Wire())
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
	w.WriteHeader(http.StatusNoContent)
}

// fromTemplate is a create body laid over the template it names, or the
// body itself when it names none.
func (s *Server) fromTemplate(r *http.Request, in *api.CreateSandboxRequest, body []byte) ([]byte, error) {
	name, ok := in.Extensions[api.ExtensionTemplate]
	if !ok {
		return body, nil
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
	return merged, nil
}
