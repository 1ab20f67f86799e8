// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package launch

import (
	"net/netip"
	"path/filepath"
	"testing"

	"github.com/corral-dev/corral/internal/egress"
)

// The enforcer's command line is what corral egress parses, and what
// the server recognises as that sandbox's enforcer (and nobody else's).
func TestEnforcerArgvIsWhatEgressParses(t *testing.T) {
	dir := t.TempDir()
	e := &Enforcers{cfg: Config{Binary: "/usr/bin/corral", Upstreams: []string{"10.0.0.2:53", "10.0.0.3:53"},
		AllowPrivate: []netip.Prefix{netip.MustParsePrefix("10.1.0.0/16")}, UpstreamCA: "/etc/ca.pem"}}
	args := e.enforcerArgv("sb-1", dir, []string{"10.213.0.0/16", "192.0.2.1/32"})
	if args[0] != "/usr/bin/corral" || args[1] != "egress" {
		t.Fatalf("argv %q", args)
	}
	o, err := egress.ParseArgs(args[2:])
	if err != nil {
		t.Fatalf("corral egress refuses %q: %v", args, err)
	}
	want := egress.DefaultOptions()
	want.Netns, want.SandboxID, want.PolicyFile, want.TokenFile = "/proc/self/fd/3", "sb-1", filepath.Join(dir, "policy.json"), filepath.Join(dir, "token")
	want.APIListen, want.APISocket, want.Deny, want.LogLimit = "none", APISocket(dir), "10.213.0.0/16,192.0.2.1/32", LogLimit
	want.Upstreams, want.AllowPrivate = "10.0.0.2:53,10.0.0.3:53", "10.1.0.0/16"
	if o != want {
		t.Fatalf("parsed\n%+v\nwant\n%+v", o, want)
	}
	if !isEnforcer(args, "sb-1", dir) || isEnforcer(args, "sb-2", dir) || isEnforcer(args, "sb-1", t.TempDir()) {
		t.Fatal("isEnforcer does not tell this enforcer from others")
	}
}
