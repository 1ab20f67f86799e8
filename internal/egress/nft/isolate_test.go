// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package nft

import (
	"testing"

	"github.com/corral-dev/corral/internal/driver/netns"
	"github.com/corral-dev/corral/internal/testutil"
)

// An isolated namespace reaches nothing outside, not even by a literal
// address, keeps its loopback, and is reached from outside only on the
// listed ports; isolating it again replaces the rules.
func TestIsolate(t *testing.T) {
	testutil.RequireRoot(t)
	p := testutil.NewNetPair(t)
	testutil.ListenIn(t, p.Outside, "tcp", "10.250.0.2:8080")
	for _, addr := range []string{"0.0.0.0:44772", "0.0.0.0:9000", "127.0.0.1:7000"} {
		testutil.ListenIn(t, p.Inside, "tcp", addr)
	}
	if !testutil.ReachesSoon(p.Inside, "10.250.0.2:8080") || !testutil.ReachesSoon(p.Outside, "10.250.0.1:9000") {
		t.Fatal("the test network does not work before isolation")
	}
	for range 2 {
		if err := netns.Do(testutil.NetnsPath(p.Inside), func() error { return Isolate([]uint16{44772}) }); err != nil {
			t.Fatal(err)
		}
	}
	if testutil.Reaches(p.Inside, "10.250.0.2:8080") {
		t.Error("an isolated namespace reached the outside")
	}
	if !testutil.Reaches(p.Inside, "127.0.0.1:7000") {
		t.Error("an isolated namespace lost its loopback")
	}
	if !testutil.Reaches(p.Outside, "10.250.0.1:44772") {
		t.Error("the listed port is unreachable from outside")
	}
	if testutil.Reaches(p.Outside, "10.250.0.1:9000") {
		t.Error("a port not listed is reachable from outside")
	}
}
