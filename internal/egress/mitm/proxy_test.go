// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package mitm

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"testing"

	"github.com/corral-dev/corral/internal/egress/audit"
	"github.com/corral-dev/corral/internal/egress/vault"
)

// rig is a proxy relaying to a TLS server for api.test that reports the
// Authorization header it got, and a client that trusts the proxy's CA.
type rig struct {
	p      *Proxy
	orig   netip.AddrPort
	client *http.Client
	events []audit.Event
	// upstreamRoots trust the upstream server itself.
	upstreamRoots *x509.CertPool
}

func newRig(t testing.TB, trustUpstream bool) *rig {
	t.Helper()
	upstream := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/stream" {
			w.Header().Set("Content-Type", "text/event-stream")
			for i := range 3 {
				fmt.Fprintf(w, "data: %d\n\n", i)
				w.(http.Flusher).Flush()
			}
			return
		}
		fmt.Fprintf(w, "auth=%s", r.Header.Get("Authorization"))
	}))
	upstream.StartTLS()
	t.Cleanup(upstream.Close)
	roots := x509.NewCertPool()
	if trustUpstream {
		roots.AddCert(upstream.Certificate())
	}
	port := upstream.Listener.Addr().(*net.TCPAddr).Port
	dir := t.TempDir()
	if err := CreateCA(dir, "test"); err != nil {
		t.Fatal(err)
	}
	ca, err := LoadCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	var req vault.CreateRequest
	_ = vault.Decode([]byte(fmt.Sprintf(`{"credentials":[{"name":"k","source":{"type":"inline","value":"SECRET"}}],
		"bindings":[{"name":"b","match":{"hosts":["example.com"],"ports":[%d]},"auth":{"type":"bearer","credential":"k"}}]}`, port)), &req)
	v, err := vault.Create(req)
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{orig: netip.MustParseAddrPort(upstream.Listener.Addr().String()), upstreamRoots: x509.NewCertPool()}
	r.upstreamRoots.AddCert(upstream.Certificate())
	// httptest's certificate is for example.com: the client asks for that.
	r.p = New(Config{CA: ca, Roots: roots, Vault: func() vault.Vault { return v },
		Allowed: func(host string) bool { return host == "example.com" }, ResolvedFor: func(netip.Addr, string) bool { return true },
		Audit: func(ev audit.Event) { r.events = append(r.events, ev) }})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go r.p.relay(c, r.orig)
		}
	}()
	clientRoots := x509.NewCertPool()
	clientRoots.AppendCertsFromPEM(ca.CertPEM())
	r.client = &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "tcp", ln.Addr().String())
		},
		TLSClientConfig: &tls.Config{RootCAs: clientRoots},
	}}
	// The relays end when the client's connections do.
	t.Cleanup(r.client.CloseIdleConnections)
	return r
}

func (r *rig) get(t testing.TB, url string) (int, string) {
	t.Helper()
	res, err := r.client.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

func TestRelayInjectsAndStreams(t *testing.T) {
	r := newRig(t, true)
	for range 3 {
		if code, body := r.get(t, "https://example.com/"); code != 200 || body != "auth=Bearer SECRET" {
			t.Errorf("GET / = %d %q", code, body)
		}
	}
	// One event per connection and decision, not per request.
	if len(r.events) != 1 || r.events[0].Decision != "inject" || r.events[0].Rule != "binding b" {
		t.Errorf("events = %+v", r.events)
	}
	res, err := r.client.Get("https://example.com/stream")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	br := bufio.NewReader(res.Body)
	for i := range 3 {
		line, err := br.ReadString('\n')
		if err != nil || line != fmt.Sprintf("data: %d\n", i) {
			t.Fatalf("event %d = %q %v", i, line, err)
		}
		_, _ = br.ReadString('\n')
	}
}

func TestRelayRefusesAnUntrustedServer(t *testing.T) {
	r := newRig(t, false)
	code, body := r.get(t, "https://example.com/")
	if code != http.StatusBadGateway || !strings.Contains(body, "not trusted") || strings.Contains(body, "SECRET") {
		t.Errorf("GET / = %d %q", code, body)
	}
}

func BenchmarkRelay(b *testing.B) {
	r := newRig(b, true)
	r.get(b, "https://example.com/")
	b.ResetTimer()
	for b.Loop() {
		r.get(b, "https://example.com/")
	}
}

func TestRelayRefusesOversizedHeadersAndOddPaths(t *testing.T) {
	r := newRig(t, true)
	req, _ := http.NewRequest("GET", "https://example.com/", nil)
	req.Header.Set("X-Big", strings.Repeat("a", 2<<20))
	if res, err := r.client.Do(req); err == nil {
		res.Body.Close()
		if res.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
			t.Errorf("2 MiB header = %d", res.StatusCode)
		}
	}
	// Dot segments and escaped slashes get no credential.
	for _, p := range []string{"/a/../b", "/a/%2e%2e/b", "/a%2fb", "//x"} {
		req, _ := http.NewRequest("GET", "https://example.com"+p, nil)
		req.URL.Opaque = "//example.com" + p // sent as written
		res, err := r.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if strings.Contains(string(b), "SECRET") {
			t.Errorf("%s got the credential: %q", p, b)
		}
	}
	if code, body := r.get(t, "https://example.com/ok/path"); code != 200 || body != "auth=Bearer SECRET" {
		t.Errorf("a canonical path = %d %q", code, body)
	}
}

func TestCanonicalPath(t *testing.T) {
	for p, want := range map[string]bool{"/": true, "/a/b": true, "/a/b/": true, "/a/./b": false, "/a/../b": false,
		"/a/%2E%2e/b": false, "/a%2Fb": false, "//a": false, "/a\\b": false, "/%41": true} {
		u, err := url.Parse("http://h" + p)
		if err != nil {
			t.Fatal(err)
		}
		if got := canonicalPath(u); got != want {
			t.Errorf("%s = %v, want %v", p, got, want)
		}
	}
}

// BenchmarkDirect is BenchmarkRelay's client talking to its server
// without the proxy: the difference is what the relay costs.
func BenchmarkDirect(b *testing.B) {
	r := newRig(b, true)
	tr := r.client.Transport.(*http.Transport)
	tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "tcp", r.orig.String())
	}
	tr.TLSClientConfig.RootCAs = r.upstreamRoots
	r.get(b, "https://example.com/")
	b.ResetTimer()
	for b.Loop() {
		r.get(b, "https://example.com/")
	}
}
