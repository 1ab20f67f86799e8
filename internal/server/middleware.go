// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/errdefs"
	"github.com/corral-dev/corral/errdefs/errhttp"
	"github.com/corral-dev/corral/internal/auth"
	"github.com/corral-dev/corral/internal/console"
	"github.com/corral-dev/corral/internal/logctx"
	"github.com/corral-dev/corral/internal/sandbox"
)

type ctxKey int

const reqStateKey ctxKey = 1

// reqState is the per-request state the middleware and handlers share,
// stored in the context once.
type reqState struct {
	// route is the matched pattern, set by the route's handler.
	route     string
	principal auth.Principal
	authed    bool
}

func stateFrom(ctx context.Context) *reqState {
	st, _ := ctx.Value(reqStateKey).(*reqState)
	return st
}

func principalFrom(ctx context.Context) (auth.Principal, bool) {
	if st := stateFrom(ctx); st != nil && st.authed {
		return st.principal, true
	}
	return auth.Principal{}, false
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

// ServeHTTP runs the middleware chain, in order: panic recovery, request
// id, CORS, metrics and access log, authentication, then the routes. It is
// one function so that a request is copied (WithContext) only once.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	id := requestID(w, r)
	h := w.Header()
	sw := &statusWriter{ResponseWriter: w}
	defer s.recoverPanic(sw, r, id, func(msg string) {
		s.writeErrorStatus(sw, r, http.StatusInternalServerError, api.CodeGeneralUnknownError, msg)
	})
	if s.cfg.InsecureNoAuth && !loopbackHost(r.Host) {
		// Without keys, a name that is not localhost's is what DNS
		// rebinding looks like: a web page's own name, pointed here.
		s.writeErrorStatus(sw, r, http.StatusUnauthorized, api.CodeHostNotAllowed,
			"with --insecure-no-auth this server answers only requests addressed to an IP address or localhost, not "+strconv.Quote(r.Host))
		return
	}
	// CORS only for the origins the operator lists: the API authenticates
	// by header, but a server without keys must not be a web page's to use.
	origin := r.Header.Get("Origin")
	corsOK := origin != "" && slices.Contains(s.cfg.CORSOrigins, origin)
	if corsOK {
		h.Set("Access-Control-Allow-Origin", origin)
		h.Set("Access-Control-Expose-Headers", "X-Request-ID, Location, Retry-After")
		h.Add("Vary", "Origin")
	} else if origin != "" && s.cfg.InsecureNoAuth && !sameOrigin(r, origin) {
		s.writeErrorStatus(sw, r, http.StatusUnauthorized, api.CodeOriginNotAllowed,
			"with --insecure-no-auth this server refuses requests from web pages (origin "+strconv.Quote(origin)+"); --cors-origins lists the ones it accepts")
		return
	}
	if corsOK && r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
		h.Set("Access-Control-Allow-Methods", "GET, POST, PUT, PATCH, DELETE, OPTIONS")
		h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type, Idempotency-Key, "+api.HeaderAPIKey+", "+api.HeaderAPIKeyAlias+", "+
			api.HeaderRequestID+", "+api.HeaderExecdToken+", "+api.HeaderEgressToken)
		h.Set("Access-Control-Max-Age", "600")
		sw.WriteHeader(http.StatusNoContent)
		return
	}
	st := &reqState{}
	ctx := logctx.With(r.Context(), slog.String("request_id", id))
	r = r.WithContext(context.WithValue(ctx, reqStateKey, st))
	// Deferred, so that a request its client left is counted and logged
	// too: the proxy ends a stream the client closed before its end (as an
	// SDK does once it has read a command's last event) by panicking with
	// http.ErrAbortHandler, which recoverPanic passes on.
	defer s.observe(r, st, sw, start)
	if s.authenticate(sw, r, st) {
		s.mux.ServeHTTP(sw, r)
	}
}

// sameOrigin reports whether a request comes from a page of this server's
// own origin: the console. (A sandbox's pages, served through the proxy,
// run sandboxed in an opaque origin and send "null".)
func sameOrigin(r *http.Request, origin string) bool {
	return origin == "http://"+r.Host || origin == "https://"+r.Host
}

// requestID gives a request its id, the caller's if it sent a sane one,
// on the answer and on the request (proxied requests carry it on to the
// sandbox, whose execd echoes it).
func requestID(w http.ResponseWriter, r *http.Request) string {
	id := headerValue(r.Header, canonRequestID)
	if !api.ValidRequestID(id) {
		id = sandbox.NewID()
	}
	w.Header()[canonRequestID] = []string{id}
	r.Header[canonRequestID] = []string{id}
	return id
}

