// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package docker

import (
	"encoding/json"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/internal/driver"
	"github.com/corral-dev/corral/internal/egress"
	"github.com/corral-dev/corral/internal/initproc"
	"github.com/corral-dev/corral/internal/insandbox"
)

// What the driver asks of PID 1, in each of its modes, is what corral
// init parses.
func TestInitCommandIsWhatInitParses(t *testing.T) {
	spec := driver.Spec{ID: "s1", Entrypoint: []string{"sleep", "--", "inf"}, ExecdToken: "tok",
		NetworkPolicy: json.RawMessage(`{"defaultAction":"deny"}`), CredentialProxy: true}
	for _, tc := range []struct {
		name          string
		remote, gated bool
		tier          string
		check         func(o initproc.Options) bool
	}{
		{"local", false, false, "", func(o initproc.Options) bool {
			return slices.Equal(o.Entrypoint, spec.Entrypoint) && o.WaitStart == "" && o.IsolateNetwork == ""
		}},
		{"local, policed", false, true, "", func(o initproc.Options) bool { return len(o.Entrypoint) == 0 && o.WaitStart == gateInSandbox+"/start" }},
		{"local, policed, runsc", false, true, api.IsolationRunsc, func(o initproc.Options) bool {
			return len(o.Entrypoint) == 0 && o.WaitStart == "" && o.WaitStartFile == gateInSandbox+"/"+startFile
		}},
		{"remote", true, false, "", func(o initproc.Options) bool {
			return slices.Equal(o.Entrypoint, spec.Entrypoint) && o.IsolateNetwork == strconv.Itoa(insandbox.ExecdPort)
		}},
		{"remote, policed", true, true, "", func(o initproc.Options) bool {
			return slices.Equal(o.Entrypoint, spec.Entrypoint) && o.WaitURL == waitURL && o.WaitTimeout == 50*time.Second && o.IsolateNetwork == ""
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &Driver{cfg: Config{Remote: tc.remote, ReadyTimeout: 20 * time.Second, CorralBinary: "/usr/bin/corral"}}
			sp := spec
			sp.Isolation = tc.tier
			if !tc.gated {
				sp.NetworkPolicy = nil
			}
			mode := d.egressModeOf(sp)
			if mode.policed() != tc.gated {
				t.Fatalf("mode %d for a policy %v", mode, tc.gated)
			}
			cfg, _ := d.containerConfig(sp, "img", "app", mode, false)
			args := append(slices.Clone(cfg.Entrypoint), cfg.Cmd...)
			if args[0] != insandbox.Binary || args[1] != "init" {
				t.Fatalf("argv %q", args)
			}
			o, err := initproc.ParseArgs(args[2:])
			if err != nil {
				t.Fatalf("corral init refuses %q: %v", args, err)
			}
			if o.User != "app" || (o.TrustCA == insandbox.VaultCA) != tc.gated || o.ExecdStateDir != insandbox.ExecdStateDir || !tc.check(o) {
				t.Fatalf("argv %q parses to %+v", args, o)
			}
		})
	}
}

// The egress sidecar's command line is what corral egress parses.
func TestSidecarArgvIsWhatEgressParses(t *testing.T) {
	d := &Driver{}
	for _, vault := range []bool{false, true} {
		args := d.sidecarArgv("s1", []string{"10.0.0.2:53"}, []string{"10.0.0.0/8"}, vault)
		if args[0] != sidecarBinary || args[1] != "egress" {
			t.Fatalf("argv %q", args)
		}
		o, err := egress.ParseArgs(args[2:])
		if err != nil {
			t.Fatalf("corral egress refuses %q: %v", args, err)
		}
		if o.Netns != "self" || o.SandboxID != "s1" || o.Inbound != strconv.Itoa(insandbox.ExecdPort)+","+strconv.Itoa(insandbox.EgressPort) ||
			o.APIListen != insandbox.EgressListen || o.APITLSCert == "" || o.Upstreams != "10.0.0.2:53" || o.Deny != "10.0.0.0/8" ||
			(o.VaultDir != "") != vault || o.ExemptMark != "0x6372" {
			t.Fatalf("vault=%v: parsed %+v", vault, o)
		}
	}
}
