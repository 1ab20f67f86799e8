// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/internal/driver/fakedriver"
	"github.com/corral-dev/corral/internal/e2b"
)

// e2bCall sends a request to the E2B API with an X-API-KEY (none if key
// is empty) and more headers.
func (s *ts) e2bCall(method, path, key string, body any, hdr ...string) resp {
	s.t.Helper()
	return s.e2bCallTo(http.DefaultClient, s.e2bURL, method, path, key, body, hdr...)
}

func (s *ts) e2bCallTo(c *http.Client, base, method, path, key string, body any, hdr ...string) resp {
	s.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		j, _ := json.Marshal(b)
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequestWithContext(s.t.Context(), method, base+path, rd)
	if err != nil {
		s.t.Fatal(err)
	}
	if key != "" {
		req.Header.Set(e2b.HeaderAPIKey, key)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i] == "Host" {
			req.Host = hdr[i+1]
			continue
		}
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := c.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return resp{status: res.StatusCode, header: res.Header, body: b}
}

// e2bErr checks an answer is E2B's error body with code equal to status.
func e2bErr(t *testing.T, r resp, status int, contains string) {
	t.Helper()
	var e e2b.Error
	if r.status != status || json.Unmarshal(r.body, &e) != nil || e.Code != status || e.Message == "" || !strings.Contains(e.Message, contains) {
		t.Errorf("want %d %q, got %d %s", status, contains, r.status, r.body)
	}
}

func (s *ts) e2bCreate(key string, body any) e2b.Sandbox {
	s.t.Helper()
	r := s.e2bCall("POST", "/v2/sandboxes", key, body)
	if r.status != http.StatusCreated {
		s.t.Fatalf("create = %d %s", r.status, r.body)
	}
	var out e2b.Sandbox
	r.decode(s.t, &out)
	return out
}

func TestE2BCreateAndLifecycle(t *testing.T) {
	t.Parallel()
	s := newTS(t)
	sb := s.e2bCreate(s.keyA, map[string]any{"templateID": "base", "timeout": 60, "metadata": map[string]string{"team": "a"}, "envVars": map[string]string{"A": "1"}})
	if !regexp.MustCompile(`^[a-z0-9]{32}$`).MatchString(sb.SandboxID) || sb.TemplateID != "base" || sb.EnvdVersion != e2b.EnvdVersion ||
		sb.ClientID == "" || sb.EnvdAccessToken == "" || sb.TrafficAccessToken == nil || *sb.TrafficAccessToken == "" {
		t.Fatalf("create = %+v", sb)
	}
	// The same sandbox through corral's own API, under its UUID.
	id, _ := e2b.ToCorralID(sb.SandboxID)
	if r := s.call("GET", "/v1/sandboxes/"+id, s.keyA, nil); r.status != 200 {
		t.Fatalf("corral's view = %d %s", r.status, r.body)
	}
	var d e2b.SandboxDetail
	s.e2bCall("GET", "/sandboxes/"+sb.SandboxID, s.keyA, nil).decode(t, &d)
	if d.State != "running" || d.Metadata["team"] != "a" || d.EnvdAccessToken != sb.EnvdAccessToken || d.EndAt.Sub(d.StartedAt) < 55*time.Second || d.CPUCount < 1 || d.Lifecycle == nil {
		t.Fatalf("detail = %+v", d)
	}
	// Timeout restarts from now, shorter or longer.
	if r := s.e2bCall("POST", "/sandboxes/"+sb.SandboxID+"/timeout", s.keyA, map[string]any{"timeout": 3600}); r.status != 204 || len(r.body) != 0 {
		t.Fatalf("timeout = %d %s", r.status, r.body)
	}
	var d2 e2b.SandboxDetail
	s.e2bCall("GET", "/sandboxes/"+sb.SandboxID, s.keyA, nil).decode(t, &d2)
	if time.Until(d2.EndAt) < 59*time.Minute {
		t.Fatalf("endAt after timeout = %v", d2.EndAt)
	}
	// Pause twice: 204, then 409; connect resumes (201), then 200.
	if r := s.e2bCall("POST", "/sandboxes/"+sb.SandboxID+"/pause", s.keyA, "{}"); r.status != 204 {
		t.Fatalf("pause = %d %s", r.status, r.body)
	}
	e2bErr(t, s.e2bCall("POST", "/sandboxes/"+sb.SandboxID+"/pause", s.keyA, "{}"), 409, "already paused")
	var paused []e2b.SandboxDetail
	s.e2bCall("GET", "/v2/sandboxes?state=paused", s.keyA, nil).decode(t, &paused)
	if len(paused) != 1 || paused[0].SandboxID != sb.SandboxID {
		t.Fatalf("paused list = %+v", paused)
	}
	if r := s.e2bCall("POST", "/v2/sandboxes/"+sb.SandboxID+"/connect", s.keyA, map[string]any{"timeout": 60}); r.status != 201 {
		t.Fatalf("connect to a paused sandbox = %d %s", r.status, r.body)
	}
	if r := s.e2bCall("POST", "/sandboxes/"+sb.SandboxID+"/connect", s.keyA, map[string]any{"timeout": 60}); r.status != 200 {
		t.Fatalf("connect to a running sandbox = %d %s", r.status, r.body)
	}
	// Metrics: one sample, E2B's fields.
	var ms []map[string]any
	s.e2bCall("GET", "/sandboxes/"+sb.SandboxID+"/metrics", s.keyA, nil).decode(t, &ms)
	if len(ms) != 1 || ms[0]["timestamp"] == nil || ms[0]["timestampUnix"] == nil || ms[0]["cpuCount"] == nil {
		t.Fatalf("metrics = %v", ms)
	}
	// Kill: 204, then 404 (which the SDK reads as false).
	if r := s.e2bCall("DELETE", "/sandboxes/"+sb.SandboxID, s.keyA, nil); r.status != 204 {
		t.Fatalf("kill = %d %s", r.status, r.body)
	}
	e2bErr(t, s.e2bCall("DELETE", "/sandboxes/"+sb.SandboxID, s.keyA, nil), 404, "not found")
	e2bErr(t, s.e2bCall("GET", "/sandboxes/"+sb.SandboxID, s.keyA, nil), 404, "")
}

