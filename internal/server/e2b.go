// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/errdefs"
	"github.com/corral-dev/corral/internal/auth"
	"github.com/corral-dev/corral/internal/e2b"
	"github.com/corral-dev/corral/internal/logctx"
	"github.com/corral-dev/corral/internal/sandbox"
)

// E2BConfig configures the E2B-compatible API (docs/e2b.md).
type E2BConfig struct {
	// Domain, when set, is the wildcard domain of sandbox origins:
	// {port}-{id}.{Domain} reaches that port of that sandbox, and
	// create answers it as the sandbox's domain.
	Domain string
	// Templates maps E2B template ids to images, for ids that name no
	// template of the tenant's (corral templates come first).
	Templates map[string]string
}

// DefaultE2BTemplates are the template ids every server maps: E2B's code
// interpreter to corral's code-interpreter image, its base to this
// machine's /usr (the native runtime's "host" image).
func DefaultE2BTemplates() map[string]string {
	return map[string]string{"code-interpreter-v1": "corral/code-interpreter:local", "base": "host"}
}

// E2BHandler serves E2B's API: the control plane (X-API-KEY), and, for
// requests that name a sandbox (E2b-Sandbox-Id and E2b-Sandbox-Port, or a
// {port}-{id}.{domain} host), that sandbox's envd, code interpreter or
// other port.
func (s *Server) E2BHandler() http.Handler { return http.HandlerFunc(s.serveE2B) }

func (s *Server) e2bRoutes() {
	m := http.NewServeMux()
	s.e2bMux = m
	h := func(pattern string, fn http.HandlerFunc) {
		m.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			if st := stateFrom(r.Context()); st != nil {
				st.route = "e2b " + pattern
			}
			fn(w, r)
		})
	}
	h("GET /health", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	h("POST /sandboxes", s.e2bCreate)
	h("POST /v2/sandboxes", s.e2bCreate)
	h("GET /sandboxes", s.e2bListV1)
	h("GET /v2/sandboxes", s.e2bListV2)
	h("GET /sandboxes/{id}", s.e2bGet)
	h("DELETE /sandboxes/{id}", s.e2bKill)
	h("POST /sandboxes/{id}/timeout", s.e2bSetTimeout)
	h("POST /sandboxes/{id}/pause", s.e2bPause)
	h("POST /sandboxes/{id}/resume", s.e2bConnect)
	h("POST /sandboxes/{id}/connect", s.e2bConnect)
	h("POST /v2/sandboxes/{id}/connect", s.e2bConnect)
	h("GET /sandboxes/{id}/metrics", s.e2bMetrics)
	h("PUT /sandboxes/{id}/network", s.e2bUpdateNetwork)
	h("POST /sandboxes/{id}/snapshots", s.e2bSnapshot)
	h("GET /snapshots", s.e2bListSnapshots)
	h("DELETE /templates/{id}", s.e2bDeleteSnapshot)
	h("POST /sandboxes/{id}/fork", s.e2bFork)
	h("/", func(w http.ResponseWriter, r *http.Request) {
		writeE2BError(w, http.StatusNotFound, fmt.Sprintf("corral's E2B API has no route for %s %s (docs/e2b.md lists what it serves)", r.Method, r.URL.Path))
	})
}

// writeE2BError answers E2B's error body, whose code the SDK reads.
func writeE2BError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, e2b.Error{Code: status, Message: msg})
}

// e2bError answers err in E2B's shape, as writeError does in corral's.
func (s *Server) e2bError(w http.ResponseWriter, r *http.Request, err error) {
	status, _, msg := s.errorAnswer(w, r, err)
	writeE2BError(w, status, msg)
}

// e2bInvalid is a 400 naming what is wrong.
func e2bInvalid(format string, args ...any) error {
	return errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeInvalidRequestBody, format, args...)
}

