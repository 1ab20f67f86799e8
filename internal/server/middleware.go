// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/errdefs"
	"github.com/corral-dev/corral/internal/auth"
	"github.com/corral-dev/corral/internal/logctx"
	"github.com/corral-dev/corral/internal/sandbox"
)

type ctxKey int

const (
	principalKey ctxKey = iota + 1
	routeInfoKey
)

// routeInfo is filled in by the matched route for the outer middlewares.
type routeInfo struct {
	route string
}

func routeInfoFrom(ctx context.Context) *routeInfo {
	ri, _ := ctx.Value(routeInfoKey).(*routeInfo)
	return ri
}

func principalFrom(ctx context.Context) (auth.Principal, bool) {
	p, ok := ctx.Value(principalKey).(auth.Principal)
	return p, ok
}

// tenant returns the authenticated tenant; the auth middleware guarantees
// one on every route that calls it.
func tenant(r *http.Request) string {
	p, _ := principalFrom(r.Context())
	return p.Tenant
}

// statusWriter records the status a handler answered with. It passes
// Flush and Hijack through, which streaming and upgrades need.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (s *Server) withRecover(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.log.ErrorContext(r.Context(), "handler panicked", "panic", v, "path", r.URL.Path)
				s.writeErrorStatus(w, r, http.StatusInternalServerError, "GENERAL::UNKNOWN_ERROR",
					"An unexpected error occurred. (request id "+w.Header().Get(api.HeaderRequestID)+")")
			}
		}()
		next.ServeHTTP(w, r)
	})
}

// validRequestID accepts client-chosen ids that are safe to echo and log.
func validRequestID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if c <= ' ' || c > '~' {
			return false
		}
	}
	return true
}

func (s *Server) withRequestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get(api.HeaderRequestID)
		if !validRequestID(id) {
			id = sandbox.NewID()
		}
		w.Header().Set(api.HeaderRequestID, id)
		ctx := logctx.With(r.Context(), slog.String("request_id", id))
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// withCORS allows browsers on any origin: the API authenticates by header,
// never by cookie.
func (s *Server) withCORS(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Access-Control-Allow-Origin", "*")
		h.Set("Access-Control-Expose-Headers", "X-Request-ID, Location, Retry-After")
		if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
			h.Set("Access-Control-Allow-Methods", "GET, POST, PUT, PATCH, DELETE, OPTIONS")
			h.Set("Access-Control-Allow-Headers", "*")
			h.Set("Access-Control-Max-Age", "600")
			w.WriteHeader(http.StatusNoContent)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (s *Server) withMetrics(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		ri := &routeInfo{}
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r.WithContext(context.WithValue(r.Context(), routeInfoKey, ri)))
		route := ri.route
		if route == "" {
			route = "unmatched"
		}
		status := sw.status
		if status == 0 {
			status = http.StatusOK
		}
		s.metrics.observeRequest(route, status, time.Since(start))
		s.log.DebugContext(r.Context(), "request", "method", r.Method, "route", route, "status", status,
			"duration_ms", time.Since(start).Milliseconds())
	})
}

// presentedKey returns the API key a request carries, if any.
func presentedKey(r *http.Request) (key string, viaAuthorization bool) {
	if k := r.Header.Get(api.HeaderAPIKey); k != "" {
		return k, false
	}
	if a := r.Header.Get("Authorization"); len(a) > 7 && strings.EqualFold(a[:7], "bearer ") {
		k := strings.TrimSpace(a[7:])
		if strings.HasPrefix(k, auth.KeyPrefix) {
			return k, true
		}
	}
	return "", false
}

// isProxyPath reports whether a path is a proxy route, which may also be
// authorized by the sandbox's own token.
func isProxyPath(p string) bool {
	p = strings.TrimPrefix(p, "/v1")
	rest, ok := strings.CutPrefix(p, "/sandboxes/")
	if !ok {
		return false
	}
	_, after, ok := strings.Cut(rest, "/")
	return ok && strings.HasPrefix(after, "proxy/")
}

// withAuth authenticates every route but /health. A proxy route without an
// API key is passed on, to be checked against the sandbox's own token.
func (s *Server) withAuth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/health" {
			next.ServeHTTP(w, r)
			return
		}
		if s.cfg.InsecureNoAuth {
			p := auth.Principal{Tenant: auth.DefaultTenant, Admin: true}
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), principalKey, p)))
			return
		}
		key, _ := presentedKey(r)
		if key == "" {
			if isProxyPath(r.URL.Path) {
				next.ServeHTTP(w, r)
				return
			}
			s.writeError(w, r, errdefs.New(errdefs.ErrUnauthenticated, api.CodeMissingAPIKey,
				"Authentication credentials are missing. Provide API key via OPEN-SANDBOX-API-KEY header."))
			return
		}
		p, err := s.keys.Authenticate(key)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), principalKey, p)))
	})
}

func (s *Server) adminOnly(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if p, ok := principalFrom(r.Context()); !ok || !p.Admin {
			s.writeError(w, r, errdefs.New(errdefs.ErrPermissionDenied, "PERMISSION_DENIED", "this route needs an admin API key"))
			return
		}
		h(w, r)
	}
}