func TestE2BListPagesAndFilters(t *testing.T) {
	t.Parallel()
	s := newTS(t)
	var ids []string
	for i, team := range []string{"x y", "x y", "z"} {
		sb := s.e2bCreate(s.keyA, map[string]any{"templateID": "base", "metadata": map[string]string{"team": strings.ReplaceAll(team, " ", "-"), "n": string(rune('a' + i))}})
		ids = append(ids, sb.SandboxID)
	}
	// Another tenant's sandbox is never listed.
	s.e2bCreate(s.keyB, map[string]any{"templateID": "base", "metadata": map[string]string{"team": "x-y"}})
	// The SDK's encoding: each part, the pairs, the parameter.
	filter := url.QueryEscape(url.QueryEscape("team") + "=" + url.QueryEscape("x-y"))
	var got []e2b.SandboxDetail
	s.e2bCall("GET", "/v2/sandboxes?metadata="+url.QueryEscape(filter), s.keyA, nil).decode(t, &got)
	if len(got) != 2 {
		t.Fatalf("filtered = %+v", got)
	}
	// Pages of one, newest first, chained by X-Next-Token.
	var seen []string
	next := ""
	for range 5 {
		q := "/v2/sandboxes?limit=1"
		if next != "" {
			q += "&nextToken=" + url.QueryEscape(next)
		}
		r := s.e2bCall("GET", q, s.keyA, nil)
		var page []e2b.SandboxDetail
		r.decode(t, &page)
		for _, p := range page {
			seen = append(seen, p.SandboxID)
		}
		if next = r.header.Get(e2b.HeaderNextToken); next == "" {
			break
		}
	}
	if len(seen) != 3 || seen[0] != ids[2] || seen[2] != ids[0] {
		t.Fatalf("pages = %v, created %v", seen, ids)
	}
	var v1 []e2b.SandboxDetail
	s.e2bCall("GET", "/sandboxes", s.keyA, nil).decode(t, &v1)
	if len(v1) != 3 {
		t.Fatalf("v1 list = %+v", v1)
	}
}