func (s *Server) serveE2B(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	id := requestID(w, r)
	sw := &statusWriter{ResponseWriter: w}
	defer s.recoverPanic(sw, r, id, func(msg string) { writeE2BError(sw, http.StatusInternalServerError, msg) })
	st := &reqState{}
	ctx := logctx.With(r.Context(), slog.String("request_id", id))
	r = r.WithContext(context.WithValue(ctx, reqStateKey, st))
	switch {
	case r.Header.Get(e2b.HeaderSandboxID) != "":
		st.route = "e2b sandbox port"
		s.e2bSandboxPort(sw, r, r.Header.Get(e2b.HeaderSandboxID), r.Header.Get(e2b.HeaderSandboxPort), false)
	case s.e2bDomain() != "" && hostRouted(r.Host, s.e2bDomain()):
		st.route = "e2b sandbox origin"
		port, sid, ok := e2b.ParseHost(r.Host, s.e2bDomain())
		if !ok {
			proxyGone(sw, "", fmt.Sprintf("%s names no sandbox port: sandbox origins are {port}-{sandboxID}.%s", r.Host, s.e2bDomain()))
			break
		}
		s.e2bSandboxPort(sw, r, sid, strconv.Itoa(port), true)
	default:
		if s.e2bAuthenticate(sw, r, st) {
			s.e2bMux.ServeHTTP(sw, r)
		}
	}
	if st.route == "" {
		st.route = "e2b unmatched"
	}
	s.observe(r, st, sw, start)
}

func (s *Server) e2bDomain() string {
	if s.cfg.E2B == nil {
		return ""
	}
	return s.cfg.E2B.Domain
}

// hostRouted reports whether a host names a sandbox origin under domain
// (any {label}.{domain} but api.{domain}, which is the control plane).
func hostRouted(host, domain string) bool {
	if h, _, err := splitHostPortLoose(host); err == nil {
		host = h
	}
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	label, ok := strings.CutSuffix(host, "."+strings.ToLower(domain))
	return ok && label != "api" && label != ""
}

func splitHostPortLoose(host string) (string, string, error) {
	i := strings.LastIndexByte(host, ':')
	if i < 0 || strings.Contains(host[i:], "]") {
		return host, "", errors.New("no port")
	}
	return host[:i], host[i+1:], nil
}

// e2bAuthenticate sets the principal from X-API-KEY (or a corral key as
// a bearer token), or answers 401.
func (s *Server) e2bAuthenticate(w http.ResponseWriter, r *http.Request, st *reqState) bool {
	if r.URL.Path == "/health" {
		return true
	}
	if s.cfg.InsecureNoAuth {
		st.principal, st.authed = auth.Principal{Tenant: auth.DefaultTenant, Admin: true}, true
		return true
	}
	key, _ := presentedKey(r)
	if key == "" {
		writeE2BError(w, http.StatusUnauthorized, "an API key is required: send it in X-API-KEY (E2B_API_KEY)")
		return false
	}
	p, err := s.keys.Authenticate(key)
	if err != nil {
		writeE2BError(w, http.StatusUnauthorized, "invalid API key")
		return false
	}
	st.principal, st.authed = p, true
	return true
}

// e2bSandbox finds a tenant's sandbox by its E2B id.
func (s *Server) e2bSandbox(r *http.Request, e2bID string) (*sandbox.Sandbox, error) {
	id, ok := e2b.ToCorralID(e2bID)
	if !ok {
		return nil, errdefs.Newf(errdefs.ErrNotFound, api.CodeSandboxNotFound, "sandbox %q not found", e2bID)
	}
	sb, err := s.mgr.Get(r.Context(), tenant(r), id)
	if err != nil {
		if errors.Is(err, errdefs.ErrNotFound) {
			return nil, errdefs.Newf(errdefs.ErrNotFound, api.CodeSandboxNotFound, "sandbox %q not found", e2bID)
		}
		return nil, err
	}
	return sb, nil
}

// proxyGone answers as E2B's edge does for a sandbox it cannot reach:
// 502, which the SDK reads as the sandbox having timed out.
func proxyGone(w http.ResponseWriter, id, msg string) {
	writeJSON(w, http.StatusBadGateway, e2b.ProxyError{SandboxID: id, Message: msg, Code: http.StatusBadGateway})
}

