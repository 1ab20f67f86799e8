// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package nft

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net"
	"net/netip"
	"os/exec"
	"testing"
	"time"

	"github.com/corral-dev/corral/internal/driver/netns"
	"github.com/corral-dev/corral/internal/egress/policy"
	"github.com/corral-dev/corral/internal/testutil"
)

func TestRanges(t *testing.T) {
	c, err := policy.Compile(policy.Policy{DefaultAction: "deny", Egress: []policy.Rule{
		{Action: "allow", Target: "10.1.2.3"},
		{Action: "deny", Target: "10.1.0.0/16"},
		{Action: "allow", Target: "10.0.0.0/8"},
		{Action: "allow", Target: "example.com"},
		{Action: "allow", Target: "2001:db8::/64"},
	}}, policy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	allow, deny := ranges(c, nil)
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
	for ip, want := range map[string]bool{"10.1.0.1": true, "10.1.2.3": false, "169.254.169.254": true, "10.3.0.1": false} {
		if inDeny(ip) != want {
			t.Errorf("%s denied = %v, want %v", ip, !want, want)
		}
	}
	if len(allow[1]) != 1 || allow[1][0].hi.String() != "2001:db8::ffff:ffff:ffff:ffff" {
		t.Errorf("allowed v6 = %v", allow[1])
	}
}

// pair is two network namespaces the test made, joined by a veth: the
// "sandbox" at 10.250.0.1 and the "outside" holding .2, .3 and .4.
type pair struct{ inside, outside string }

func newPair(t *testing.T) pair {
	t.Helper()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	id := hex.EncodeToString(b)
	p := pair{inside: "cni-" + id, outside: "cno-" + id}
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v %s", args, err, out)
		}
	}
	run("netns", "add", p.inside)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", p.inside).Run() })
	run("netns", "add", p.outside)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", p.outside).Run() })
	run("link", "add", "vi"+id, "type", "veth", "peer", "name", "vo"+id)
	run("link", "set", "vi"+id, "netns", p.inside)
	run("link", "set", "vo"+id, "netns", p.outside)
	run("-n", p.inside, "addr", "add", "10.250.0.1/24", "dev", "vi"+id)
	for _, a := range []string{"10.250.0.2/24", "10.250.0.3/24", "10.250.0.4/24"} {
		run("-n", p.outside, "addr", "add", a, "dev", "vo"+id)
	}
	for _, ns := range []string{p.inside, p.outside} {
		run("-n", ns, "link", "set", "lo", "up")
	}
	run("-n", p.inside, "link", "set", "vi"+id, "up")
	run("-n", p.outside, "link", "set", "vo"+id, "up")
	return p
}

func path(ns string) string { return "/var/run/netns/" + ns }

