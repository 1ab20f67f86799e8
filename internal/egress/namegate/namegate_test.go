// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package namegate

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corral-dev/corral/internal/egress/audit"
	"github.com/corral-dev/corral/internal/egress/policy"
	"github.com/corral-dev/corral/internal/testutil/netlab"
)

// The shared address an allowed name resolved to (a CDN edge, say).
var orig = netip.MustParseAddrPort("203.0.113.80:443")

// rig is a gate in front of one upstream, as if every connection to it
// had been redirected from orig.
type rig struct {
	gate string
	mu   sync.Mutex
	evs  []audit.Event
}

func (r *rig) events() []audit.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]audit.Event(nil), r.evs...)
}

func newRig(t *testing.T, pol policy.Policy, upstream string) *rig {
	t.Helper()
	c, err := policy.Compile(pol, policy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{}
	g := New(Config{
		OriginalDst: func(net.Conn) (netip.AddrPort, error) { return orig, nil },
		Policy:      func() *policy.Compiled { return c },
		ResolvedFor: func(a netip.Addr, name string) bool { return a == orig.Addr() && name == "allowed.test" },
		Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", upstream)
		},
		Audit: func(e audit.Event) { r.mu.Lock(); r.evs = append(r.evs, e); r.mu.Unlock() },
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = g.Serve(ln); close(done) }()
	t.Cleanup(func() { ln.Close(); <-done })
	r.gate = ln.Addr().String()
	return r
}

var onlyAllowed = policy.Policy{DefaultAction: "deny", Egress: []policy.Rule{
	{Action: "allow", Target: "allowed.test"}, {Action: "allow", Target: "also-allowed.test"}}}

// TLS: the server name decides; the handshake is the upstream's own.
func TestTLSServerNameDecides(t *testing.T) {
	t.Parallel()
	ca := netlab.NewCA(t, "namegate")
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{
		ca.Issue(t, "allowed.test"), ca.Issue(t, "evil.test"), ca.Issue(t, "also-allowed.test")}})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_ = c.(*tls.Conn).Handshake()
				_, _ = io.WriteString(c, "hello from upstream\n")
			}()
		}
	}()
	r := newRig(t, onlyAllowed, ln.Addr().String())
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca.PEM)
	get := func(name string) (string, error) {
		d := &net.Dialer{Timeout: 5 * time.Second}
		c, err := tls.DialWithDialer(d, "tcp", r.gate, &tls.Config{ServerName: name, RootCAs: roots, InsecureSkipVerify: name == ""})
		if err != nil {
			return "", err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		b, err := io.ReadAll(c)
		return string(b), err
	}
	if out, err := get("allowed.test"); err != nil || out != "hello from upstream\n" {
		t.Fatalf("the allowed name = %q, %v", out, err)
	}
	for _, name := range []string{"evil.test", "also-allowed.test", ""} {
		if out, err := get(name); err == nil {
			t.Errorf("server name %q passed: %q", name, out)
		}
	}
	evs := r.events()
	if len(evs) != 4 || evs[0].Decision != "allow" || !strings.Contains(evs[0].Rule, "resolved allowed.test") ||
		evs[1].Name != "evil.test" || evs[1].Decision != "deny" || !strings.Contains(evs[2].Rule, "not resolved to this address") {
		t.Errorf("audit = %+v", evs)
	}
}

// HTTP: the Host decides, and a refusal is an HTTP answer.
func TestHTTPHostDecides(t *testing.T) {
	t.Parallel()
	r := newRig(t, onlyAllowed, httpEcho(t))
	do := func(host string) (int, string) {
		c, err := net.DialTimeout("tcp", r.gate, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.WriteString(c, "GET /path HTTP/1.1\r\nHost: "+host+"\r\nConnection: close\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return 0, err.Error()
		}
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	if code, body := do("allowed.test:80"); code != 200 || !strings.Contains(body, "host allowed.test:80 path /path") {
		t.Errorf("the allowed host = %d %q", code, body)
	}
	if code, body := do("evil.test"); code != 403 || !strings.Contains(body, "evil.test") {
		t.Errorf("another host on the same address = %d %q", code, body)
	}
	// Anything else on the port is refused without reaching upstream.
	c, err := net.DialTimeout("tcp", r.gate, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	_, _ = io.WriteString(c, "SSH-2.0-OpenSSH_9.2\r\n\r\n\r\n")
	if b, _ := io.ReadAll(c); strings.Contains(string(b), "host ") {
		t.Errorf("a protocol that names nothing reached upstream: %q", b)
	}
}

// An address allowed by itself (a CIDR rule, allow-all) needs no name.
func TestAddressesAllowedByThemselvesPass(t *testing.T) {
	t.Parallel()
	for _, pol := range []policy.Policy{{DefaultAction: "allow"}, {DefaultAction: "deny", Egress: []policy.Rule{{Action: "allow", Target: "203.0.113.0/24"}}}} {
		c, err := policy.Compile(pol, policy.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if ok, why := New(Config{Policy: func() *policy.Compiled { return c }}).Decide(orig, ""); !ok {
			t.Errorf("policy %+v: %s", pol, why)
		}
	}
}

// httpEcho serves, until the test ends, the Host and path it was asked.
func httpEcho(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "host "+r.Host+" path "+r.URL.Path)
	}))
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}
