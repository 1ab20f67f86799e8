// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package policy

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
)

func mustCompile(t *testing.T, p Policy, opts Options) *Compiled {
	t.Helper()
	c, err := Compile(p, opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestFirstMatchWins(t *testing.T) {
	c := mustCompile(t, Policy{DefaultAction: "deny", Egress: []Rule{
		{Action: "deny", Target: "evil.example.com"},
		{Action: "allow", Target: "*.example.com"},
		{Action: "allow", Target: "Pypi.ORG."},
		{Action: "deny", Target: "*.pypi.org"},
		{Action: "allow", Target: "files.pypi.org"}, // after the wildcard that denies it
		{Action: "allow", Target: "10.1.0.0/16"},
		{Action: "deny", Target: "10.1.2.3"},
		{Action: "allow", Target: "2001:db8::/32"},
	}}, Options{AllowPrivate: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}})
	for _, tc := range []struct {
		name  string
		allow bool
		rule  int
	}{
		{"evil.example.com", false, 0},
		{"api.example.com", true, 1},
		{"a.b.example.com.", true, 1},
		{"example.com", false, ByDefault}, // *.example.com does not match the apex
		{"PYPI.org", true, 2},
		{"files.pypi.org", false, 3},
		{"other.net", false, ByDefault},
	} {
		d := c.DecideName(tc.name)
		if d.Allow != tc.allow || d.Rule != tc.rule {
			t.Errorf("DecideName(%q) = %+v, want allow=%v rule=%d", tc.name, d, tc.allow, tc.rule)
		}
	}
	for _, tc := range []struct {
		ip    string
		allow bool
		rule  int
	}{
		{"10.1.2.3", true, 5}, // the /16 comes first
		{"10.2.0.1", false, ByDefault},
		{"::ffff:10.1.9.9", true, 5},
		{"2001:db8::1", true, 7},
		{"169.254.169.254", false, ByAlwaysDeny},
		{"100.100.100.200", false, ByAlwaysDeny},
		{"fe80::1", false, ByAlwaysDeny},
		{"fd00:ec2::254", false, ByAlwaysDeny},
		{"192.168.1.1", false, ByAlwaysDeny}, // private, and not allowed back
	} {
		d := c.DecideIP(netip.MustParseAddr(tc.ip))
		if d.Allow != tc.allow || d.Rule != tc.rule {
			t.Errorf("DecideIP(%s) = %+v, want allow=%v rule=%d", tc.ip, d, tc.allow, tc.rule)
		}
	}
}

// The networks around the host are out of reach whatever the tenant's
// policy says, unless the operator allows a part of them back; metadata
// and link-local addresses never come back.
func TestPrivateNetworksAreDenied(t *testing.T) {
	open := Policy{DefaultAction: "allow", Egress: []Rule{
		{Action: "allow", Target: "10.0.0.0/8"}, {Action: "allow", Target: "0.0.0.0/0"}, {Action: "allow", Target: "::/0"},
	}}
	c := mustCompile(t, open, Options{})
	for _, ip := range []string{"10.0.0.1", "10.255.255.255", "172.16.0.1", "172.31.255.254", "192.168.0.1", "100.64.0.1",
		"100.127.255.254", "198.18.0.1", "198.19.255.254", "168.63.129.16", "100.100.100.200", "fc00::1", "fd12:3456::1",
		"::ffff:192.168.1.1", "240.0.0.1", "192.0.0.170", "fec0::1"} {
		if d := c.DecideIP(netip.MustParseAddr(ip)); d.Allow || d.Rule != ByAlwaysDeny {
			t.Errorf("DecideIP(%s) under allow-all = %+v, want always denied", ip, d)
		}
	}
	for _, ip := range []string{"172.32.0.1", "100.128.0.1", "198.20.0.1", "203.0.113.10", "2001:db8::1", "8.8.8.8"} {
		if d := c.DecideIP(netip.MustParseAddr(ip)); !d.Allow {
			t.Errorf("DecideIP(%s) under allow-all = %+v, want allowed", ip, d)
		}
	}
	// The operator lets sandboxes reach one internal subnet, not its host.
	host := netip.MustParsePrefix("10.20.0.5/32")
	c = mustCompile(t, open, Options{AllowPrivate: []netip.Prefix{netip.MustParsePrefix("10.20.0.0/16"), netip.MustParsePrefix("fd00:1::/32")},
		DenyPrefixes: []netip.Prefix{host}})
	for ip, allow := range map[string]bool{"10.20.1.1": true, "10.20.255.255": true, "10.21.0.1": false, "10.19.255.255": false,
		"10.20.0.5": false, "192.168.1.1": false, "fd00:1::9": true, "fd00:2::9": false, "100.100.100.200": false} {
		if d := c.DecideIP(netip.MustParseAddr(ip)); d.Allow != allow {
			t.Errorf("with 10.20.0.0/16 allowed back: DecideIP(%s) = %+v, want allow=%v", ip, d, allow)
		}
	}
	for _, bad := range []string{"169.254.0.0/16", "8.8.8.0/24", "0.0.0.0/0", "100.100.100.0/24", "fd00:ec2::/32", "10.0.0.0/7"} {
		if err := CheckAllowPrivate([]netip.Prefix{netip.MustParsePrefix(bad)}); err == nil {
			t.Errorf("CheckAllowPrivate(%s) = nil, want a refusal", bad)
		}
	}
	if err := CheckAllowPrivate([]netip.Prefix{netip.MustParsePrefix("10.20.0.0/16"), netip.MustParsePrefix("192.168.0.0/16")}); err != nil {
		t.Errorf("CheckAllowPrivate(private ranges) = %v", err)
	}
}

func TestAlwaysDenyCannotBeOpened(t *testing.T) {
	server := netip.MustParsePrefix("192.0.2.10/32")
	c := mustCompile(t, Policy{DefaultAction: "allow", Egress: []Rule{
		{Action: "allow", Target: "169.254.169.254"}, {Action: "allow", Target: "0.0.0.0/0"}, {Action: "allow", Target: "192.0.2.10"},
	}}, Options{DenyPrefixes: []netip.Prefix{server}})
	for _, ip := range []string{"169.254.169.254", "192.0.2.10", "224.0.0.1", "0.1.2.3"} {
		if d := c.DecideIP(netip.MustParseAddr(ip)); d.Allow || d.Rule != ByAlwaysDeny {
			t.Errorf("%s = %+v: a rule opened the always-deny set", ip, d)
		}
	}
	if d := c.DecideIP(netip.MustParseAddr("198.51.100.1")); !d.Allow {
		t.Errorf("an ordinary address under allow-all = %+v", d)
	}
}

func TestModes(t *testing.T) {
	for _, tc := range []struct {
		p    Policy
		mode string
	}{
		{Policy{}, "deny_all"},
		{Policy{DefaultAction: "DENY"}, "deny_all"},
		{Policy{DefaultAction: "allow"}, "allow_all"},
		{Policy{DefaultAction: "allow", Egress: []Rule{{Action: "deny", Target: "x.com"}}}, "enforcing"},
	} {
		if got := mustCompile(t, tc.p, Options{}).Mode(); got != tc.mode {
			t.Errorf("%+v mode = %s, want %s", tc.p, got, tc.mode)
		}
	}
}

func TestInvalidPoliciesNameTheRule(t *testing.T) {
	for _, tc := range []struct {
		p    Policy
		rule int
		msg  string
	}{
		{Policy{DefaultAction: "maybe"}, -1, "defaultAction"},
		{Policy{Egress: []Rule{{Action: "allow", Target: "ok.com"}, {Action: "permit", Target: "x.com"}}}, 1, "action"},
		{Policy{Egress: []Rule{{Action: "allow", Target: ""}}}, 0, "empty"},
		{Policy{Egress: []Rule{{Action: "allow", Target: "10.0.0.0/99"}}}, 0, "CIDR"},
		{Policy{Egress: []Rule{{Action: "allow", Target: "http://x.com"}}}, 0, "domain"},
		{Policy{Egress: []Rule{{Action: "allow", Target: "*"}}}, 0, "domain"},
		{Policy{Egress: []Rule{{Action: "allow", Target: "*.*.com"}}}, 0, "domain"},
		{Policy{Egress: []Rule{{Action: "allow", Target: "a..b"}}}, 0, "domain"},
		{Policy{Egress: []Rule{{Action: "allow", Target: strings.Repeat("a", 64) + ".com"}}}, 0, "domain"},
		{Policy{Egress: make([]Rule, MaxRules+1)}, -1, "rules"},
	} {
		_, err := Compile(tc.p, Options{})
		var pe *Error
		if !errors.As(err, &pe) || pe.Rule != tc.rule || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("Compile(%.80v) = %v; want an error about rule %d mentioning %q", tc.p, err, tc.rule, tc.msg)
		}
	}
}