func TestE2BRefusesBadInput(t *testing.T) {
	t.Parallel()
	s := newTS(t)
	sb := s.e2bCreate(s.keyA, map[string]any{"templateID": "base"})
	id := sb.SandboxID
	for _, c := range []struct {
		method, path string
		body         any
		status       int
		says         string
	}{
		{"POST", "/v2/sandboxes", nil, 400, "body"},
		{"POST", "/v2/sandboxes", "{", 400, ""},
		{"POST", "/v2/sandboxes", map[string]any{}, 400, "templateID"},
		{"POST", "/v2/sandboxes", map[string]any{"templateID": "nope"}, 400, "nope"},
		{"POST", "/v2/sandboxes", map[string]any{"templateID": "base", "timeout": 0}, 400, "timeout"},
		{"POST", "/v2/sandboxes", map[string]any{"templateID": "base", "autoPause": true}, 400, "autoPause"},
		{"POST", "/v2/sandboxes", map[string]any{"templateID": "base", "mcp": map[string]any{"x": 1}}, 400, "mcp"},
		{"POST", "/v2/sandboxes", map[string]any{"templateID": "base", "iam": map[string]any{"tokens": map[string]any{}}}, 400, "iam"},
		{"POST", "/v2/sandboxes", map[string]any{"templateID": "base", "network": map[string]any{"rules": map[string]any{"a.com": []any{}}}}, 400, "network.rules"},
		{"POST", "/v2/sandboxes", map[string]any{"templateID": "base", "network": map[string]any{"egressProxy": map[string]any{"address": "x"}}}, 400, "network.egressProxy"},
		{"POST", "/v2/sandboxes", map[string]any{"templateID": "base", "network": map[string]any{"httpsPorts": []int{443}}}, 400, "httpsPorts"},
		{"POST", "/v2/sandboxes", map[string]any{"templateID": "base", "network": map[string]any{"allowOut": []string{"not a target!"}}}, 400, "network"},
		{"POST", "/v2/sandboxes", map[string]any{"templateID": "base", "metadata": map[string]string{"bad key": "v"}}, 400, "metadata"},
		{"POST", "/v2/sandboxes", map[string]any{"templateID": "base", "envVars": map[string]string{"A=B": "v"}}, 400, "env"},
		{"GET", "/sandboxes/not-hex", nil, 404, "not found"},
		{"GET", "/sandboxes/0123456789abcdef0123456789abcdef", nil, 404, "not found"},
		{"POST", "/sandboxes/" + id + "/timeout", nil, 400, ""},
		{"POST", "/sandboxes/" + id + "/timeout", map[string]any{}, 400, "timeout"},
		{"POST", "/sandboxes/" + id + "/timeout", map[string]any{"timeout": -1}, 400, "timeout"},
		{"POST", "/sandboxes/" + id + "/connect", map[string]any{"timeout": 0}, 400, "timeout"},
		{"GET", "/v2/sandboxes?limit=0", nil, 400, "limit"},
		{"GET", "/v2/sandboxes?limit=abc", nil, 400, "limit"},
		{"GET", "/v2/sandboxes?state=dead", nil, 400, "state"},
		{"GET", "/v2/sandboxes?nextToken=garbage", nil, 400, "nextToken"},
		{"GET", "/v2/sandboxes?metadata=%25ZZ", nil, 400, "metadata"},
		{"GET", "/v2/sandboxes?metadata=novalue", nil, 400, "key=value"},
		{"GET", "/v2/sandboxes?order=sideways", nil, 400, "order"},
		{"GET", "/v2/sandboxes?startedAfter=yesterday", nil, 400, "startedAfter"},
		{"GET", "/sandboxes/" + id + "/metrics?start=soon", nil, 400, "start"},
		{"POST", "/sandboxes/" + id + "/fork", map[string]any{"count": 0}, 400, "count"},
		{"POST", "/sandboxes/" + id + "/fork", map[string]any{"count": 100}, 400, "count"},
		{"PUT", "/sandboxes/" + id + "/network", map[string]any{}, 400, "network"},
		{"DELETE", "/templates/nope", nil, 404, "nope"},
		{"GET", "/nowhere", nil, 404, "no route"},
	} {
		e2bErr(t, s.e2bCall(c.method, c.path, s.keyA, c.body), c.status, c.says)
	}
	// Authentication: none, a wrong key; another tenant sees nothing.
	e2bErr(t, s.e2bCall("GET", "/v2/sandboxes", "", nil), 401, "API key")
	e2bErr(t, s.e2bCall("GET", "/v2/sandboxes", "e2b_0000", nil), 401, "invalid")
	e2bErr(t, s.e2bCall("GET", "/sandboxes/"+id, s.keyB, nil), 404, "not found")
	e2bErr(t, s.e2bCall("DELETE", "/sandboxes/"+id, s.keyB, nil), 404, "not found")
	e2bErr(t, s.e2bCall("POST", "/sandboxes/"+id+"/pause", s.keyB, "{}"), 404, "not found")
}

