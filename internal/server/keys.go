// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"net/http"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/internal/auth"
)

func toAPIKey(k *auth.APIKey) api.APIKey {
	return api.APIKey{ID: k.ID, Tenant: k.Tenant, Name: k.Name, Prefix: k.Prefix, Admin: k.Admin,
		CreatedAt: wireTime(k.CreatedAt), RevokedAt: wireTimePtr(k.RevokedAt)}
}

func (s *Server) createKey(w http.ResponseWriter, r *http.Request) {
	var in api.CreateAPIKeyRequest
	if _, err := decodeJSON(r, &in, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	key, rec, err := s.keys.Create(r.Context(), in.Tenant, in.Name, in.Admin)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := toAPIKey(rec)
	out.Key = key
	writeJSON(w, http.StatusCreated, out)
}

func (s *Server) listKeys(w http.ResponseWriter, r *http.Request) {
	keys, err := s.keys.List(r.Context())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := api.ListAPIKeysResponse{Items: make([]api.APIKey, 0, len(keys))}
	for _, k := range keys {
		out.Items = append(out.Items, toAPIKey(k))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) revokeKey(w http.ResponseWriter, r *http.Request) {
	if err := s.keys.Revoke(r.Context(), r.PathValue("id")); err != nil {
		s.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
