// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package nft

import (
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/corral-dev/corral/internal/egress/policy"
	"github.com/corral-dev/corral/internal/testutil"
	"github.com/corral-dev/corral/internal/testutil/netlab"
	"github.com/google/nftables"
)

func TestRanges(t *testing.T) {
	c, err := policy.Compile(policy.Policy{DefaultAction: "deny", Egress: []policy.Rule{
		{Action: "allow", Target: "10.1.2.3"},
		{Action: "deny", Target: "10.1.0.0/16"},
		{Action: "allow", Target: "10.0.0.0/8"},
		{Action: "allow", Target: "example.com"},
		{Action: "allow", Target: "2001:db8::/64"},
	}}, policy.Options{AllowPrivate: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/9")}})
	if err != nil {
		t.Fatal(err)
	}
	allow, deny := ranges(c)
	want := []string{"10.0.0.0-10.0.255.255", "10.1.2.3-10.1.2.3", "10.2.0.0-10.255.255.255"}
	var got []string
	for _, s := range allow[0] {
		got = append(got, s.lo.String()+"-"+s.hi.String())
	}
	if len(got) != len(want) {
		t.Fatalf("allowed v4 = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("allowed v4 = %v, want %v", got, want)
		}
	}
	inDeny := func(ip string) bool {
		a := netip.MustParseAddr(ip)
		for _, s := range deny[0] {
			if !a.Less(s.lo) && !s.hi.Less(a) {
				return true
			}
		}
		return false
	}
	// 10.128.0.0/9 and 192.168.0.0/16 stay private and denied.
	for ip, want := range map[string]bool{"10.1.0.1": true, "10.1.2.3": false, "169.254.169.254": true, "10.3.0.1": false,
		"10.200.0.1": true, "192.168.7.7": true} {
		if inDeny(ip) != want {
			t.Errorf("%s denied = %v, want %v", ip, !want, want)
		}
	}
	if len(allow[1]) != 1 || allow[1][0].hi.String() != "2001:db8::ffff:ffff:ffff:ffff" {
		t.Errorf("allowed v6 = %v", allow[1])
	}
}

func TestEnforcement(t *testing.T) {
	testutil.RequireRoot(t)
	p := netlab.NewNetPair(t)
	for _, a := range []string{"198.51.100.2:8080", "198.51.100.3:8080", "198.51.100.4:8080"} {
		netlab.ListenIn(t, p.Outside, "tcp", a)
	}
	netlab.ListenIn(t, p.Outside, "udp", "198.51.100.2:53")
	netlab.ListenIn(t, p.Outside, "udp", "198.51.100.2:5353")
	if !netlab.ReachesSoon(p.Inside, "198.51.100.4:8080") {
		t.Fatal("the test network does not work without a policy")
	}
	e, err := New(netlab.NetnsPath(p.Inside))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	compile := func(pol policy.Policy) *policy.Compiled {
		c, err := policy.Compile(pol, policy.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	pol := compile(policy.Policy{DefaultAction: "deny", Egress: []policy.Rule{
		{Action: "allow", Target: "198.51.100.2"}, {Action: "deny", Target: "198.51.100.3"}, {Action: "allow", Target: "*.example.com"},
	}})
	if err := e.Apply(pol); err != nil {
		t.Fatal(err)
	}
	if !netlab.ReachesSoon(p.Inside, "198.51.100.2:8080") {
		t.Error("an allowed address is unreachable")
	}
	if netlab.Reaches(p.Inside, "198.51.100.4:8080") {
		t.Error("an address no rule allows is reachable")
	}
	if netlab.UDPAnswered(t, p.Inside, "198.51.100.2:53") {
		t.Error("DNS to a resolver other than the proxy got through")
	}
	if !netlab.UDPAnsweredSoon(t, p.Inside, "198.51.100.2:5353") {
		t.Error("UDP to an allowed address was dropped")
	}
	// What the DNS proxy resolves for an allowed name becomes reachable;
	// a denied address stays denied even then.
	if err := e.AllowResolved("api.example.com", []netip.Addr{netip.MustParseAddr("198.51.100.4"), netip.MustParseAddr("198.51.100.3")}, time.Minute); err != nil {
		t.Fatal(err)
	}
	if !netlab.ReachesSoon(p.Inside, "198.51.100.4:8080") {
		t.Error("a resolved address is unreachable")
	}
	if netlab.Reaches(p.Inside, "198.51.100.3:8080") {
		t.Error("a resolved address opened an explicitly denied one")
	}
	// Refreshing a resolved address renews its timeout, in one step.
	if err := e.AllowResolved("api.example.com", []netip.Addr{netip.MustParseAddr("198.51.100.4")}, 5*time.Minute); err != nil {
		t.Fatal(err)
	}
	if d := e.elementTimeout(t, "dyn4", "198.51.100.4"); d < 4*time.Minute {
		t.Errorf("the refreshed address times out in %v, want about 5m", d)
	}
	// An address shared by two allowed names knows both.
	if err := e.AllowResolved("cdn.example.com", []netip.Addr{netip.MustParseAddr("198.51.100.4")}, time.Minute); err != nil {
		t.Fatal(err)
	}
	if got := e.ResolvedNames(netip.MustParseAddr("198.51.100.4")); len(got) != 2 || got[0] != "api.example.com" || got[1] != "cdn.example.com" {
		t.Errorf("names of a shared address = %v", got)
	}
	// A new policy keeps resolved addresses of names it still allows...
	if err := e.Apply(compile(policy.Policy{DefaultAction: "deny", Egress: []policy.Rule{{Action: "allow", Target: "api.example.com"}}})); err != nil {
		t.Fatal(err)
	}
	if !netlab.ReachesSoon(p.Inside, "198.51.100.4:8080") || netlab.Reaches(p.Inside, "198.51.100.2:8080") {
		t.Error("after a policy change: resolved address lost, or a removed rule still applies")
	}
	if got := e.ResolvedNames(netip.MustParseAddr("198.51.100.4")); len(got) != 1 || got[0] != "api.example.com" {
		t.Errorf("names after cdn.example.com lost its rule = %v", got)
	}
	// ...and drops those of names it no longer allows.
	if err := e.Apply(compile(policy.Policy{DefaultAction: "deny"})); err != nil {
		t.Fatal(err)
	}
	if netlab.Reaches(p.Inside, "198.51.100.4:8080") {
		t.Error("a resolved address outlived its name's rule")
	}
	// Allow-all still keeps the always-deny set and the extra denials.
	extra, err := policy.Compile(policy.Policy{DefaultAction: "allow"}, policy.Options{DenyPrefixes: []netip.Prefix{netip.MustParsePrefix("198.51.100.3/32")}})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Apply(extra); err != nil {
		t.Fatal(err)
	}
	if !netlab.ReachesSoon(p.Inside, "198.51.100.4:8080") || netlab.Reaches(p.Inside, "198.51.100.3:8080") {
		t.Error("allow-all: ordinary address blocked, or an always-denied one reachable")
	}
	// Loopback inside the sandbox is never affected.
	netlab.ListenIn(t, p.Inside, "tcp", "127.0.0.1:9090")
	if err := e.Apply(compile(policy.Policy{DefaultAction: "deny"})); err != nil {
		t.Fatal(err)
	}
	if !netlab.ReachesSoon(p.Inside, "127.0.0.1:9090") {
		t.Error("loopback was blocked")
	}
}

// elementTimeout reads the timeout the kernel holds for an address in a set.
func (e *Enforcer) elementTimeout(t *testing.T, set, addr string) time.Duration {
	t.Helper()
	s := &nftables.Set{Table: &nftables.Table{Family: nftables.TableFamilyINet, Name: TableName}, Name: set,
		KeyType: nftables.TypeIPAddr, HasTimeout: true}
	els, err := e.conn.GetSetElements(s)
	if err != nil {
		t.Fatal(err)
	}
	want := netip.MustParseAddr(addr).AsSlice()
	for _, el := range els {
		if string(el.Key) == string(want) {
			return el.Timeout
		}
	}
	t.Fatalf("%s is not in %s", addr, set)
	return 0
}

// A tenant's allow-all reaches the internet but none of the networks
// around the host, whose traffic would leave masqueraded as the host; the
// operator can allow one back. The hosts are in the test's own namespace.
func TestPrivateNetworksStayOut(t *testing.T) {
	testutil.RequireRoot(t)
	p := netlab.NewNetPair(t)
	ip := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v %s", args, err, out)
		}
	}
	dev := "vo" + strings.TrimPrefix(p.Outside, "cno-")
	for _, a := range []string{"10.250.0.2/24", "192.168.77.2/24", "100.64.7.2/24"} {
		ip("-n", p.Outside, "addr", "add", a, "dev", dev)
		pre := netip.MustParsePrefix(a).Masked().String()
		ip("-n", p.Inside, "route", "add", pre, "dev", "vi"+strings.TrimPrefix(p.Inside, "cni-"))
		netlab.ListenIn(t, p.Outside, "tcp", strings.TrimSuffix(a, "/24")+":8080")
	}
	netlab.ListenIn(t, p.Outside, "tcp", "198.51.100.4:8080")
	for _, a := range []string{"10.250.0.2:8080", "192.168.77.2:8080", "100.64.7.2:8080", "198.51.100.4:8080"} {
		if !netlab.ReachesSoon(p.Inside, a) {
			t.Fatalf("the test network does not reach %s without a policy", a)
		}
	}
	e, err := New(netlab.NetnsPath(p.Inside))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	open := policy.Policy{DefaultAction: "allow", Egress: []policy.Rule{{Action: "allow", Target: "10.250.0.0/24"}, {Action: "allow", Target: "0.0.0.0/0"}}}
	c, err := policy.Compile(open, policy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Apply(c); err != nil {
		t.Fatal(err)
	}
	// What the kernel holds: every private range in the deny set.
	els, err := e.conn.GetSetElements(&nftables.Set{Table: &nftables.Table{Family: nftables.TableFamilyINet, Name: TableName}, Name: "deny4"})
	if err != nil {
		t.Fatal(err)
	}
	starts := map[string]bool{}
	for _, el := range els {
		if a, ok := netip.AddrFromSlice(el.Key); ok && !el.IntervalEnd {
			starts[a.String()] = true
		}
	}
	for _, want := range []string{"10.0.0.0", "172.16.0.0", "192.168.0.0", "100.64.0.0", "198.18.0.0"} {
		if !starts[want] {
			t.Errorf("the kernel's deny set has no range starting at %s: %v", want, starts)
		}
	}
	if !netlab.ReachesSoon(p.Inside, "198.51.100.4:8080") {
		t.Error("allow-all does not reach a public address")
	}
	for _, a := range []string{"10.250.0.2:8080", "192.168.77.2:8080", "100.64.7.2:8080"} {
		if netlab.Reaches(p.Inside, a) {
			t.Errorf("allow-all reaches the private address %s", a)
		}
	}
	// The operator allows 10.250.0.0/24 back: that, and nothing else.
	c, err = policy.Compile(open, policy.Options{AllowPrivate: []netip.Prefix{netip.MustParsePrefix("10.250.0.0/24")}})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Apply(c); err != nil {
		t.Fatal(err)
	}
	if !netlab.ReachesSoon(p.Inside, "10.250.0.2:8080") {
		t.Error("a range the operator allowed back is unreachable")
	}
	for _, a := range []string{"192.168.77.2:8080", "100.64.7.2:8080"} {
		if netlab.Reaches(p.Inside, a) {
			t.Errorf("with 10.250.0.0/24 allowed back, %s is reachable", a)
		}
	}
}