// TestE2BSandboxPorts: requests naming a sandbox reach its envd, code
// interpreter or other port only with that sandbox's tokens (or its
// tenant's key), which are never passed on; an unknown sandbox is E2B's
// 502.
func TestE2BSandboxPorts(t *testing.T) {
	t.Parallel()
	s := newTS(t)
	a := s.e2bCreate(s.keyA, map[string]any{"templateID": "base"})
	b := s.e2bCreate(s.keyA, map[string]any{"templateID": "base"})
	other := s.e2bCreate(s.keyB, map[string]any{"templateID": "base"})
	port := func(sb e2b.Sandbox, p, path string, hdr ...string) resp {
		t.Helper()
		return s.e2bCall("POST", path, "", "body", append([]string{e2b.HeaderSandboxID, sb.SandboxID, e2b.HeaderSandboxPort, p}, hdr...)...)
	}
	echo := func(r resp) fakedriver.Echo {
		t.Helper()
		if r.status != 200 {
			t.Fatalf("port = %d %s", r.status, r.body)
		}
		var e fakedriver.Echo
		r.decode(t, &e)
		return e
	}
	// envd: to execd's E2B route, with execd's token added and the
	// client's tokens removed; Basic auth (the user) travels on.
	e := echo(port(a, "49983", "/process.Process/Start", e2b.HeaderAccessToken, a.EnvdAccessToken, "Authorization", "Basic dXNlcjo="))
	aID, _ := e2b.ToCorralID(a.SandboxID)
	if e.SandboxID != aID || e.Port != api.ExecdPort || e.Path != api.PathExecdE2BEnvd+"/process.Process/Start" || e.Body != "body" ||
		e.Headers[http.CanonicalHeaderKey(api.HeaderExecdToken)] == nil || e.Headers[http.CanonicalHeaderKey(e2b.HeaderAccessToken)] != nil ||
		e.Headers["Authorization"] == nil {
		t.Fatalf("envd request = %+v", e)
	}
	e = echo(port(a, "49999", "/execute", e2b.HeaderTrafficToken, *a.TrafficAccessToken))
	if e.Path != api.PathExecdE2BCode+"/execute" || e.Headers[http.CanonicalHeaderKey(e2b.HeaderTrafficToken)] != nil {
		t.Fatalf("code interpreter request = %+v", e)
	}
	e = echo(port(a, "8080", "/app", e2b.HeaderTrafficToken, *a.TrafficAccessToken))
	if e.Port != 8080 || e.Path != "/app" || e.Headers[http.CanonicalHeaderKey(api.HeaderExecdToken)] != nil {
		t.Fatalf("user port request = %+v", e)
	}
	// Another sandbox's tokens, another tenant's key, none: 401.
	for _, c := range []struct {
		p   string
		hdr []string
	}{
		{"49983", nil},
		{"49983", []string{e2b.HeaderAccessToken, b.EnvdAccessToken}},
		{"49983", []string{e2b.HeaderAccessToken, other.EnvdAccessToken}},
		{"49983", []string{e2b.HeaderTrafficToken, *a.TrafficAccessToken}},
		{"49983", []string{e2b.HeaderAPIKey, s.keyA}},
		{"49999", []string{e2b.HeaderTrafficToken, *b.TrafficAccessToken}},
		{"49999", []string{e2b.HeaderAPIKey, s.keyB}},
		{"8080", []string{e2b.HeaderAccessToken, b.EnvdAccessToken}},
		{"8080", nil},
	} {
		e2bErr(t, port(a, c.p, "/x", c.hdr...), 401, "token")
	}
	// The owning tenant's key opens the other ports, and is not passed on.
	e = echo(port(a, "8080", "/k", e2b.HeaderAPIKey, s.keyA))
	if e.Headers[http.CanonicalHeaderKey(e2b.HeaderAPIKey)] != nil {
		t.Fatalf("a corral key reached the sandbox: %+v", e.Headers)
	}
	// Health needs no token; a signed /files URL opens /files only.
	if r := s.e2bCall("GET", "/health", "", nil, e2b.HeaderSandboxID, a.SandboxID); r.status != 200 {
		t.Fatalf("health = %d %s", r.status, r.body)
	}
	sig := e2b.FileSignature("/tmp/f", "read", "", a.EnvdAccessToken, 0)
	if r := s.e2bCall("GET", "/files?path=/tmp/f&signature="+url.QueryEscape(sig), "", nil, e2b.HeaderSandboxID, a.SandboxID); r.status != 200 {
		t.Fatalf("a signed read = %d %s", r.status, r.body)
	}
	for _, q := range []string{
		"/files?path=/tmp/other&signature=" + url.QueryEscape(sig),
		"/files?path=/tmp/f&username=root&signature=" + url.QueryEscape(sig),
		"/files?path=/tmp/f&signature=" + url.QueryEscape(e2b.FileSignature("/tmp/f", "read", "", a.EnvdAccessToken, 1)) + "&signature_expiration=1",
	} {
		e2bErr(t, s.e2bCall("GET", q, "", nil, e2b.HeaderSandboxID, a.SandboxID), 401, "token")
	}
	e2bErr(t, s.e2bCall("POST", "/files?path=/tmp/f&signature="+url.QueryEscape(sig), "", "x", e2b.HeaderSandboxID, a.SandboxID), 401, "token")
	// Unknown and malformed sandboxes: E2B's 502 (the SDK's "timed out").
	for _, sid := range []string{"0123456789abcdef0123456789abcdef", "NOT-AN-ID"} {
		r := s.e2bCall("GET", "/health", "", nil, e2b.HeaderSandboxID, sid)
		var pe e2b.ProxyError
		if r.status != 502 || json.Unmarshal(r.body, &pe) != nil || pe.Code != 502 || pe.SandboxID != sid {
			t.Fatalf("unknown sandbox = %d %s", r.status, r.body)
		}
	}
	e2bErr(t, port(a, "0", "/x"), 400, "Port")
	// corral's own daemons are never a sandbox's service here, whatever
	// the token.
	for _, p := range []string{"44772", "18080"} {
		e2bErr(t, port(a, p, "/command", e2b.HeaderTrafficToken, *a.TrafficAccessToken, e2b.HeaderAccessToken, a.EnvdAccessToken), 403, "corral's own")
	}
	e2bErr(t, port(a, "49983", "/a/../b", e2b.HeaderAccessToken, a.EnvdAccessToken), 400, "..")
	// A killed sandbox is gone for its ports too.
	s.e2bCall("DELETE", "/sandboxes/"+a.SandboxID, s.keyA, nil)
	if r := port(a, "49983", "/health", e2b.HeaderAccessToken, a.EnvdAccessToken); r.status != 502 {
		t.Fatalf("a killed sandbox's envd = %d %s", r.status, r.body)
	}
}

