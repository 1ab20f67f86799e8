// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package nft

import (
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/corral-dev/corral/internal/hostnet/netns"
	"github.com/corral-dev/corral/internal/testutil"
	"github.com/corral-dev/corral/internal/testutil/netlab"
)

// withIPv6 gives both ends of p an IPv6 address: inside fd00:250::1,
// outside fd00:250::2.
func withIPv6(t *testing.T, p netlab.NetPair) {
	t.Helper()
	for ns, addr := range map[string]string{p.Inside: "fd00:250::1/64", p.Outside: "fd00:250::2/64"} {
		out, err := exec.Command("ip", "-n", ns, "-o", "link", "show", "type", "veth").Output()
		f := strings.Fields(string(out))
		if err != nil || len(f) < 2 {
			t.Fatalf("the veth of %s: %v %q", ns, err, out)
		}
		dev, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
		if out, err := exec.Command("ip", "-n", ns, "addr", "add", addr, "dev", dev, "nodad").CombinedOutput(); err != nil {
			t.Fatalf("%v %s", err, out)
		}
	}
}

// An isolated namespace reaches nothing outside, not even by a literal
// address, over IPv4 or IPv6, keeps its loopback, and is reached from
// outside only on the listed ports; isolating it again replaces the
// rules.
func TestIsolate(t *testing.T) {
	testutil.RequireRoot(t)
	p := netlab.NewNetPair(t)
	withIPv6(t, p)
	for _, addr := range []string{"198.51.100.2:8080", "[fd00:250::2]:8080"} {
		netlab.ListenIn(t, p.Outside, "tcp", addr)
	}
	for _, addr := range []string{"[::]:44772", "[::]:9000", "127.0.0.1:7000"} {
		netlab.ListenIn(t, p.Inside, "tcp", addr)
	}
	for ns, addr := range map[string]string{p.Inside: "198.51.100.2:8080", p.Outside: "198.51.100.1:9000"} {
		if !netlab.ReachesSoon(ns, addr) {
			t.Fatalf("the test network does not work before isolation: %s from %s", addr, ns)
		}
	}
	for range 2 {
		if err := netns.Do(netlab.NetnsPath(p.Inside), func() error { return Isolate([]uint16{44772}) }); err != nil {
			t.Fatal(err)
		}
	}
	for _, addr := range []string{"198.51.100.2:8080", "[fd00:250::2]:8080"} {
		if netlab.Reaches(p.Inside, addr) {
			t.Errorf("an isolated namespace reached %s", addr)
		}
	}
	if !netlab.Reaches(p.Inside, "127.0.0.1:7000") {
		t.Error("an isolated namespace lost its loopback")
	}
	for _, addr := range []string{"198.51.100.1:44772", "[fd00:250::1]:44772"} {
		if !netlab.Reaches(p.Outside, addr) {
			t.Errorf("the listed port is unreachable from outside: %s", addr)
		}
	}
	for _, addr := range []string{"198.51.100.1:9000", "[fd00:250::1]:9000"} {
		if netlab.Reaches(p.Outside, addr) {
			t.Errorf("a port not listed is reachable from outside: %s", addr)
		}
	}
}

// IsolateOutbound (a pod without a policy): nothing leaves but answers,
// and every TCP port can be reached from outside.
func TestIsolateOutbound(t *testing.T) {
	testutil.RequireRoot(t)
	p := netlab.NewNetPair(t)
	netlab.ListenIn(t, p.Outside, "tcp", "198.51.100.2:8080")
	netlab.ListenIn(t, p.Outside, "udp", "198.51.100.2:53")
	for _, addr := range []string{"[::]:44772", "[::]:9000"} {
		netlab.ListenIn(t, p.Inside, "tcp", addr)
	}
	if !netlab.ReachesSoon(p.Inside, "198.51.100.2:8080") {
		t.Fatal("the test network does not work before isolation")
	}
	if err := netns.Do(netlab.NetnsPath(p.Inside), IsolateOutbound); err != nil {
		t.Fatal(err)
	}
	if netlab.Reaches(p.Inside, "198.51.100.2:8080") || netlab.UDPAnswered(t, p.Inside, "198.51.100.2:53") {
		t.Error("a namespace isolated outbound reached outside")
	}
	for _, addr := range []string{"198.51.100.1:44772", "198.51.100.1:9000"} {
		if !netlab.Reaches(p.Outside, addr) {
			t.Errorf("inbound %s is blocked", addr)
		}
	}
}

// RestrictInbound closes the way in but the listed ports, and leaves the
// way out alone.
func TestRestrictInbound(t *testing.T) {
	testutil.RequireRoot(t)
	p := netlab.NewNetPair(t)
	netlab.ListenIn(t, p.Outside, "tcp", "198.51.100.2:8080")
	for _, addr := range []string{"0.0.0.0:18080", "0.0.0.0:9000"} {
		netlab.ListenIn(t, p.Inside, "tcp", addr)
	}
	if !netlab.ReachesSoon(p.Outside, "198.51.100.1:9000") {
		t.Fatal("the test network does not work")
	}
	if err := netns.Do(netlab.NetnsPath(p.Inside), func() error { return RestrictInbound([]uint16{18080}) }); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond)
	if netlab.Reaches(p.Outside, "198.51.100.1:9000") {
		t.Error("a port not listed is reachable from outside")
	}
	if !netlab.Reaches(p.Outside, "198.51.100.1:18080") {
		t.Error("the listed port is unreachable")
	}
	if !netlab.Reaches(p.Inside, "198.51.100.2:8080") {
		t.Error("the way out was closed")
	}
}
