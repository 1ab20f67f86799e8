// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"bytes"
	"encoding/json"
	"net/http"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/errdefs"
)

func (s *Server) webhooksOff(w http.ResponseWriter, r *http.Request) bool {
	if s.cfg.Webhooks == nil {
		s.writeError(w, r, errdefs.New(errdefs.ErrNotImplemented, api.CodeAPINotSupported, "this server delivers no webhooks"))
		return true
	}
	return false
}

// decodeStrict is decodeJSON that also refuses fields v does not have.
func decodeStrict(r *http.Request, v any) error {
	body, err := decodeJSON(r, v, false)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return invalid("%v", err)
	}
	return nil
}

// createWebhook subscribes the caller's tenant: 201 with the secret,
// which no later answer shows.
func (s *Server) createWebhook(w http.ResponseWriter, r *http.Request) {
	if s.webhooksOff(w, r) {
		return
	}
	var in api.WebhookRequest
	if err := decodeStrict(r, &in); err != nil {
		s.writeError(w, r, err)
		return
	}
	wh, err := s.cfg.Webhooks.Create(r.Context(), tenant(r), in)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := wh.Public()
	out.Secret = wh.Secret
	writeJSON(w, http.StatusCreated, out)
}

func (s *Server) listWebhooks(w http.ResponseWriter, r *http.Request) {
	if s.webhooksOff(w, r) {
		return
	}
	ws, err := s.cfg.Webhooks.List(r.Context(), tenant(r))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := api.WebhookList{Items: make([]api.Webhook, 0, len(ws))}
	for _, wh := range ws {
		out.Items = append(out.Items, wh.Public())
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) getWebhook(w http.ResponseWriter, r *http.Request) {
	if s.webhooksOff(w, r) {
		return
	}
	wh, err := s.cfg.Webhooks.Get(r.Context(), tenant(r), r.PathValue("id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, wh.Public())
}

func (s *Server) deleteWebhook(w http.ResponseWriter, r *http.Request) {
	if s.webhooksOff(w, r) {
		return
	}
	if err := s.cfg.Webhooks.Delete(r.Context(), tenant(r), r.PathValue("id")); err != nil {
		s.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// webhookDeliveries lists a subscription's newest deliveries: ?limit=N
// (1–1000, default 100).
func (s *Server) webhookDeliveries(w http.ResponseWriter, r *http.Request) {
	if s.webhooksOff(w, r) {
		return
	}
	limit, err := queryInt(r, "limit", 100, 1, 1000)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	ds, err := s.cfg.Webhooks.Deliveries(r.Context(), tenant(r), r.PathValue("id"), limit)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := api.WebhookDeliveryList{Items: make([]api.WebhookDelivery, 0, len(ds))}
	for _, d := range ds {
		out.Items = append(out.Items, d.Public())
	}
	writeJSON(w, http.StatusOK, out)
}

// pingWebhook sends a webhook.ping once and answers with the delivery.
func (s *Server) pingWebhook(w http.ResponseWriter, r *http.Request) {
	if s.webhooksOff(w, r) {
		return
	}
	d, err := s.cfg.Webhooks.Ping(r.Context(), tenant(r), r.PathValue("id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, d.Public())
}
