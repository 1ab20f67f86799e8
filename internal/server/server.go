// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

// Package server is corral's lifecycle HTTP API: the OpenSandbox lifecycle
// contract under /v1 and unprefixed, API-key authentication with tenants,
// the authenticated proxy to sandbox ports, key administration, /health and
// Prometheus /metrics. It translates HTTP to lifecycle.Manager calls and
// errors to the contract's {"code","message"} bodies; it holds no state of
// its own. Only internal/cli constructs it.
package server

import (
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/corral-dev/corral/internal/auth"
	"github.com/corral-dev/corral/internal/lifecycle"
	"github.com/corral-dev/corral/internal/logctx"
	"github.com/corral-dev/corral/internal/promtext"
	"github.com/corral-dev/corral/internal/secrets"
	"github.com/corral-dev/corral/internal/template"
	"github.com/corral-dev/corral/internal/webhook"
)

// Config configures a Server.
type Config struct {
	Manager *lifecycle.Manager
	Keys    *auth.Keyring
	Logger  *slog.Logger
	// InsecureNoAuth accepts every request as the default tenant's admin.
	// The server then answers only requests addressed to an IP address or
	// a localhost name, and refuses requests from web pages of origins not
	// in CORSOrigins: a page cannot drive it, by DNS rebinding or else.
	InsecureNoAuth bool
	// HealthWarnings are what is wrong with the server's setup (a runtime
	// open to known escapes), shown by /health to admin keys.
	HealthWarnings []string
	// CORSOrigins are the web origins (scheme://host[:port]) allowed to
	// call the API from a browser; none by default.
	CORSOrigins []string
	// Registry receives the server's metrics; nil means a private registry.
	Registry *promtext.Registry
	// Secrets stores the tenants' secrets; nil answers 501 on /secrets.
	Secrets *secrets.Service
	// Webhooks keeps the tenants' subscriptions; nil answers 501 on
	// /webhooks.
	Webhooks *webhook.Service
	// Templates keeps the tenants' templates; nil answers 501 on
	// /templates.
	Templates template.Store
	// ProxyEndpoints answers every endpoint with the proxy route
	// ({host}/sandboxes/{id}/proxy/{port}, whose shape carries the port),
	// not the runtime's own address.
	ProxyEndpoints bool
	// E2B configures the E2B-compatible API (E2BHandler); nil means its
	// defaults.
	E2B *E2BConfig
}

// Server serves the lifecycle API.
type Server struct {
	cfg  Config
	log  *slog.Logger
	mgr  *lifecycle.Manager
	keys *auth.Keyring
	mux  *http.ServeMux
	// e2bMux routes E2B's control plane (E2BHandler).
	e2bMux  *http.ServeMux
	metrics *metrics
	proxy   *sandboxProxy
	// closing is closed when the HTTP server shuts down: long streams
	// (GET /v1/events) end then instead of holding the shutdown up.
	closing   chan struct{}
	closeOnce sync.Once
	// streams counts each tenant's open event streams.
	streamsMu sync.Mutex
	streams   map[string]int
	// bodies keeps the sandboxes' encoded GET answers.
	bodies bodyCache
}

// New builds a Server.
func New(cfg Config) *Server {
	if cfg.Logger == nil {
		cfg.Logger = logctx.Discard()
	}
	if cfg.Registry == nil {
		cfg.Registry = promtext.NewRegistry()
	}
	s := &Server{cfg: cfg, log: cfg.Logger, mgr: cfg.Manager, keys: cfg.Keys, mux: http.NewServeMux(), closing: make(chan struct{}), streams: map[string]int{}}
	s.metrics = newMetrics(cfg.Registry, cfg.Manager)
	s.proxy = newSandboxProxy(s)
	s.routes()
	s.e2bRoutes()
	return s
}

// Handler returns the HTTP handler of the API.
func (s *Server) Handler() http.Handler { return s }

// NewHTTPServer returns an http.Server for the handler with sane timeouts.
// Write timeouts are left to handlers: creates and proxied streams are long.
func (s *Server) NewHTTPServer(addr string) *http.Server {
	hs := &http.Server{
		Addr:              addr,
		Handler:           s.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    1 << 20,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	hs.RegisterOnShutdown(s.Close)
	return hs
}

// Close ends the long streams being served and answers the creates and
// resumes waiting for room (503, retry); the HTTP server's shutdown calls
// it.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		close(s.closing)
		s.mgr.StopQueue()
	})
}
