// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package insandbox

import (
	"net"
	"slices"
	"strconv"
	"strings"
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

// The one capability set holds none that would undo the sandbox, and a
// runtime that adds to its copy (docker's NET_ADMIN for PID 1) changes
// no other sandbox's.
func TestCapabilities(t *testing.T) {
	caps := Capabilities()
	for _, c := range caps {
		switch c {
		case "SYS_ADMIN", "NET_ADMIN", "NET_RAW", "MKNOD", "SYS_PTRACE", "SYS_MODULE", "DAC_READ_SEARCH", "SETFCAP", "AUDIT_WRITE", "SYS_RESOURCE":
			t.Errorf("the sandbox set holds %s", c)
		}
		if strings.HasPrefix(c, "CAP_") {
			t.Errorf("%s: names go without the CAP_ prefix", c)
		}
	}
	caps[0] = "SYS_ADMIN"
	_ = append(caps[:1], "NET_ADMIN")
	if again := Capabilities(); again[0] == "SYS_ADMIN" || again[1] == "NET_ADMIN" {
		t.Errorf("a change to one copy reached the next: %q", again)
	}
}

// The entrypoint and execd's commands never see execd's token verifier
// or settings; a value that only mentions them stays.
func TestUserEnvDropsExecdsOwn(t *testing.T) {
	got := UserEnv([]string{"PATH=/bin", "EXECD_ACCESS_TOKEN=sha256:x", "CORRAL_EXECD_STATE=/s", "EXECD_ENVS=/e", "A=EXECD_ACCESS_TOKEN", "EXECD_ACCESS_TOKEN"})
	if !slices.Equal(got, []string{"PATH=/bin", "EXECD_ENVS=/e", "A=EXECD_ACCESS_TOKEN"}) {
		t.Fatalf("user env %q", got)
	}
}
