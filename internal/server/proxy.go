// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/errdefs"
	"github.com/corral-dev/corral/internal/auth"
	"github.com/corral-dev/corral/internal/sandbox"
)

func parsePort(s string) (int, error) {
	p, err := strconv.Atoi(s)
	if err != nil || p < 1 || p > 65535 {
		return 0, invalid("port %q: must be a whole number from 1 to 65535", s)
	}
	return p, nil
}

// endpointHeaders are the headers a client must send to a sandbox port.
func endpointHeaders(sb *sandbox.Sandbox, port int) map[string]string {
	switch port {
	case api.ExecdPort:
		return map[string]string{api.HeaderExecdToken: string(sb.ExecdToken)}
	case api.EgressPort:
		return map[string]string{api.HeaderEgressToken: string(sb.EgressToken)}
	}
	return nil
}

// proxyHeaders are the headers a client sends to reach a sandbox port
// through the server's proxy route: a proxy token for that sandbox and
// port under the header the port's own token travels in, so clients that
// send an endpoint's headers as they are work unchanged. A proxy token
// opens only the proxy route (the port itself wants its own token, which
// the proxy adds), so a port's token found anywhere cannot be used from
// outside through the server, and a proxy token is useless against the
// port.
func proxyHeaders(sb *sandbox.Sandbox, port int) map[string]string {
	header := api.HeaderExecdToken
	if port == api.EgressPort {
		header = api.HeaderEgressToken
	}
	return map[string]string{header: proxyToken(sb, port)}
}

