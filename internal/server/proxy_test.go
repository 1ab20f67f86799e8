// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/internal/driver/fakedriver"
)

func TestProxy(t *testing.T) {
	t.Parallel()
	s := newTS(t)
	id := s.create(s.keyA, basicCreate()).ID
	var ep api.Endpoint
	s.call("GET", "/v1/sandboxes/"+id+"/endpoints/44772", s.keyA, nil).decode(t, &ep)
	token := ep.Headers[api.HeaderExecdToken]

	echo := func(r resp) fakedriver.Echo {
		t.Helper()
		if r.status != 200 {
			t.Fatalf("proxy = %d %s", r.status, r.body)
		}
		var e fakedriver.Echo
		r.decode(t, &e)
		return e
	}
	// With the tenant's API key, to a user port: the key does not travel on.
	e := echo(s.call("POST", "/v1/sandboxes/"+id+"/proxy/8080/some/path?x=1&y=2", s.keyA, "payload"))
	if e.SandboxID != id || e.Port != 8080 || e.Path != "/some/path" || e.Query != "x=1&y=2" || e.Body != "payload" || e.Method != "POST" {
		t.Errorf("proxied request = %+v", e)
	}
	for _, h := range []string{api.HeaderAPIKey, api.HeaderExecdToken} {
		if _, ok := e.Headers[http.CanonicalHeaderKey(h)]; ok {
			t.Errorf("the sandbox's user port received %s", h)
		}
	}
	// A second corral key in Authorization is stripped too; another
	// scheme is the service's own.
	e = echo(s.call("GET", "/v1/sandboxes/"+id+"/proxy/8080/", s.keyA, nil, "Authorization", "Bearer "+s.keyB))
	if _, ok := e.Headers["Authorization"]; ok {
		t.Errorf("the sandbox's user port received another corral key: %v", e.Headers["Authorization"])
	}
	e2 := echo(s.call("GET", "/v1/sandboxes/"+id+"/proxy/8080/", s.keyA, nil, "Authorization", "Basic dXNlcjpwYXNz"))
	if got := e2.Headers["Authorization"]; len(got) != 1 || got[0] != "Basic dXNlcjpwYXNz" {
		t.Errorf("the service's own Authorization = %v", got)
	}
	if e.Headers["X-Forwarded-For"] == nil {
		t.Errorf("no X-Forwarded-For: %v", e.Headers)
	}
	// To execd, the server adds the sandbox's execd token itself.
	e = echo(s.call("GET", "/sandboxes/"+id+"/proxy/44772/ping/x", s.keyA, nil))
	if got := e.Headers[http.CanonicalHeaderKey(api.HeaderExecdToken)]; len(got) != 1 || got[0] != token {
		t.Errorf("execd got token %v, want the sandbox's", got)
	}
	// OpenSandbox clients send the proxy endpoint's headers and no API key.
	var pep api.Endpoint
	s.call("GET", "/v1/sandboxes/"+id+"/endpoints/44772?use_server_proxy=true", s.keyA, nil).decode(t, &pep)
	ptoken := pep.Headers[api.HeaderExecdToken]
	if !strings.HasSuffix(pep.Endpoint, "/sandboxes/"+id+"/proxy/44772") || ptoken == "" || ptoken == token {
		t.Fatalf("proxy endpoint = %+v; want the proxy route with a proxy token", pep)
	}
	e = echo(s.call("GET", "/v1/sandboxes/"+id+"/proxy/44772/command", "", nil, api.HeaderExecdToken, ptoken))
	if got := e.Headers[http.CanonicalHeaderKey(api.HeaderExecdToken)]; len(got) != 1 || got[0] != token {
		t.Errorf("execd got token %v through a proxy token, want the sandbox's", got)
	}
	var uep api.Endpoint
	s.call("GET", "/v1/sandboxes/"+id+"/endpoints/8080?use_server_proxy=true", s.keyA, nil).decode(t, &uep)
	e = echo(s.call("GET", "/v1/sandboxes/"+id+"/proxy/8080", "", nil, api.HeaderExecdToken, uep.Headers[api.HeaderExecdToken]))
	if _, ok := e.Headers[http.CanonicalHeaderKey(api.HeaderExecdToken)]; ok {
		t.Errorf("the user port received the proxy token")
	}
	// Anything else is refused.
	for _, tc := range []struct {
		name   string
		key    string
		hdr    []string
		status int
	}{
		{"no credentials", "", nil, 401},
		{"wrong token", "", []string{api.HeaderExecdToken, token + "x"}, 401},
		// A sandbox's own execd token must not open the public route: code
		// in a sandbox that learned it could use it from anywhere.
		{"execd token", "", []string{api.HeaderExecdToken, token}, 401},
		{"another port's proxy token", "", []string{api.HeaderExecdToken, ptoken}, 401},
		{"bad key", "ck_nope", nil, 401},
		{"other tenant", s.keyB, nil, 404},
	} {
		if r := s.call("GET", "/v1/sandboxes/"+id+"/proxy/8080/", tc.key, nil, tc.hdr...); r.status != tc.status {
			t.Errorf("%s: %d %s, want %d", tc.name, r.status, r.body, tc.status)
		}
	}
	if r := s.call("GET", "/v1/sandboxes/"+id+"/proxy/0/", s.keyA, nil); r.status != 400 {
		t.Errorf("port 0 = %d", r.status)
	}
	// The egress port takes the egress token, not the execd one.
	if r := s.call("GET", "/v1/sandboxes/"+id+"/proxy/18080/policy", "", nil, api.HeaderExecdToken, token); r.status != 401 {
		t.Errorf("execd token on the egress port = %d", r.status)
	}
	// A paused sandbox is resumed by a request that reaches it, unless
	// it opted out.
	s.call("POST", "/v1/sandboxes/"+id+"/pause", s.keyA, nil)
	if r := s.call("GET", "/v1/sandboxes/"+id+"/proxy/8080/", s.keyA, nil); r.status != 200 || s.state(s.keyA, id) != "Running" {
		t.Errorf("proxy to a paused sandbox = %d %s", r.status, r.body)
	}
	body := basicCreate()
	body["extensions"] = map[string]string{"corral.dev/auto-resume": "false"}
	stay := s.create(s.keyA, body).ID
	s.call("POST", "/v1/sandboxes/"+stay+"/pause", s.keyA, nil)
	if r := s.call("GET", "/v1/sandboxes/"+stay+"/proxy/8080/", s.keyA, nil); r.status != 409 || s.state(s.keyA, stay) != "Paused" {
		t.Errorf("proxy to a paused sandbox that opted out = %d %s", r.status, r.body)
	}
}

