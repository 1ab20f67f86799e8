// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package egress

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/corral-dev/corral/internal/egress/audit"
	"github.com/corral-dev/corral/internal/egress/policy"
	"github.com/corral-dev/corral/internal/hostnet/netns"
	"github.com/corral-dev/corral/internal/testutil"
	"github.com/corral-dev/corral/internal/testutil/netlab"
)

// resolver is an upstream DNS server on the host's loopback.
func resolver(t *testing.T, zone map[string]string) string {
	return netlab.ServeDNS(t, "", "127.0.0.1:0", zone)
}

// lookup asks the sandbox's resolver (DNS over TCP from inside).
func lookup(t *testing.T, ns, name string) (rcode int, addrs []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	c, err := netns.Dial(ctx, netlab.NetnsPath(ns), "127.0.0.1:53")
	if err != nil {
		t.Fatalf("dial the sandbox resolver: %v", err)
	}
	defer c.Close()
	conn := &dns.Conn{Conn: c}
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), dns.TypeA)
	_ = c.SetDeadline(time.Now().Add(3 * time.Second))
	if err := conn.WriteMsg(m); err != nil {
		t.Fatal(err)
	}
	r, err := conn.ReadMsg()
	if err != nil {
		t.Fatal(err)
	}
	for _, rr := range r.Answer {
		if a, ok := rr.(*dns.A); ok {
			addrs = append(addrs, a.A.String())
		}
	}
	return r.Rcode, addrs
}

// policyAPI calls the policy API from inside the namespace, as the server's
// forwarder does.
func policyAPI(t *testing.T, ns, method, token, body string) (int, string) {
	t.Helper()
	return apiAt(t, ns, method, "/policy", token, body)
}

// apiAt sends one request to any path of the API.
func apiAt(t *testing.T, ns, method, path, token, body string) (int, string) {
	t.Helper()
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
		return netns.Dial(ctx, netlab.NetnsPath(ns), "127.0.0.1:18080")
	}}}
	req, _ := http.NewRequest(method, "http://egress"+path, strings.NewReader(body))
	if token != "" {
		req.Header.Set(HeaderAuth, token)
	}
	res, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// events reads the audit log (not following) from inside the namespace.
func events(t *testing.T, ns, token, query string) []audit.Event {
	t.Helper()
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
		return netns.Dial(ctx, netlab.NetnsPath(ns), "127.0.0.1:18080")
	}}}
	req, _ := http.NewRequest("GET", "http://egress/events?"+query, nil)
	req.Header.Set(HeaderAuth, token)
	res, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != 200 {
		b, _ := io.ReadAll(res.Body)
		t.Fatalf("GET /events?%s = %d %s", query, res.StatusCode, b)
	}
	var out []audit.Event
	dec := json.NewDecoder(res.Body)
	for {
		var ev audit.Event
		if err := dec.Decode(&ev); err != nil {
			return out
		}
		out = append(out, ev)
	}
}

// findEvent returns the first event matching all of kind, target and
// decision whose rule mentions rule.
func findEvent(evs []audit.Event, kind, target, decision, rule string) (audit.Event, bool) {
	for _, ev := range evs {
		if ev.Kind == kind && ev.Target == target && ev.Decision == decision && strings.Contains(ev.Rule, rule) {
			return ev, true
		}
	}
	return audit.Event{}, false
}

func start(t *testing.T, cfg Config) context.CancelFunc {
	t.Helper()
	var logs testutil.LockedBuffer
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("enforcer log:\n%s", logs.String())
		}
	})
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	testutil.WaitFor(t, 10*time.Second, "the egress API", func() bool { return s.ready.Load() })
	stop := func() { cancel(); <-done }
	t.Cleanup(func() { cancel() })
	return stop
}

