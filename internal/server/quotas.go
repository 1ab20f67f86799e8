// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/errdefs"
	"github.com/corral-dev/corral/internal/auth"
	"github.com/corral-dev/corral/internal/quota"
)

// quotaHeaders adds Retry-After and what was passed to the answer of a
// request refused for a quota.
func quotaHeaders(w http.ResponseWriter, err error) {
	var qe *quota.Error
	if !errors.As(err, &qe) {
		var e *errdefs.Error
		if errors.As(err, &e) && e.Code == api.CodeQuotaQueueInterrupted {
			w.Header().Set("Retry-After", "5")
		}
		return
	}
	h := w.Header()
	h.Set("Retry-After", strconv.FormatInt(qe.RetrySeconds(), 10))
	h.Set(api.HeaderQuotaLimit, qe.Limit)
	h.Set(api.HeaderQuotaMax, strconv.FormatInt(qe.Max, 10))
	h.Set(api.HeaderQuotaUsed, strconv.FormatInt(qe.Used, 10))
}

// ownQuota answers GET /v1/quota: the caller's tenant's quotas and use.
func (s *Server) ownQuota(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.mgr.QuotaStatus(r.Context(), tenant(r)))
}

func (s *Server) listQuotas(w http.ResponseWriter, r *http.Request) {
	out := api.QuotaStatusList{Items: []api.QuotaStatus{}}
	for _, t := range s.mgr.QuotaTenants() {
		out.Items = append(out.Items, s.mgr.QuotaStatus(r.Context(), t))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) getQuota(w http.ResponseWriter, r *http.Request) {
	t := r.PathValue("tenant")
	if err := auth.ValidateTenant(t); err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, s.mgr.QuotaStatus(r.Context(), t))
}

// putQuota replaces a tenant's overrides: fields given replace the
// server's defaults, fields left out take them.
func (s *Server) putQuota(w http.ResponseWriter, r *http.Request) {
	t := r.PathValue("tenant")
	if err := auth.ValidateTenant(t); err != nil {
		s.writeError(w, r, err)
		return
	}
	var in api.QuotaRequest
	if err := decodeStrict(r, &in); err != nil {
		s.writeError(w, r, err)
		return
	}
	o, err := quota.FromWire(in)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := s.mgr.SetQuota(r.Context(), t, o, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, s.mgr.QuotaStatus(r.Context(), t))
}

func (s *Server) deleteQuota(w http.ResponseWriter, r *http.Request) {
	t := r.PathValue("tenant")
	if err := auth.ValidateTenant(t); err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := s.mgr.SetQuota(r.Context(), t, quota.Overrides{}, true); err != nil {
		s.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
