// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"net/http"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/errdefs"
	"github.com/corral-dev/corral/internal/console"
)

// routes registers every route under /v1 and unprefixed, as OpenSandbox
// clients use both.
func (s *Server) routes() {
	s.mux.HandleFunc("GET /health", s.health)
	// The web console: its files are public (the key stays in the page).
	s.mux.Handle(console.Prefix, console.Handler())
	s.mux.HandleFunc("GET /ui", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, console.Prefix, http.StatusFound) })
	s.mux.HandleFunc("GET /metrics", s.adminOnly(s.metrics.handler.ServeHTTP))
	for _, p := range []string{"", "/v1"} {
		s.handle("GET "+p+"/sandboxes", s.listSandboxes)
		s.handle("POST "+p+"/sandboxes", s.createSandbox)
		s.handle("GET "+p+"/sandboxes/{id}", s.getSandbox)
		s.handle("DELETE "+p+"/sandboxes/{id}", s.deleteSandbox)
		s.handle("PATCH "+p+"/sandboxes/{id}/metadata", s.patchMetadata)
		s.handle("POST "+p+"/sandboxes/{id}/pause", s.pauseSandbox)
		s.handle("POST "+p+"/sandboxes/{id}/resume", s.resumeSandbox)
		s.handle("POST "+p+"/sandboxes/{id}/renew-expiration", s.renewSandbox)
		s.handle("GET "+p+"/sandboxes/{id}/endpoints/{port}", s.getEndpoint)
		s.handle("GET "+p+"/sandboxes/{id}/events", s.listEvents)
		s.handle("GET "+p+"/sandboxes/{id}/diagnostics/logs", s.diagnosticLogs)
		s.handle("GET "+p+"/sandboxes/{id}/diagnostics/events", s.diagnosticEvents)
		s.handle("POST "+p+"/sandboxes/{id}/snapshots", s.createSnapshot)
		s.handle("POST "+p+"/sandboxes/{id}/fork", s.forkSandbox)
		s.handle("GET "+p+"/snapshots", s.listSnapshots)
		s.handle("GET "+p+"/snapshots/{id}", s.getSnapshot)
		s.handle("DELETE "+p+"/snapshots/{id}", s.deleteSnapshot)
		s.handle(p+"/sandboxes/{id}/proxy/{port}", s.proxy.serve)
		s.handle(p+"/sandboxes/{id}/proxy/{port}/{path...}", s.proxy.serve)
		s.handle("GET "+p+"/events", s.streamEvents)
		s.handle("POST "+p+"/webhooks", s.createWebhook)
		s.handle("GET "+p+"/webhooks", s.listWebhooks)
		s.handle("GET "+p+"/webhooks/{id}", s.getWebhook)
		s.handle("DELETE "+p+"/webhooks/{id}", s.deleteWebhook)
		s.handle("GET "+p+"/webhooks/{id}/deliveries", s.webhookDeliveries)
		s.handle("POST "+p+"/webhooks/{id}/ping", s.pingWebhook)
		s.handle("GET "+p+"/volumes", s.listVolumes)
		s.handle("DELETE "+p+"/volumes/{name}", s.deleteVolume)
		s.handle("GET "+p+"/secrets", s.listSecrets)
		s.handle("PUT "+p+"/secrets/{name}", s.putSecret)
		s.handle("DELETE "+p+"/secrets/{name}", s.deleteSecret)
		s.handle("POST "+p+"/templates", s.createTemplate)
		s.handle("GET "+p+"/templates", s.listTemplates)
		s.handle("GET "+p+"/templates/{name}", s.getTemplate)
		s.handle("PUT "+p+"/templates/{name}", s.putTemplate)
		s.handle("DELETE "+p+"/templates/{name}", s.deleteTemplate)
		s.handle("GET "+p+"/quota", s.ownQuota)
		s.handle("GET "+p+"/admin/quotas", s.adminOnly(s.listQuotas))
		s.handle("GET "+p+"/admin/quotas/{tenant}", s.adminOnly(s.getQuota))
		s.handle("PUT "+p+"/admin/quotas/{tenant}", s.adminOnly(s.putQuota))
		s.handle("DELETE "+p+"/admin/quotas/{tenant}", s.adminOnly(s.deleteQuota))
		s.handle("GET "+p+"/admin/keys", s.adminOnly(s.listKeys))
		s.handle("POST "+p+"/admin/keys", s.adminOnly(s.createKey))
		s.handle("DELETE "+p+"/admin/keys/{id}", s.adminOnly(s.revokeKey))
		// Known paths with an unsupported method answer 405 in the
		// contract's error shape rather than the mux's plain text.
		for _, path := range []string{"/sandboxes", "/sandboxes/{id}", "/sandboxes/{id}/metadata", "/sandboxes/{id}/pause",
			"/sandboxes/{id}/resume", "/sandboxes/{id}/renew-expiration", "/sandboxes/{id}/endpoints/{port}", "/sandboxes/{id}/events",
			"/sandboxes/{id}/diagnostics/logs", "/sandboxes/{id}/diagnostics/events",
			"/sandboxes/{id}/snapshots", "/sandboxes/{id}/fork", "/snapshots", "/snapshots/{id}", "/events", "/webhooks", "/webhooks/{id}", "/webhooks/{id}/deliveries", "/webhooks/{id}/ping", "/volumes", "/volumes/{name}", "/secrets", "/secrets/{name}", "/admin/keys", "/admin/keys/{id}", "/quota", "/admin/quotas", "/admin/quotas/{tenant}", "/templates", "/templates/{name}"} {
			s.mux.HandleFunc(p+path, s.methodNotAllowed)
		}
	}
	s.mux.HandleFunc("/", s.notFound)
}

// handle registers h and records its pattern for metrics and logs.
func (s *Server) handle(pattern string, h http.HandlerFunc) {
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		if st := stateFrom(r.Context()); st != nil {
			st.route = pattern
		}
		h(w, r)
	})
}

// health answers anyone; only an admin key is told what is wrong (a
// runtime's known escapes are not for every caller to read).
func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	h := api.Health{Status: "healthy"}
	if key, _ := presentedKey(r); s.cfg.InsecureNoAuth {
		h.Warnings = s.cfg.HealthWarnings
	} else if key != "" && len(s.cfg.HealthWarnings) > 0 {
		if p, err := s.keys.Authenticate(key); err == nil && p.Admin {
			h.Warnings = s.cfg.HealthWarnings
		}
	}
	writeJSON(w, http.StatusOK, h)
}

func (s *Server) notFound(w http.ResponseWriter, r *http.Request) {
	s.writeError(w, r, errdefs.Newf(errdefs.ErrNotFound, api.CodeRouteNotFound, "no route for %s %s", r.Method, r.URL.Path))
}

func (s *Server) methodNotAllowed(w http.ResponseWriter, r *http.Request) {
	s.writeErrorStatus(w, r, http.StatusMethodNotAllowed, api.CodeMethodNotAllowed,
		"method "+r.Method+" is not allowed on "+r.URL.Path)
}
