// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package insandbox

import (
	"net"
	"strconv"
	"testing"
)

func TestListenAddressesUseThePorts(t *testing.T) {
	for addr, port := range map[string]int{ExecdListen: ExecdPort, EgressListen: EgressPort, EgressLoopback: EgressPort, VaultProxyListen: VaultProxyPort} {
		_, p, err := net.SplitHostPort(addr)
		if err != nil || p != strconv.Itoa(port) {
			t.Errorf("%s: port %q, want %d (%v)", addr, p, port, err)
		}
	}
}
