// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package dnsproxy

import (
	"bufio"
	"net"
	"net/netip"
	"os"
	"strings"
)

// SystemResolvers are the nameservers of this machine's
// /etc/resolv.conf, as ip:port.
func SystemResolvers() []string {
	f, err := os.Open("/etc/resolv.conf")
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 || fields[0] != "nameserver" {
			continue
		}
		if ip, err := netip.ParseAddr(fields[1]); err == nil {
			out = append(out, net.JoinHostPort(ip.String(), "53"))
		}
	}
	return out
}

// Reachable are the resolvers of rs that a resolver elsewhere (a pod, a
// remote engine's container) can use too: those not on loopback.
func Reachable(rs []string) []string {
	var out []string
	for _, r := range rs {
		if ap, err := netip.ParseAddrPort(r); err == nil && !ap.Addr().IsLoopback() {
			out = append(out, r)
		}
	}
	return out
}