// TestEnforcerEndToEnd: a sandbox namespace under the enforcer resolves
// and reaches only what its policy allows, and the policy API changes
// that at run time, durably.
func TestEnforcerEndToEnd(t *testing.T) {
	testutil.RequireRoot(t)
	p := netlab.NewNetPair(t)
	for _, a := range []string{"198.51.100.3:8080", "198.51.100.4:8080"} {
		netlab.ListenIn(t, p.Outside, "tcp", a)
	}
	up := resolver(t, map[string]string{"api.example.com.": "198.51.100.4", "other.net.": "198.51.100.3", "meta.example.com.": "169.254.169.254"})
	file := filepath.Join(t.TempDir(), "policy.json")
	cfg := Config{Netns: netlab.NetnsPath(p.Inside), Token: "egress-token", PolicyFile: file, Upstreams: []string{up},
		Initial: policy.Policy{DefaultAction: "deny", Egress: []policy.Rule{{Action: "allow", Target: "*.example.com"}}}}
	stop := start(t, cfg)

	if netlab.Reaches(p.Inside, "198.51.100.4:8080") {
		t.Fatal("reachable before resolving: literal addresses must be denied")
	}
	if rc, addrs := lookup(t, p.Inside, "api.example.com"); rc != dns.RcodeSuccess || len(addrs) != 1 || addrs[0] != "198.51.100.4" {
		t.Fatalf("lookup api.example.com = %d %v", rc, addrs)
	}
	if !netlab.ReachesSoon(p.Inside, "198.51.100.4:8080") {
		t.Error("a resolved, allowed name is unreachable")
	}
	if rc, _ := lookup(t, p.Inside, "other.net"); rc != dns.RcodeNameError {
		t.Errorf("a denied name resolved: %d", rc)
	}
	if netlab.Reaches(p.Inside, "198.51.100.3:8080") {
		t.Error("a denied address is reachable")
	}
	if _, addrs := lookup(t, p.Inside, "meta.example.com"); len(addrs) != 0 {
		t.Errorf("a metadata address was handed out: %v", addrs)
	}

	// The API.
	if code, _ := policyAPI(t, p.Inside, "GET", "", ""); code != 401 {
		t.Errorf("no token = %d", code)
	}
	code, body := policyAPI(t, p.Inside, "GET", "egress-token", "")
	var st struct {
		Mode, EnforcementMode string
		Policy                policy.Policy
	}
	if err := json.Unmarshal([]byte(body), &st); code != 200 || err != nil || st.Mode != "enforcing" || st.EnforcementMode != "dns+nft" || len(st.Policy.Egress) != 1 {
		t.Errorf("GET = %d %s", code, body)
	}
	if code, body := policyAPI(t, p.Inside, "PATCH", "egress-token", `[{"action":"allow","target":"other.net"}]`); code != 200 {
		t.Fatalf("PATCH = %d %s", code, body)
	}
	lookup(t, p.Inside, "other.net")
	if !netlab.ReachesSoon(p.Inside, "198.51.100.3:8080") {
		t.Error("a name allowed by PATCH is unreachable")
	}
	if code, body := policyAPI(t, p.Inside, "DELETE", "egress-token", `["*.example.com"]`); code != 200 {
		t.Fatalf("DELETE = %d %s", code, body)
	}
	if netlab.Reaches(p.Inside, "198.51.100.4:8080") {
		t.Error("an address resolved for a removed rule is still reachable")
	}
	if code, body := policyAPI(t, p.Inside, "DELETE", "egress-token", `["nope.example"]`); code != 200 || !strings.Contains(body, "no matching targets") {
		t.Errorf("DELETE of nothing = %d %s", code, body)
	}
	for _, bad := range []struct{ method, body string }{
		{"PATCH", `[]`}, {"PATCH", `{"action":"allow"}`}, {"PATCH", `[{"action":"permit","target":"x.com"}]`},
		{"PATCH", `[{"action":"allow","target":"http://x"}]`}, {"DELETE", `[]`}, {"POST", `{"defaultAction":"maybe"}`},
	} {
		if code, body := policyAPI(t, p.Inside, bad.method, "egress-token", bad.body); code != 400 {
			t.Errorf("%s %s = %d %s, want 400", bad.method, bad.body, code, body)
		}
	}

	// The audit log names every decision above and the rule behind it.
	evs := events(t, p.Inside, "egress-token", "")
	for _, want := range []struct{ kind, target, decision, rule string }{
		{"connection", "198.51.100.4:8080", "deny", "default deny"},
		{"dns", "api.example.com", "allow", "*.example.com"},
		{"connection", "198.51.100.4:8080", "allow", "*.example.com"},
		{"dns", "other.net", "deny", "default deny"},
		{"connection", "198.51.100.3:8080", "deny", "default deny"},
		{"dns", "meta.example.com", "allow", "*.example.com"},
		{"dns", "other.net", "allow", "other.net"},
		{"connection", "198.51.100.3:8080", "allow", "other.net"},
	} {
		if _, ok := findEvent(evs, want.kind, want.target, want.decision, want.rule); !ok {
			t.Errorf("no %s event for %s (%s, %q) in %+v", want.kind, want.target, want.decision, want.rule, evs)
		}
	}
	if ev, ok := findEvent(evs, "connection", "198.51.100.4:8080", "allow", ""); ok && (ev.Name != "api.example.com" || ev.Protocol != "tcp") {
		t.Errorf("allowed connection event = %+v", ev)
	}
	for _, ev := range evs {
		if strings.HasPrefix(ev.Target, "ff02:") {
			t.Errorf("the kernel's link-local ICMPv6 was audited: %+v", ev)
		}
	}
	last := evs[len(evs)-1]
	if again := events(t, p.Inside, "egress-token", fmt.Sprintf("since=%d&epoch=%d", last.Seq, last.Epoch)); len(again) != 0 {
		t.Errorf("since the last event: %+v", again)
	}
	if again := events(t, p.Inside, "egress-token", fmt.Sprintf("since=%d&epoch=1", last.Seq)); len(again) != len(evs) {
		t.Errorf("another epoch's position should restart from the beginning: %d events, want %d", len(again), len(evs))
	}
	for _, bad := range []struct {
		method, path string
		want         int
	}{
		{"GET", "/events?since=-1", 400}, {"GET", "/events?since=x", 400}, {"GET", "/events?follow=maybe", 400},
		{"POST", "/events", 405}, {"GET", "/nope", 404},
		// No credential proxy on this sandbox: the vault is not there.
		{"POST", "/credential-vault", 412}, {"GET", "/credential-vault/credentials", 412},
	} {
		if code, body := apiAt(t, p.Inside, bad.method, bad.path, "egress-token", `{"credentials":[],"bindings":[]}`); code != bad.want {
			t.Errorf("%s %s = %d %s, want %d", bad.method, bad.path, code, body, bad.want)
		}
	}
	if code, _ := apiAt(t, p.Inside, "GET", "/events", "", ""); code != 401 {
		t.Errorf("GET /events without the token = %d", code)
	}
	// Following: a decision made while a reader waits reaches it.
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
		return netns.Dial(ctx, netlab.NetnsPath(p.Inside), "127.0.0.1:18080")
	}}}
	req, _ := http.NewRequestWithContext(t.Context(), "GET", fmt.Sprintf("http://egress/events?since=%d&follow=true", last.Seq), nil)
	req.Header.Set(HeaderAuth, "egress-token")
	res, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	got := make(chan audit.Event, 1)
	go func() {
		var ev audit.Event
		if json.NewDecoder(res.Body).Decode(&ev) == nil {
			got <- ev
		}
	}()
	lookup(t, p.Inside, "blocked.invalid")
	select {
	case ev := <-got:
		if ev.Kind != "dns" || ev.Target != "blocked.invalid" || ev.Decision != "deny" {
			t.Errorf("followed event = %+v", ev)
		}
	case <-time.After(5 * time.Second):
		t.Error("a follower did not get the next event")
	}

	// Durable: a new enforcer on the same file enforces the changed policy.
	stop()
	saved, _ := os.ReadFile(file)
	if !strings.Contains(string(saved), "other.net") || strings.Contains(string(saved), "example.com") {
		t.Errorf("persisted policy = %s", saved)
	}
	start(t, cfg)
	if rc, _ := lookup(t, p.Inside, "api.example.com"); rc != dns.RcodeNameError {
		t.Errorf("after a restart the removed rule came back: %d", rc)
	}
	if code, body := policyAPI(t, p.Inside, "POST", "egress-token", `{}`); code != 200 || !strings.Contains(body, "deny_all") || !strings.Contains(body, "reset") {
		t.Errorf("POST {} = %d %s", code, body)
	}
	if rc, _ := lookup(t, p.Inside, "other.net"); rc != dns.RcodeNameError {
		t.Error("after a reset a name still resolves")
	}
}