// TestProxyUpgrade checks that an upgraded connection (what a WebSocket
// is) flows both ways through the proxy.
func TestProxyUpgrade(t *testing.T) {
	t.Parallel()
	s := newTS(t)
	id := s.create(s.keyA, basicCreate()).ID
	conn, err := net.Dial("tcp", strings.TrimPrefix(s.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	req := "GET /v1/sandboxes/" + id + "/proxy/9000/ws HTTP/1.1\r\nHost: x\r\n" + api.HeaderAPIKey + ": " + s.keyA +
		"\r\nConnection: Upgrade\r\nUpgrade: " + fakedriver.EchoUpgrade + "\r\n\r\n"
	if _, err := io.WriteString(conn, req); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade = %d", res.StatusCode)
	}
	for _, msg := range []string{"hello", "world"} {
		if _, err := io.WriteString(conn, msg); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, len(msg))
		if _, err := io.ReadFull(br, buf); err != nil || string(buf) != msg {
			t.Fatalf("echo = %q, %v; want %q", buf, err, msg)
		}
	}
}

// TestProxyServesSandboxPagesInTheirOwnOrigin: what a sandbox port serves
// through the proxy route comes with a sandboxing CSP, so a page it makes
// never runs in the API's origin.
func TestProxyServesSandboxPagesInTheirOwnOrigin(t *testing.T) {
	t.Parallel()
	s := newTS(t)
	id := s.create(s.keyA, basicCreate()).ID
	r := s.call("GET", "/v1/sandboxes/"+id+"/proxy/8080/index.html", s.keyA, nil)
	if r.status != 200 || !strings.HasPrefix(r.header.Get("Content-Security-Policy"), "sandbox ") ||
		strings.Contains(r.header.Get("Content-Security-Policy"), "allow-same-origin") {
		t.Fatalf("proxy answer = %d %v", r.status, r.header)
	}
}