func TestDecode(t *testing.T) {
	for _, empty := range []string{"", " null ", "{}"} {
		if p, err := Decode([]byte(empty)); err != nil || p.DefaultAction != "" || len(p.Egress) != 0 {
			t.Errorf("Decode(%q) = %+v, %v", empty, p, err)
		}
	}
	if _, err := Decode([]byte(`{"defaultAction":"deny","egres":[]}`)); err == nil {
		t.Error("an unknown field was accepted")
	}
	p, err := Decode([]byte(`{"defaultAction":"allow","egress":[{"action":"deny","target":"x.com"}]}`))
	if err != nil || p.DefaultAction != "allow" || p.Egress[0].Target != "x.com" {
		t.Errorf("Decode = %+v, %v", p, err)
	}
}

func TestMergeAndRemove(t *testing.T) {
	base := Policy{DefaultAction: "deny", Egress: []Rule{{Action: "allow", Target: "a.com"}, {Action: "allow", Target: "b.com"}}}
	got := Merge(base, []Rule{{Action: "DENY", Target: "B.com"}, {Action: "allow", Target: "c.com"}, {Action: "deny", Target: "c.com"}})
	want := []Rule{{"deny", "b.com"}, {"allow", "c.com"}, {"allow", "a.com"}}
	if got.DefaultAction != "deny" || len(got.Egress) != len(want) {
		t.Fatalf("Merge = %+v", got)
	}
	for i := range want {
		if got.Egress[i] != want[i] {
			t.Errorf("Merge rule %d = %+v, want %+v", i, got.Egress[i], want[i])
		}
	}
	left, n := Remove(got, []string{" A.COM ", "nope.com"})
	if n != 1 || len(left.Egress) != 2 || left.Egress[1].Target != "c.com" {
		t.Errorf("Remove = %+v, %d", left, n)
	}
}

func FuzzCompile(f *testing.F) {
	f.Add(`{"defaultAction":"deny","egress":[{"action":"allow","target":"*.example.com"},{"action":"deny","target":"10.0.0.0/8"}]}`, "a.example.com", "10.1.1.1")
	f.Add(`{"egress":[{"action":"allow","target":"::/0"}]}`, "x", "::1")
	f.Fuzz(func(t *testing.T, raw, name, ip string) {
		p, err := Decode([]byte(raw))
		if err != nil {
			return
		}
		c, err := Compile(p, Options{})
		if err != nil {
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("error %v is not a policy Error", err)
			}
			return
		}
		// Compiling the normalised policy gives the same decisions.
		c2, err := Compile(c.Policy(), Options{})
		if err != nil {
			t.Fatalf("the normalised policy does not compile: %v", err)
		}
		if a, b := c.DecideName(name), c2.DecideName(name); a != b {
			t.Fatalf("name %q: %+v vs %+v after normalising", name, a, b)
		}
		if addr, err := netip.ParseAddr(ip); err == nil {
			d := c.DecideIP(addr)
			if _, always := c.AlwaysDenied(addr); always && d.Allow {
				t.Fatalf("%s is always denied but was allowed", addr)
			}
		}
	})
}
