// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package nft

import (
	"context"
	"net"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/corral-dev/corral/internal/egress/policy"
	"github.com/corral-dev/corral/internal/hostnet/netns"
	"github.com/corral-dev/corral/internal/testutil"
	"github.com/corral-dev/corral/internal/testutil/netlab"
)

// dialMarked connects from inside ns with socket mark m (0: none).
func dialMarked(t *testing.T, ns, addr string, m int) bool {
	t.Helper()
	var ok bool
	err := netns.Do(netlab.NetnsPath(ns), func() error {
		d := net.Dialer{Timeout: 400 * time.Millisecond, Control: func(_, _ string, c syscall.RawConn) error {
			var serr error
			if m != 0 {
				_ = c.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_MARK, m) })
			}
			return serr
		}}
		c, err := d.DialContext(context.Background(), "tcp", addr)
		if err == nil {
			ok = true
			c.Close()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// An enforcer inside the namespace it confines (a pod's sidecar) lets its
// own marked connections out — DNS to the upstream included — and
// nothing else; another mark is not the exemption.
func TestExemptMark(t *testing.T) {
	testutil.RequireRoot(t)
	p := netlab.NewNetPair(t)
	netlab.ListenIn(t, p.Outside, "tcp", "198.51.100.2:8080")
	netlab.ListenIn(t, p.Outside, "tcp", "198.51.100.2:53")
	if !netlab.ReachesSoon(p.Inside, "198.51.100.2:8080") {
		t.Fatal("the test network does not work without a policy")
	}
	e, err := New(netlab.NetnsPath(p.Inside))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	const mark = 0x6372
	e.Exempt(mark)
	c, err := policy.Compile(policy.Policy{DefaultAction: "deny"}, policy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Apply(c); err != nil {
		t.Fatal(err)
	}
	for _, addr := range []string{"198.51.100.2:8080", "198.51.100.2:53"} {
		if !dialMarked(t, p.Inside, addr, mark) {
			t.Errorf("a connection with the exempt mark to %s was dropped", addr)
		}
		if dialMarked(t, p.Inside, addr, 0) {
			t.Errorf("an unmarked connection to %s got through a deny-all policy", addr)
		}
		if dialMarked(t, p.Inside, addr, mark+1) {
			t.Errorf("a connection with another mark to %s got through", addr)
		}
	}
}