// The canonical forms of the headers every request is looked at for: a
// Header's Get and Set canonicalise their name on each call, which
// allocates for names that are not canonical already.
var (
	canonRequestID   = http.CanonicalHeaderKey(api.HeaderRequestID)
	canonAPIKey      = http.CanonicalHeaderKey(api.HeaderAPIKey)
	canonAPIKeyAlias = http.CanonicalHeaderKey(api.HeaderAPIKeyAlias)
)

// headerValue is h.Get(key) for a key in canonical form.
func headerValue(h http.Header, key string) string {
	if v := h[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// recoverPanic, deferred, logs a handler's panic and answers it with a
// 500 (through answer) if nothing was answered yet.
func (s *Server) recoverPanic(sw *statusWriter, r *http.Request, id string, answer func(msg string)) {
	v := recover()
	if v == nil {
		return
	}
	if v == http.ErrAbortHandler {
		panic(v)
	}
	s.log.ErrorContext(r.Context(), "handler panicked", "panic", v, "path", r.URL.Path, "request_id", id)
	if sw.status == 0 {
		answer("An unexpected error occurred. (request id " + id + ")")
	}
}

// observe counts a request in the metrics by its route and status, and
// logs it at debug level.
func (s *Server) observe(r *http.Request, st *reqState, sw *statusWriter, start time.Time) {
	route := st.route
	if route == "" {
		route = "unmatched"
	}
	status := sw.status
	if status == 0 {
		status = http.StatusOK
	}
	s.metrics.observeRequest(route, status, time.Since(start))
	if s.log.Enabled(r.Context(), slog.LevelDebug) {
		s.log.DebugContext(r.Context(), "request", "method", r.Method, "route", route, "status", status,
			"duration_ms", time.Since(start).Milliseconds())
	}
}

// loopbackHost reports whether a Host header names this machine the way
// no web page's name can: an IP address, or localhost (and its
// subdomains, which resolvers keep on loopback).
func loopbackHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.Trim(host, "[]"), ".")
	if _, err := netip.ParseAddr(host); err == nil {
		return true
	}
	host = strings.ToLower(host)
	return host == "localhost" || strings.HasSuffix(host, ".localhost")
}

// presentedKey returns the API key a request carries, if any, and the
// header that carries it: OPEN-SANDBOX-API-KEY, else a bearer token that
// looks like a corral key, else X-API-Key.
func presentedKey(r *http.Request) (key, header string) {
	if k := headerValue(r.Header, canonAPIKey); k != "" {
		return k, api.HeaderAPIKey
	}
	if a := r.Header.Get("Authorization"); len(a) > 7 && strings.EqualFold(a[:7], "bearer ") {
		k := strings.TrimSpace(a[7:])
		if strings.HasPrefix(k, auth.KeyPrefix) {
			return k, "Authorization"
		}
	}
	if k := headerValue(r.Header, canonAPIKeyAlias); k != "" {
		return k, api.HeaderAPIKeyAlias
	}
	return "", ""
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

// authenticate sets st's principal from the request's API key, or answers
// 401 and returns false. /health needs no key; a proxy route without an API
// key is passed on, to be checked against the sandbox's own token.
func (s *Server) authenticate(w http.ResponseWriter, r *http.Request, st *reqState) bool {
	if r.URL.Path == "/health" || r.URL.Path == "/ui" || strings.HasPrefix(r.URL.Path, console.Prefix) {
		return true
	}
	if s.cfg.InsecureNoAuth {
		st.principal, st.authed = auth.Principal{Tenant: auth.DefaultTenant, Admin: true}, true
		return true
	}
	key, header := presentedKey(r)
	if key != "" && header == api.HeaderAPIKeyAlias && isProxyPath(r.URL.Path) {
		// On a proxy route X-API-Key may be the sandbox service's own
		// header: it is corral's only if it is a corral key, and the
		// request is otherwise authorized by the proxy token.
		if !s.isKey(key) {
			key = ""
		}
	}
	if key == "" {
		if isProxyPath(r.URL.Path) {
			return true
		}
		s.writeError(w, r, errdefs.New(errdefs.ErrUnauthenticated, api.CodeMissingAPIKey,
			"Authentication credentials are missing. Provide API key via OPEN-SANDBOX-API-KEY header."))
		return false
	}
	p, err := s.keys.Authenticate(key)
	if err != nil {
		s.writeError(w, r, err)
		return false
	}
	st.principal, st.authed = p, true
	return true
}

func (s *Server) adminOnly(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if p, ok := principalFrom(r.Context()); !ok || !p.Admin {
			s.writeError(w, r, errdefs.New(errdefs.ErrPermissionDenied, errhttp.CodePermissionDenied, "this route needs an admin API key"))
			return
		}
		h(w, r)
	}
}
