// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package uplink_test

import (
	"net/netip"
	"os/exec"
	"testing"

	"github.com/corral-dev/corral/internal/hostnet/uplink"
	"github.com/corral-dev/corral/internal/testutil"
	"github.com/corral-dev/corral/internal/testutil/netlab"
)

// sandboxNetns makes a bare namespace standing in for a sandbox's.
func sandboxNetns(t *testing.T, name string) string {
	t.Helper()
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", name).Run() })
	_ = exec.Command("ip", "-n", name, "link", "set", "lo", "up").Run()
	return name
}

func TestAttachRoutesOutAndNowhereElse(t *testing.T) {
	testutil.RequireRoot(t)
	w := netlab.NewWorld(t)
	netlab.ListenIn(t, w.World, "tcp", netlab.WorldWeb+":80")
	netlab.ListenIn(t, w.World, "tcp", netlab.WorldMetadata+":80")
	netlab.ListenIn(t, w.Uplink, "tcp", "0.0.0.0:7000")
	// The world is reachable from the uplink: a failure below is the
	// uplink's doing, not a broken test network.
	if !netlab.ReachesSoon(w.Uplink, netlab.WorldWeb+":80") || !netlab.ReachesSoon(w.Uplink, netlab.WorldMetadata+":80") {
		t.Fatal("the test world is not reachable from its uplink")
	}

	cfg := uplink.Config{Netns: netlab.NetnsPath(w.Uplink), Subnet: netip.MustParsePrefix("10.213.0.0/24")}
	u, err := uplink.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	// Opening again (a server restart) is harmless.
	u2, err := uplink.Open(cfg)
	if err != nil {
		t.Fatalf("second open: %v", err)
	}
	u2.Close()

	a := sandboxNetns(t, "csa-"+w.World[4:])
	b := sandboxNetns(t, "csb-"+w.World[4:])
	addrA, err := u.Attach("aaaaaaaa-1111-2222-3333-444444444444", netlab.NetnsPath(a))
	if err != nil {
		t.Fatal(err)
	}
	addrB, err := u.Attach("bbbbbbbb-1111-2222-3333-444444444444", netlab.NetnsPath(b))
	if err != nil {
		t.Fatal(err)
	}
	if addrA == addrB || !u.Subnet().Contains(addrA) || addrA == u.Gateway() {
		t.Fatalf("addresses %s %s (gateway %s)", addrA, addrB, u.Gateway())
	}
	netlab.ListenIn(t, b, "tcp", "0.0.0.0:7001")

	if !netlab.ReachesSoon(a, netlab.WorldWeb+":80") {
		t.Error("a sandbox cannot reach the world through the uplink")
	}
	for _, target := range []string{w.UplinkAddr + ":7000", u.Gateway().String() + ":7000", addrB.String() + ":7001"} {
		if netlab.Reaches(a, target) {
			t.Errorf("a sandbox reached %s over the bridge", target)
		}
	}
	hosts, err := u.HostPrefixes()
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	for _, p := range hosts {
		found[p.String()] = true
	}
	if !found[w.UplinkAddr+"/32"] || !found[u.Gateway().String()+"/32"] {
		t.Errorf("host prefixes %v lack the uplink's addresses", hosts)
	}

	// A neighbour that routes the subnet through the uplink reaches no
	// sandbox.
	if out, err := exec.Command("ip", "-n", w.World, "route", "add", u.Subnet().String(), "via", w.UplinkAddr).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	if netlab.Reaches(w.World, addrB.String()+":7001") {
		t.Error("the world reached a sandbox through the uplink")
	}
	if !netlab.ReachesSoon(a, netlab.WorldWeb+":80") {
		t.Error("the answers to a sandbox's own connections no longer come back")
	}
	if err := u.Detach("aaaaaaaa-1111-2222-3333-444444444444", addrA); err != nil {
		t.Fatal(err)
	}
	if u.HasLink("aaaaaaaa-1111-2222-3333-444444444444") || netlab.Reaches(a, netlab.WorldWeb+":80") {
		t.Error("detached sandbox still linked")
	}
	if err := u.Detach("aaaaaaaa-1111-2222-3333-444444444444", addrA); err != nil {
		t.Errorf("second detach: %v", err)
	}
	// The freed address is handed out again eventually, never twice.
	if err := u.Reserve("cccccccc", addrB); err == nil {
		t.Error("an address held by another sandbox was reserved")
	}
}
