// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

// Package netlab makes network test worlds for the root tier: two
// namespaces joined by a veth (NetPair), a stand-in host and internet
// (World) with its addresses, listeners, DNS and HTTP servers inside a
// namespace, reachability probes from one, and the CAs the worlds' TLS
// servers use. Only tests import it (internal/archtest checks).
package netlab

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net"
	"os/exec"
	"testing"
	"time"

	"github.com/corral-dev/corral/internal/hostnet/netns"
)

// NetPair is two network namespaces a test made, joined by a veth: the
// "sandbox" at 198.51.100.1/24 and the "outside" holding .2, .3 and .4.
type NetPair struct {
	// Inside and Outside are the namespaces' names (under /var/run/netns).
	Inside, Outside string
}

// NewNetPair makes a NetPair, removed when the test ends (root tier).
func NewNetPair(t testing.TB) NetPair {
	t.Helper()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	id := hex.EncodeToString(b)
	p := NetPair{Inside: "cni-" + id, Outside: "cno-" + id}
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v %s", args, err, out)
		}
	}
	run("netns", "add", p.Inside)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", p.Inside).Run() })
	run("netns", "add", p.Outside)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", p.Outside).Run() })
	run("link", "add", "vi"+id, "type", "veth", "peer", "name", "vo"+id)
	run("link", "set", "vi"+id, "netns", p.Inside)
	run("link", "set", "vo"+id, "netns", p.Outside)
	run("-n", p.Inside, "addr", "add", "198.51.100.1/24", "dev", "vi"+id)
	for _, a := range []string{"198.51.100.2/24", "198.51.100.3/24", "198.51.100.4/24"} {
		run("-n", p.Outside, "addr", "add", a, "dev", "vo"+id)
	}
	for _, ns := range []string{p.Inside, p.Outside} {
		run("-n", ns, "link", "set", "lo", "up")
	}
	run("-n", p.Inside, "link", "set", "vi"+id, "up")
	run("-n", p.Outside, "link", "set", "vo"+id, "up")
	return p
}

// NetnsPath is where ip(8) pins a named namespace.
func NetnsPath(ns string) string { return "/var/run/netns/" + ns }

// ListenIn serves on addr inside ns until the test ends: TCP connections
// are accepted and closed, UDP datagrams echoed.
func ListenIn(t testing.TB, ns, network, addr string) {
	t.Helper()
	err := netns.Do(NetnsPath(ns), func() error {
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

// Reaches reports whether a TCP connection from inside ns gets through
// within 400 ms.
func Reaches(ns, addr string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 400*time.Millisecond)
	defer cancel()
	c, err := netns.Dial(ctx, NetnsPath(ns), addr)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// ReachesSoon reports whether a TCP connection from inside ns gets
// through within 5 s, trying again meanwhile: for what must be reachable
// (a loaded machine can be slow to resolve a neighbour the first time).
// What must stay unreachable is checked with Reaches.
func ReachesSoon(ns, addr string) bool {
	deadline := time.Now().Add(5 * time.Second)
	for {
		if Reaches(ns, addr) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// UDPAnsweredSoon is UDPAnswered tried again for up to 5 s, for what
// must be answered.
func UDPAnsweredSoon(t testing.TB, ns, addr string) bool {
	deadline := time.Now().Add(5 * time.Second)
	for !UDPAnswered(t, ns, addr) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
	return true
}

// UDPAnswered reports whether a UDP datagram sent from inside ns is
// echoed within 400 ms.
func UDPAnswered(t testing.TB, ns, addr string) bool {
	var ok bool
	err := netns.Do(NetnsPath(ns), func() error {
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

// World is a stand-in for a host and the internet, made of two network
// namespaces a test created: Uplink (the "host", where corral's bridge
// and NAT go) reaches World (the "internet") over a veth, with a default
// route to it. World holds the addresses tests serve on, including a
// metadata-style link-local one, so a packet that escapes any policy is
// answered by the test or by nobody — never by the real network.
type World struct {
	Uplink, World string
	// UplinkAddr is the uplink's own address on the veth.
	UplinkAddr string
}

// World addresses.
const (
	WorldWeb      = "203.0.113.10" // the "allowed" web host
	WorldOther    = "203.0.113.20" // a host no rule allows
	WorldDNS      = "203.0.113.53" // the upstream resolver
	WorldMetadata = "169.254.169.254"
)

// NewWorld makes a World, removed when the test ends (root tier).
func NewWorld(t testing.TB) World {
	t.Helper()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	id := hex.EncodeToString(b)
	w := World{Uplink: "cup-" + id, World: "cwd-" + id, UplinkAddr: "192.0.2.1"}
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v %s", args, err, out)
		}
	}
	for _, ns := range []string{w.Uplink, w.World} {
		run("netns", "add", ns)
		t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
		run("-n", ns, "link", "set", "lo", "up")
	}
	run("link", "add", "wu"+id, "type", "veth", "peer", "name", "ww"+id)
	run("link", "set", "wu"+id, "netns", w.Uplink)
	run("link", "set", "ww"+id, "netns", w.World)
	run("-n", w.Uplink, "addr", "add", w.UplinkAddr+"/24", "dev", "wu"+id)
	run("-n", w.World, "addr", "add", "192.0.2.2/24", "dev", "ww"+id)
	run("-n", w.Uplink, "link", "set", "wu"+id, "up")
	run("-n", w.World, "link", "set", "ww"+id, "up")
	run("-n", w.Uplink, "route", "add", "default", "via", "192.0.2.2")
	for _, a := range []string{WorldWeb, WorldOther, WorldDNS} {
		run("-n", w.World, "addr", "add", a+"/32", "dev", "lo")
	}
	run("-n", w.World, "addr", "add", WorldMetadata+"/32", "dev", "lo")
	return w
}