// TestE2BPublicTraffic: network.allowPublicTraffic opens a sandbox's own
// services without a token, but never envd, the code interpreter or
// corral's daemons.
func TestE2BPublicTraffic(t *testing.T) {
	t.Parallel()
	s := newTS(t)
	pub := s.e2bCreate(s.keyA, map[string]any{"templateID": "base", "network": map[string]any{"allowPublicTraffic": true}})
	priv := s.e2bCreate(s.keyA, map[string]any{"templateID": "base", "network": map[string]any{"allowPublicTraffic": false}})
	get := func(sb e2b.Sandbox, port string) resp {
		return s.e2bCall("GET", "/app", "", nil, e2b.HeaderSandboxID, sb.SandboxID, e2b.HeaderSandboxPort, port)
	}
	if r := get(pub, "8080"); r.status != 200 {
		t.Fatalf("a public sandbox's service = %d %s", r.status, r.body)
	}
	e2bErr(t, get(priv, "8080"), 401, "token")
	e2bErr(t, get(pub, "49983"), 401, "token")
	e2bErr(t, get(pub, "49999"), 401, "token")
	e2bErr(t, get(pub, "44772"), 403, "corral's own")
}

// TestE2BHostRouting: with a domain, {port}-{id}.{domain} is that
// sandbox port's own origin, over TLS as corral serves it; api.{domain}
// and anything else is the control plane.
func TestE2BHostRouting(t *testing.T) {
	t.Parallel()
	s := newTSWith(t, func(c *Config) {
		c.E2B = &E2BConfig{Domain: "sbx.test", Templates: map[string]string{"base": "fake:ok"}}
	})
	sb := s.e2bCreate(s.keyA, map[string]any{"templateID": "base"})
	if sb.Domain == nil || *sb.Domain != "sbx.test" {
		t.Fatalf("create's domain = %v", sb.Domain)
	}
	cert, caPEM, err := e2b.LocalCA(t.TempDir(), "sbx.test")
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewUnstartedServer(s.e2bHandler)
	hs.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	hs.StartTLS()
	t.Cleanup(hs.Close)
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	// Verified against the local CA for the sandbox origin's name.
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: "49983-" + sb.SandboxID + ".sbx.test"}}}
	host := "49983-" + sb.SandboxID + ".sbx.test"
	r := s.e2bCallTo(c, hs.URL, "POST", "/filesystem.Filesystem/Stat", "", "{}", "Host", host, e2b.HeaderAccessToken, sb.EnvdAccessToken)
	var e fakedriver.Echo
	if r.status != 200 || json.Unmarshal(r.body, &e) != nil || e.Path != api.PathExecdE2BEnvd+"/filesystem.Filesystem/Stat" {
		t.Fatalf("envd by host = %d %s", r.status, r.body)
	}
	if r.header.Get("Content-Security-Policy") != "" {
		t.Fatalf("a sandbox origin's own answer is sandboxed: %v", r.header)
	}
	r = s.e2bCallTo(c, hs.URL, "GET", "/page", "", nil, "Host", "3000-"+sb.SandboxID+".sbx.test:443", e2b.HeaderTrafficToken, *sb.TrafficAccessToken)
	if r.status != 200 || json.Unmarshal(r.body, &e) != nil || e.Port != 3000 {
		t.Fatalf("a user port by host = %d %s", r.status, r.body)
	}
	// A user port reached on the shared origin is sandboxed.
	r = s.e2bCall("GET", "/page", "", nil, e2b.HeaderSandboxID, sb.SandboxID, e2b.HeaderSandboxPort, "3000", e2b.HeaderTrafficToken, *sb.TrafficAccessToken)
	if !strings.HasPrefix(r.header.Get("Content-Security-Policy"), "sandbox") {
		t.Fatalf("a user port on the shared origin is not sandboxed: %v", r.header)
	}
	// The control plane by its name, and by any other.
	for _, h := range []string{"api.sbx.test", "sbx.test", "127.0.0.1"} {
		r = s.e2bCallTo(c, hs.URL, "GET", "/sandboxes/"+sb.SandboxID, s.keyA, nil, "Host", h)
		if r.status != 200 {
			t.Fatalf("control plane at %s = %d %s", h, r.status, r.body)
		}
	}
	// Names that are not a sandbox port's.
	for _, h := range []string{"49983-" + sb.SandboxID + "-x.sbx.test", "x-" + sb.SandboxID + ".sbx.test", "049983-" + sb.SandboxID + ".sbx.test", "70000-" + sb.SandboxID + ".sbx.test"} {
		r = s.e2bCallTo(c, hs.URL, "GET", "/health", "", nil, "Host", h)
		if r.status != 502 {
			t.Fatalf("host %s = %d %s", h, r.status, r.body)
		}
	}
}