// listen serves TCP on addr inside ns, accepting and closing.
func listen(t *testing.T, ns, network, addr string) {
	t.Helper()
	err := netns.Do(path(ns), func() error {
		if network == "udp" {
			pc, err := net.ListenPacket("udp", addr)
			if err != nil {
				return err
			}
			t.Cleanup(func() { pc.Close() })
			go func() {
				buf := make([]byte, 512)
				for {
					n, from, err := pc.ReadFrom(buf)
					if err != nil {
						return
					}
					_, _ = pc.WriteTo(buf[:n], from)
				}
			}()
			return nil
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return err
		}
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// reaches reports whether a TCP connection from inside ns gets through.
func reaches(ns, addr string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 400*time.Millisecond)
	defer cancel()
	c, err := netns.Dial(ctx, path(ns), addr)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// udpAnswered reports whether a UDP datagram from inside ns is echoed.
func udpAnswered(t *testing.T, ns, addr string) bool {
	var ok bool
	err := netns.Do(path(ns), func() error {
		c, err := net.Dial("udp", addr)
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(400 * time.Millisecond))
		if _, err := c.Write([]byte("q")); err != nil {
			return nil
		}
		b := make([]byte, 8)
		_, err = c.Read(b)
		ok = err == nil
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

func TestEnforcement(t *testing.T) {
	testutil.RequireRoot(t)
	p := newPair(t)
	for _, a := range []string{"10.250.0.2:8080", "10.250.0.3:8080", "10.250.0.4:8080"} {
		listen(t, p.outside, "tcp", a)
	}
	listen(t, p.outside, "udp", "10.250.0.2:53")
	listen(t, p.outside, "udp", "10.250.0.2:5353")
	if !reaches(p.inside, "10.250.0.4:8080") {
		t.Fatal("the test network does not work without a policy")
	}
	e, err := New(path(p.inside))
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
		{Action: "allow", Target: "10.250.0.2"}, {Action: "deny", Target: "10.250.0.3"}, {Action: "allow", Target: "*.example.com"},
	}})
	if err := e.Apply(pol, nil); err != nil {
		t.Fatal(err)
	}
	if !reaches(p.inside, "10.250.0.2:8080") {
		t.Error("an allowed address is unreachable")
	}
	if reaches(p.inside, "10.250.0.4:8080") {
		t.Error("an address no rule allows is reachable")
	}
	if udpAnswered(t, p.inside, "10.250.0.2:53") {
		t.Error("DNS to a resolver other than the proxy got through")
	}
	if !udpAnswered(t, p.inside, "10.250.0.2:5353") {
		t.Error("UDP to an allowed address was dropped")
	}
	// What the DNS proxy resolves for an allowed name becomes reachable;
	// a denied address stays denied even then.
	if err := e.AllowResolved("api.example.com", []netip.Addr{netip.MustParseAddr("10.250.0.4"), netip.MustParseAddr("10.250.0.3")}, time.Minute); err != nil {
		t.Fatal(err)
	}
	if !reaches(p.inside, "10.250.0.4:8080") {
		t.Error("a resolved address is unreachable")
	}
	if reaches(p.inside, "10.250.0.3:8080") {
		t.Error("a resolved address opened an explicitly denied one")
	}
	// Refreshing a resolved address works (its timeout is renewed).
	if err := e.AllowResolved("api.example.com", []netip.Addr{netip.MustParseAddr("10.250.0.4")}, time.Minute); err != nil {
		t.Fatal(err)
	}
	// A new policy keeps resolved addresses of names it still allows...
	if err := e.Apply(compile(policy.Policy{DefaultAction: "deny", Egress: []policy.Rule{{Action: "allow", Target: "api.example.com"}}}), nil); err != nil {
		t.Fatal(err)
	}
	if !reaches(p.inside, "10.250.0.4:8080") || reaches(p.inside, "10.250.0.2:8080") {
		t.Error("after a policy change: resolved address lost, or a removed rule still applies")
	}
	// ...and drops those of names it no longer allows.
	if err := e.Apply(compile(policy.Policy{DefaultAction: "deny"}), nil); err != nil {
		t.Fatal(err)
	}
	if reaches(p.inside, "10.250.0.4:8080") {
		t.Error("a resolved address outlived its name's rule")
	}
	// Allow-all still keeps the always-deny set and the extra denials.
	if err := e.Apply(compile(policy.Policy{DefaultAction: "allow"}), []netip.Prefix{netip.MustParsePrefix("10.250.0.3/32")}); err != nil {
		t.Fatal(err)
	}
	if !reaches(p.inside, "10.250.0.4:8080") || reaches(p.inside, "10.250.0.3:8080") {
		t.Error("allow-all: ordinary address blocked, or an always-denied one reachable")
	}
	// Loopback inside the sandbox is never affected.
	listen(t, p.inside, "tcp", "127.0.0.1:9090")
	if err := e.Apply(compile(policy.Policy{DefaultAction: "deny"}), nil); err != nil {
		t.Fatal(err)
	}
	if !reaches(p.inside, "127.0.0.1:9090") {
		t.Error("loopback was blocked")
	}
}
