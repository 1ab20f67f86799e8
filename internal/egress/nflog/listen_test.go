// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package nflog_test

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/corral-dev/corral/internal/egress/nflog"
	"github.com/corral-dev/corral/internal/egress/nft"
	"github.com/corral-dev/corral/internal/egress/policy"
	"github.com/corral-dev/corral/internal/hostnet/netns"
	"github.com/corral-dev/corral/internal/testutil"
	"github.com/corral-dev/corral/internal/testutil/netlab"
)

// Packets the enforcer logs while a reader binds the group (IPv6 router
// solicitations on a fresh link, a sandbox already talking) share the
// socket with the kernel's acknowledgements: binding must still succeed
// and the packets must not be lost.
func TestListenWhilePacketsAreLogged(t *testing.T) {
	testutil.RequireRoot(t)
	p := netlab.NewNetPair(t)
	e, err := nft.New(netlab.NetnsPath(p.Inside))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	c, err := policy.Compile(policy.Policy{DefaultAction: "deny"}, policy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Apply(c); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	wg.Add(1)
	go func() { // a steady stream of denied, logged datagrams
		defer wg.Done()
		_ = netns.Do(netlab.NetnsPath(p.Inside), func() error {
			for ctx.Err() == nil {
				// A new source port each time: only a connection's first
				// packet is logged.
				if c, err := net.Dial("udp", "198.51.100.2:9"); err == nil {
					_, _ = c.Write([]byte("x"))
					c.Close()
				}
			}
			return nil
		})
	}()
	for i := range 40 {
		rd, err := nflog.Listen(netlab.NetnsPath(p.Inside), nft.AuditGroup)
		if err != nil {
			t.Fatalf("listen %d: %v", i, err)
		}
		found := make(chan bool, 1)
		go func() {
			for {
				pk, err := rd.Read()
				if err != nil {
					found <- false
					return
				}
				for _, k := range pk {
					if k.Dst.String() == "198.51.100.2:9" && k.Proto == "udp" && k.Prefix != "" {
						found <- true
						return
					}
				}
			}
		}()
		select {
		case ok := <-found:
			if !ok {
				t.Fatalf("listen %d: read failed", i)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("listen %d: the datagrams were not logged within 5 s", i)
		}
		rd.Close()
	}
}