// TestE2BNetworkMapsToEgressPolicy: allow_internet_access and
// network.allowOut/denyOut become the sandbox's egress policy, which get
// answers back in E2B's terms.
func TestE2BNetworkMapsToEgressPolicy(t *testing.T) {
	t.Parallel()
	s := newTS(t)
	for _, c := range []struct {
		body     map[string]any
		internet bool
		allow    []string
		deny     []string
	}{
		{map[string]any{}, true, nil, nil},
		{map[string]any{"allow_internet_access": false}, false, nil, nil},
		{map[string]any{"network": map[string]any{"allowOut": []string{"example.com"}}}, false, []string{"example.com"}, nil},
		{map[string]any{"network": map[string]any{"denyOut": []string{"10.0.0.0/8"}}}, true, nil, []string{"10.0.0.0/8"}},
		{map[string]any{"network": map[string]any{"allowOut": []string{"1.1.1.1"}, "denyOut": []string{"0.0.0.0/0"}}}, false, []string{"1.1.1.1"}, nil},
	} {
		c.body["templateID"] = "base"
		sb := s.e2bCreate(s.keyA, c.body)
		var d e2b.SandboxDetail
		s.e2bCall("GET", "/sandboxes/"+sb.SandboxID, s.keyA, nil).decode(t, &d)
		var allow, deny []string
		if d.Network != nil {
			allow, deny = d.Network.AllowOut, d.Network.DenyOut
		}
		if d.AllowInternetAccess == nil || *d.AllowInternetAccess != c.internet || strings.Join(allow, ",") != strings.Join(c.allow, ",") || strings.Join(deny, ",") != strings.Join(c.deny, ",") {
			t.Errorf("%v: internet %v, allowOut %v, denyOut %v", c.body, d.AllowInternetAccess, allow, deny)
		}
	}
}