// TestProxyEndpoints: with ProxyEndpoints every endpoint is the proxy
// route, whose shape ends in the port (OpenSandbox's own server answers
// host:port/proxy/44772-style addresses, and its suite checks that).
func TestProxyEndpoints(t *testing.T) {
	t.Parallel()
	s := newTSWith(t, func(c *Config) { c.ProxyEndpoints = true })
	id := s.create(s.keyA, basicCreate()).ID
	for _, port := range []string{"44772", "8080"} {
		var ep api.Endpoint
		s.call("GET", "/v1/sandboxes/"+id+"/endpoints/"+port, s.keyA, nil).decode(t, &ep)
		if !strings.HasSuffix(ep.Endpoint, "/sandboxes/"+id+"/proxy/"+port) {
			t.Fatalf("endpoint %s = %+v", port, ep)
		}
	}
	var ep api.Endpoint
	s.call("GET", "/v1/sandboxes/"+id+"/endpoints/44772", s.keyA, nil).decode(t, &ep)
	r := s.call("GET", strings.TrimPrefix(ep.Endpoint, strings.TrimPrefix(s.url, "http://"))+"/ping", "", nil, api.HeaderExecdToken, ep.Headers[api.HeaderExecdToken])
	if r.status != 200 {
		t.Fatalf("execd through the endpoint's proxy route = %d %s", r.status, r.body)
	}
}

// TestProxyWebSocketToken: a browser, which cannot set headers on a
// WebSocket, carries the proxy route's token as a subprotocol; the token
// opens only the route, never reaches the sandbox, and the handshake's
// answer chooses corral's subprotocol. A wrong token is refused.
func TestProxyWebSocketToken(t *testing.T) {
	t.Parallel()
	s := newTS(t)
	id := s.create(s.keyA, basicCreate()).ID
	var ep api.Endpoint
	s.call("GET", "/v1/sandboxes/"+id+"/endpoints/44772?use_server_proxy=true", s.keyA, nil).decode(t, &ep)
	token := ep.Headers[api.HeaderExecdToken]
	if !strings.HasPrefix(token, "cpx_") {
		t.Fatalf("proxy endpoint headers = %v", ep.Headers)
	}
	handshake := func(protocols string) *http.Response {
		t.Helper()
		conn, err := net.Dial("tcp", strings.TrimPrefix(s.url, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		req := "GET /v1/sandboxes/" + id + "/proxy/44772/pty/x/ws HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: " + fakedriver.EchoUpgrade +
			"\r\nSec-WebSocket-Protocol: " + protocols + "\r\n\r\n"
		if _, err := io.WriteString(conn, req); err != nil {
			t.Fatal(err)
		}
		res, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := handshake(api.WSProtocol + ", " + api.WSTokenPrefix + token); res.StatusCode != http.StatusSwitchingProtocols ||
		res.Header.Get("Sec-WebSocket-Protocol") != api.WSProtocol {
		t.Fatalf("with the token: %d %v", res.StatusCode, res.Header)
	}
	for _, bad := range []string{api.WSProtocol + ", " + api.WSTokenPrefix + token + "x", api.WSProtocol, api.WSTokenPrefix + string(s.create(s.keyA, basicCreate()).ID)} {
		if res := handshake(bad); res.StatusCode != http.StatusUnauthorized {
			t.Errorf("offering %q: %d", bad, res.StatusCode)
		}
	}
	// What the sandbox's port is sent: corral's subprotocol, not the token.
	r := s.call("GET", "/v1/sandboxes/"+id+"/proxy/44772/x", "", nil, "Sec-WebSocket-Protocol", "other, "+api.WSTokenPrefix+token+", "+api.WSProtocol)
	var e fakedriver.Echo
	r.decode(t, &e)
	if r.status != 200 || strings.Join(e.Headers["Sec-Websocket-Protocol"], ",") != "other, "+api.WSProtocol {
		t.Fatalf("the port was sent %d %v", r.status, e.Headers)
	}
}