// proxyToken is derived from the sandbox's own token for the port (which
// no process in the sandbox holds), so every server replica computes the
// same one and it dies with the sandbox.
func proxyToken(sb *sandbox.Sandbox, port int) string {
	key := sb.ExecdToken
	if port == api.EgressPort {
		key = sb.EgressToken
	}
	m := hmac.New(sha256.New, []byte(key))
	fmt.Fprintf(m, "corral proxy route %s %d", sb.ID, port)
	return "cpx_" + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// remoteIsLoopback reports whether the client connected from this machine.
func remoteIsLoopback(r *http.Request) bool {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	return err == nil && ap.Addr().IsLoopback()
}

func (s *Server) getEndpoint(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	port, err := parsePort(r.PathValue("port"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	q := r.URL.Query()
	useProxy := false
	if v := q.Get("use_server_proxy"); v != "" {
		if useProxy, err = strconv.ParseBool(v); err != nil {
			s.writeError(w, r, invalid("use_server_proxy %q: must be true or false", v))
			return
		}
	}
	if q.Has("expires") {
		if useProxy {
			s.writeError(w, r, invalid("expires cannot be combined with use_server_proxy=true"))
			return
		}
		s.writeError(w, r, errdefs.New(errdefs.ErrInvalidArgument, api.CodeAPINotSupported,
			"signed endpoints (expires) need an ingress gateway; use the endpoint headers or use_server_proxy=true"))
		return
	}
	addr, sb, err := s.mgr.Reach(r.Context(), tenant(r), id, port)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := api.Endpoint{Endpoint: addr.String(), Headers: endpointHeaders(sb, port)}
	// A loopback address is useless to a client on another machine: hand it
	// the authenticated proxy route instead.
	if useProxy || s.cfg.ProxyEndpoints || addr.Addr().IsLoopback() && !remoteIsLoopback(r) {
		out.Endpoint = r.Host + "/sandboxes/" + id + "/proxy/" + strconv.Itoa(port)
		out.Headers = proxyHeaders(sb, port)
	}
	writeJSON(w, http.StatusOK, out)
}

// sandboxCSP sandboxes a document a sandbox port serves on a shared
// origin: it keeps scripts and forms but gets a unique origin.
const sandboxCSP = "sandbox allow-scripts allow-forms allow-popups allow-downloads allow-modals"

// sandboxProxy forwards /sandboxes/{id}/proxy/{port}/... to a sandbox port,
// streaming both ways, upgrades (WebSocket) included.
type sandboxProxy struct {
	s  *Server
	rp *httputil.ReverseProxy
}

type proxyTargetKey struct{}

func newSandboxProxy(s *Server) *sandboxProxy {
	p := &sandboxProxy{s: s}
	transport := &http.Transport{
		// Never an environment proxy: sandbox traffic stays on this machine.
		Proxy:                 nil,
		DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:          512,
		MaxIdleConnsPerHost:   32,
		IdleConnTimeout:       90 * time.Second,
		ResponseHeaderTimeout: 0,
		ExpectContinueTimeout: time.Second,
	}
	p.rp = &httputil.ReverseProxy{
		Transport:     transport,
		FlushInterval: -1,
		Rewrite: func(pr *httputil.ProxyRequest) {
			t := pr.In.Context().Value(proxyTargetKey{}).(proxyTarget)
			pr.Out.URL.Scheme, pr.Out.URL.Host = "http", t.addr.String()
			pr.Out.URL.Path, pr.Out.URL.RawPath = t.path, ""
			pr.Out.URL.RawQuery = pr.In.URL.RawQuery
			pr.Out.Host = t.addr.String()
			pr.SetXForwarded()
			t.setHeaders(pr.Out.Header)
		},
		ModifyResponse: func(res *http.Response) error {
			// An upstream that echoed the request id would repeat ours.
			if res.Header.Get(api.HeaderRequestID) == res.Request.Header.Get(api.HeaderRequestID) {
				res.Header.Del(api.HeaderRequestID)
			}
			// A browser that offered corral's subprotocol (to carry the
			// token) wants one chosen, or it fails the handshake; the
			// sandbox's own choice, if it made one, stands.
			if res.StatusCode == http.StatusSwitchingProtocols && res.Header.Get("Sec-WebSocket-Protocol") == "" &&
				slices.Contains(wsProtocols(res.Request.Header), api.WSProtocol) {
				res.Header.Set("Sec-WebSocket-Protocol", api.WSProtocol)
			}
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if r.Context().Err() != nil {
				return
			}
			s.log.WarnContext(r.Context(), "proxy upstream failed", "err", err)
			s.writeErrorStatus(w, r, http.StatusBadGateway, api.CodeProxyUpstream,
				"the sandbox port did not answer; is something listening on it?")
		},
	}
	return p
}

type proxyTarget struct {
	addr       netip.AddrPort
	path       string
	port       int
	sb         *sandbox.Sandbox
	stripAuthz bool
	// stripAlias: X-API-Key carries a corral key.
	stripAlias bool
	// drop are more headers the sandbox port must not see.
	drop []string
}

// setHeaders removes the caller's corral credentials and adds the ones the
// sandbox port expects; a user's own service never sees a corral token.
func (t proxyTarget) setHeaders(h http.Header) {
	h.Del(api.HeaderAPIKey)
	if t.stripAlias {
		h.Del(api.HeaderAPIKeyAlias)
	}
	// A corral API key never reaches a sandbox, whichever header carried
	// it and whether or not it was the one that authorized the request.
	if a := h.Get("Authorization"); t.stripAuthz || len(a) > 7 && strings.EqualFold(a[:7], "bearer ") && strings.HasPrefix(strings.TrimSpace(a[7:]), auth.KeyPrefix) {
		h.Del("Authorization")
	}
	h.Del(api.HeaderExecdToken)
	h.Del(api.HeaderEgressToken)
	dropWSToken(h)
	for _, k := range t.drop {
		h.Del(k)
	}
	for k, v := range endpointHeaders(t.sb, t.port) {
		h.Set(k, v)
	}
}

func (p *sandboxProxy) serve(w http.ResponseWriter, r *http.Request) {
	s := p.s
	id := r.PathValue("id")
	port, err := parsePort(r.PathValue("port"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if strings.Contains(r.URL.Path, "..") {
		s.writeError(w, r, invalid("the proxied path must not contain '..'"))
		return
	}
	tenantID, ok := p.authorize(r, id, port)
	if !ok {
		// Same answer for a wrong token and an unknown sandbox.
		s.writeError(w, r, errdefs.New(errdefs.ErrUnauthenticated, api.CodeMissingAPIKey,
			"the proxy needs an API key (OPEN-SANDBOX-API-KEY) or the sandbox's endpoint headers"))
		return
	}
	// A request that only observes (api.HeaderObserve on a GET: a
	// console's metrics) neither resumes, renews nor counts as activity.
	reach := s.mgr.Reach
	observe := r.Method == http.MethodGet && r.Header.Get(api.HeaderObserve) == "1"
	if observe {
		reach = s.mgr.Endpoint
	}
	addr, sb, err := reach(r.Context(), tenantID, id, port)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if sb.Status.State != sandbox.StateRunning {
		s.writeError(w, r, errdefs.Newf(errdefs.ErrFailedPrecondition, api.CodeSandboxInvalidState,
			"sandbox %s is %s; resume it to reach its ports", id, sb.Status.State))
		return
	}
	if !observe {
		_ = p.s.mgr.RenewOnAccess(sb)
	}
	// What the sandbox serves here runs in an origin of its own (an
	// opaque one), never this API's: a page it makes cannot read what a
	// console keeps on the API's origin, nor call the API as it.
	w.Header().Set("Content-Security-Policy", sandboxCSP)
	_, header := presentedKey(r)
	// A corral key in X-API-Key (one of this server's, or one that looks
	// minted, revoked ones too) is removed whether or not it authorized
	// the request; any other value is the sandbox service's.
	alias := r.Header.Get(api.HeaderAPIKeyAlias)
	t := proxyTarget{addr: addr, path: "/" + r.PathValue("path"), port: port, sb: sb, stripAuthz: header == "Authorization",
		stripAlias: strings.HasPrefix(alias, auth.KeyPrefix) || alias != "" && p.s.isKey(alias)}
	p.forward(w, r, t)
}

// forward proxies r to t. The transport reads the request's body while
// the answer is written, so the server must not also consume and close
// that body when the answer's headers go out (its default for HTTP/1):
// the transport's read then failed and it closed the sandbox connection
// under a streaming answer.
func (p *sandboxProxy) forward(w http.ResponseWriter, r *http.Request, t proxyTarget) {
	_ = http.NewResponseController(w).EnableFullDuplex()
	p.rp.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), proxyTargetKey{}, t)))
}

// isKey reports whether key is one of this server's API keys.
func (s *Server) isKey(key string) bool {
	if s.keys == nil {
		return false
	}
	_, err := s.keys.Authenticate(key)
	return err == nil
}

// authorize accepts the owning tenant's API key, or the proxy token of
// that sandbox and port (proxyHeaders), compared in constant time. A
// port's own token is not accepted: a process in the sandbox that learned
// it must not be able to use it from anywhere the server listens.
func (p *sandboxProxy) authorize(r *http.Request, id string, port int) (string, bool) {
	if pr, ok := principalFrom(r.Context()); ok {
		return pr.Tenant, true
	}
	sb, err := p.s.mgr.ByID(id)
	if err != nil {
		return "", false
	}
	for header, want := range proxyHeaders(sb, port) {
		got := r.Header.Get(header)
		if got == "" {
			got = wsToken(r.Header) // a browser's WebSocket
		}
		if got == "" || subtle.ConstantTimeCompare([]byte(got), []byte(want)) != 1 {
			return "", false
		}
	}
	return sb.Tenant, true
}

// wsProtocols are the subprotocols a WebSocket handshake offers.
func wsProtocols(h http.Header) []string {
	var out []string
	for _, v := range h.Values("Sec-WebSocket-Protocol") {
		for p := range strings.SplitSeq(v, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
	}
	return out
}

// wsToken is the proxy token a WebSocket handshake offers as a
// subprotocol (api.WSTokenPrefix), or "".
func wsToken(h http.Header) string {
	for _, p := range wsProtocols(h) {
		if tok, ok := strings.CutPrefix(p, api.WSTokenPrefix); ok {
			return tok
		}
	}
	return ""
}

// dropWSToken removes the token from the subprotocols passed on: the
// sandbox port never sees a corral token.
func dropWSToken(h http.Header) {
	ps := wsProtocols(h)
	if len(ps) == 0 {
		return
	}
	keep := ps[:0]
	for _, p := range ps {
		if !strings.HasPrefix(p, api.WSTokenPrefix) {
			keep = append(keep, p)
		}
	}
	h.Del("Sec-WebSocket-Protocol")
	if len(keep) > 0 {
		h.Set("Sec-WebSocket-Protocol", strings.Join(keep, ", "))
	}
}
