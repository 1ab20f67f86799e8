// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package launch

import (
	"bufio"
	"net"
	"net/netip"
	"os"
	"strings"
)

// SystemResolvers are the nameservers of this machine's
// /etc/resolv.conf, as ip:port; without loopback, only those a resolver
// elsewhere (a pod, a remote engine's container) can use too.
func SystemResolvers(loopback bool) []string {
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
		if ip, err := netip.ParseAddr(fields[1]); err == nil && (loopback || !ip.IsLoopback()) {
			out = append(out, net.JoinHostPort(ip.String(), "53"))
		}
	}
	return out
}
