// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package egress

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/corral-dev/corral/internal/driver/netns"
	"github.com/corral-dev/corral/internal/egress/policy"
	"github.com/corral-dev/corral/internal/testutil"
)

// resolver is an upstream DNS server on the host's loopback.
func resolver(t *testing.T, zone map[string]string) string {
	return testutil.ServeDNS(t, "", "127.0.0.1:0", zone)
}

// lookup asks the sandbox's resolver (DNS over TCP from inside).
func lookup(t *testing.T, ns, name string) (rcode int, addrs []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	c, err := netns.Dial(ctx, testutil.NetnsPath(ns), "127.0.0.1:53")
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

// api calls the policy API from inside the namespace, as the server's
// forwarder does.
func api(t *testing.T, ns, method, token, body string) (int, string) {
	t.Helper()
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
		return netns.Dial(ctx, testutil.NetnsPath(ns), "127.0.0.1:18080")
	}}}
	req, _ := http.NewRequest(method, "http://egress/policy", strings.NewReader(body))
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

func start(t *testing.T, cfg Config) context.CancelFunc {
	t.Helper()
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
	p := testutil.NewNetPair(t)
	for _, a := range []string{"10.250.0.3:8080", "10.250.0.4:8080"} {
		testutil.ListenIn(t, p.Outside, "tcp", a)
	}
	up := resolver(t, map[string]string{"api.example.com.": "10.250.0.4", "other.net.": "10.250.0.3", "meta.example.com.": "169.254.169.254"})
	file := filepath.Join(t.TempDir(), "policy.json")
	cfg := Config{Netns: testutil.NetnsPath(p.Inside), Token: "egress-token", PolicyFile: file, Upstreams: []string{up},
		Initial: policy.Policy{DefaultAction: "deny", Egress: []policy.Rule{{Action: "allow", Target: "*.example.com"}}}}
	stop := start(t, cfg)

	if testutil.Reaches(p.Inside, "10.250.0.4:8080") {
		t.Fatal("reachable before resolving: literal addresses must be denied")
	}
	if rc, addrs := lookup(t, p.Inside, "api.example.com"); rc != dns.RcodeSuccess || len(addrs) != 1 || addrs[0] != "10.250.0.4" {
		t.Fatalf("lookup api.example.com = %d %v", rc, addrs)
	}
	if !testutil.Reaches(p.Inside, "10.250.0.4:8080") {
		t.Error("a resolved, allowed name is unreachable")
	}
	if rc, _ := lookup(t, p.Inside, "other.net"); rc != dns.RcodeNameError {
		t.Errorf("a denied name resolved: %d", rc)
	}
	if testutil.Reaches(p.Inside, "10.250.0.3:8080") {
		t.Error("a denied address is reachable")
	}
	if _, addrs := lookup(t, p.Inside, "meta.example.com"); len(addrs) != 0 {
		t.Errorf("a metadata address was handed out: %v", addrs)
	}

	// The API.
	if code, _ := api(t, p.Inside, "GET", "", ""); code != 401 {
		t.Errorf("no token = %d", code)
	}
	code, body := api(t, p.Inside, "GET", "egress-token", "")
	var st struct {
		Mode, EnforcementMode string
		Policy                policy.Policy
	}
	if err := json.Unmarshal([]byte(body), &st); code != 200 || err != nil || st.Mode != "enforcing" || st.EnforcementMode != "dns+nft" || len(st.Policy.Egress) != 1 {
		t.Errorf("GET = %d %s", code, body)
	}
	if code, body := api(t, p.Inside, "PATCH", "egress-token", `[{"action":"allow","target":"other.net"}]`); code != 200 {
		t.Fatalf("PATCH = %d %s", code, body)
	}
	lookup(t, p.Inside, "other.net")
	if !testutil.Reaches(p.Inside, "10.250.0.3:8080") {
		t.Error("a name allowed by PATCH is unreachable")
	}
	if code, body := api(t, p.Inside, "DELETE", "egress-token", `["*.example.com"]`); code != 200 {
		t.Fatalf("DELETE = %d %s", code, body)
	}
	if testutil.Reaches(p.Inside, "10.250.0.4:8080") {
		t.Error("an address resolved for a removed rule is still reachable")
	}
	if code, body := api(t, p.Inside, "DELETE", "egress-token", `["nope.example"]`); code != 200 || !strings.Contains(body, "no matching targets") {
		t.Errorf("DELETE of nothing = %d %s", code, body)
	}
	for _, bad := range []struct{ method, body string }{
		{"PATCH", `[]`}, {"PATCH", `{"action":"allow"}`}, {"PATCH", `[{"action":"permit","target":"x.com"}]`},
		{"PATCH", `[{"action":"allow","target":"http://x"}]`}, {"DELETE", `[]`}, {"POST", `{"defaultAction":"maybe"}`},
	} {
		if code, body := api(t, p.Inside, bad.method, "egress-token", bad.body); code != 400 {
			t.Errorf("%s %s = %d %s, want 400", bad.method, bad.body, code, body)
		}
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
	if code, body := api(t, p.Inside, "POST", "egress-token", `{}`); code != 200 || !strings.Contains(body, "deny_all") || !strings.Contains(body, "reset") {
		t.Errorf("POST {} = %d %s", code, body)
	}
	if rc, _ := lookup(t, p.Inside, "other.net"); rc != dns.RcodeNameError {
		t.Error("after a reset a name still resolves")
	}
}