// e2bSandboxPort forwards a request to a port of a sandbox: envd (49983)
// and the code interpreter (49999) to execd's E2B routes, any other port
// to the port itself. Only the sandbox's own tokens (or its tenant's API
// key) open it: X-Access-Token for envd (or a signed /files URL), that or
// the traffic token for the other ports. originOwn is set when the host
// name is the sandbox port's own origin.
func (s *Server) e2bSandboxPort(w http.ResponseWriter, r *http.Request, e2bID, portHeader string, originOwn bool) {
	port := e2b.EnvdPort
	if portHeader != "" {
		p, err := parsePort(portHeader)
		if err != nil {
			writeE2BError(w, http.StatusBadRequest, e2b.HeaderSandboxPort+": "+userText(err))
			return
		}
		port = p
	}
	if port == api.ExecdPort || port == api.EgressPort {
		// corral's own daemons are reached through envd's port and the
		// egress API's routes, never as a sandbox's service: a traffic
		// token (or a public sandbox) must not open them.
		writeE2BError(w, http.StatusForbidden, fmt.Sprintf("port %d is corral's own in every sandbox and is not served here", port))
		return
	}
	id, ok := e2b.ToCorralID(e2bID)
	if !ok {
		proxyGone(w, e2bID, "sandbox "+strconv.Quote(e2bID)+" not found")
		return
	}
	sb, err := s.mgr.ByID(id)
	if err != nil {
		proxyGone(w, e2bID, "sandbox "+strconv.Quote(e2bID)+" not found")
		return
	}
	if strings.Contains(r.URL.Path, "..") {
		writeE2BError(w, http.StatusBadRequest, "the path must not contain '..'")
		return
	}
	if !s.e2bPortAuthorized(r, sb, port) {
		// The same answer whatever was wrong, and for a sandbox of
		// another tenant's.
		writeE2BError(w, http.StatusUnauthorized, "this sandbox port needs the sandbox's access token (X-Access-Token) or traffic token ("+e2b.HeaderTrafficToken+")")
		return
	}
	target, path := port, r.URL.Path
	switch port {
	case e2b.EnvdPort:
		target, path = api.ExecdPort, api.PathExecdE2BEnvd+r.URL.Path
	case e2b.CodeInterpreter:
		target, path = api.ExecdPort, api.PathExecdE2BCode+r.URL.Path
	}
	addr, sb, err := s.mgr.Reach(r.Context(), sb.Tenant, id, target)
	if err != nil {
		if errors.Is(err, errdefs.ErrNotFound) {
			proxyGone(w, e2bID, "sandbox "+strconv.Quote(e2bID)+" not found")
			return
		}
		proxyGone(w, e2bID, userText(err))
		return
	}
	if sb.Status.State != sandbox.StateRunning {
		proxyGone(w, e2bID, fmt.Sprintf("sandbox %s is %s", e2bID, sb.Status.State))
		return
	}
	_ = s.mgr.RenewOnAccess(sb)
	if port != e2b.EnvdPort && port != e2b.CodeInterpreter && !originOwn {
		// A sandbox's own page on a shared origin runs in an origin of
		// its own (opaque), never the one this API answers on.
		w.Header().Set("Content-Security-Policy", sandboxCSP)
	}
	t := proxyTarget{addr: addr, path: path, port: target, sb: sb, stripAuthz: false, stripAlias: true,
		drop: []string{e2b.HeaderAccessToken, e2b.HeaderTrafficToken, e2b.HeaderSandboxID, e2b.HeaderSandboxPort}}
	if port != e2b.EnvdPort && port != e2b.CodeInterpreter {
		// A user's service never sees a corral key, whatever header.
		t.stripAuthz = strings.HasPrefix(strings.TrimSpace(strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")), auth.KeyPrefix)
	}
	s.proxy.forward(w, r, t)
}

// e2bPortAuthorized checks a request for a sandbox port.
func (s *Server) e2bPortAuthorized(r *http.Request, sb *sandbox.Sandbox, port int) bool {
	if s.cfg.InsecureNoAuth {
		return true
	}
	access := e2b.AccessToken(string(sb.ExecdToken), sb.ID)
	if e2b.Equal(r.Header.Get(e2b.HeaderAccessToken), access) {
		return true
	}
	if port == e2b.EnvdPort {
		switch {
		case r.Method == http.MethodGet && r.URL.Path == "/health":
			return true
		case r.URL.Path == "/files" && (r.Method == http.MethodGet || r.Method == http.MethodPost) && r.URL.Query().Has("signature"):
			return e2b.CheckFileSignature(r.Method, r.URL.Query(), access, time.Now()) == nil
		}
		return false
	}
	if e2b.Equal(r.Header.Get(e2b.HeaderTrafficToken), e2b.TrafficToken(string(sb.ExecdToken), sb.ID)) {
		return true
	}
	if port != e2b.CodeInterpreter && sb.Extensions[extE2BPublic] == "true" {
		return true // network.allowPublicTraffic: the sandbox's own services are public
	}
	// The owning tenant's API key opens the sandbox's other ports too.
	if key, _ := presentedKey(r); key != "" && s.keys != nil {
		if p, err := s.keys.Authenticate(key); err == nil && p.Tenant == sb.Tenant {
			return true
		}
	}
	return false
}

// userText is an error's user-facing text, or a generic sentence.
func userText(err error) string {
	if msg, ok := errdefs.UserMessage(err); ok {
		return msg
	}
	return "the sandbox could not be reached"
}
