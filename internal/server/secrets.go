// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"net/http"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/errdefs"
)

func (s *Server) secretsOff(w http.ResponseWriter, r *http.Request) bool {
	if s.cfg.Secrets == nil {
		s.writeError(w, r, errdefs.New(errdefs.ErrNotImplemented, api.CodeAPINotSupported, "this server does not serve secrets"))
		return true
	}
	return false
}

// putSecret stores a secret of the caller's tenant: {"value": "..."}.
func (s *Server) putSecret(w http.ResponseWriter, r *http.Request) {
	if s.secretsOff(w, r) {
		return
	}
	var in struct {
		Value *string `json:"value"`
	}
	if _, err := decodeJSON(r, &in, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	if in.Value == nil {
		s.writeError(w, r, invalid("value is required"))
		return
	}
	name := r.PathValue("name")
	created, err := s.cfg.Secrets.Put(r.Context(), tenant(r), name, *in.Value)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	code := http.StatusOK
	if created {
		code = http.StatusCreated
	}
	writeJSON(w, code, api.Secret{Name: name})
}

// listSecrets lists the caller's tenant's secrets, without values.
func (s *Server) listSecrets(w http.ResponseWriter, r *http.Request) {
	if s.secretsOff(w, r) {
		return
	}
	list, err := s.cfg.Secrets.List(r.Context(), tenant(r))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := api.SecretList{Items: make([]api.Secret, 0, len(list))}
	for _, sec := range list {
		out.Items = append(out.Items, api.Secret{Name: sec.Name, CreatedAt: wireTimePtr(sec.CreatedAt), UpdatedAt: wireTimePtr(sec.UpdatedAt)})
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) deleteSecret(w http.ResponseWriter, r *http.Request) {
	if s.secretsOff(w, r) {
		return
	}
	if err := s.cfg.Secrets.Delete(r.Context(), tenant(r), r.PathValue("name")); err != nil {
		s.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
