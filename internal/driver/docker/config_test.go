// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package docker

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/internal/driver"
	"github.com/corral-dev/corral/internal/insandbox"
	"github.com/corral-dev/corral/internal/testutil/golden"
)

// What the engine is asked for, per kind of sandbox, is pinned by a file
// in testdata: capabilities, security options, network mode, limits,
// binds, PID 1's command line. A change shows as a diff of those files in
// review. Needs neither root nor an engine.
func TestContainerConfigGolden(t *testing.T) {
	base := func() driver.Spec {
		return driver.Spec{
			ID: "sb-1", Tenant: "acme", Image: driver.Image{URI: "python:3.12"},
			Entrypoint: []string{"python3", "-m", "http.server"},
			Env:        map[string]string{"GREETING": "hello", "LANG": "C.UTF-8"},
			Labels:     map[string]string{"project": "golden"},
			ExecdToken: "execd-token", EgressToken: "egress-token",
			Resources:  driver.Resources{CPUMillis: 500, MemoryBytes: 512 << 20, DiskBytes: 1 << 30},
			SecretsDir: "/var/lib/corral/secrets/sb-1",
		}
	}
	policy := json.RawMessage(`{"defaultAction":"deny","egress":[{"action":"allow","target":"pypi.org"}]}`)
	for _, c := range []struct {
		name   string
		remote bool
		spec   func(s *driver.Spec)
	}{
		{name: "local", spec: func(*driver.Spec) {}},
		{name: "local-policed", spec: func(s *driver.Spec) { s.NetworkPolicy, s.CredentialProxy = policy, true }},
		{name: "local-runsc-policed", spec: func(s *driver.Spec) { s.NetworkPolicy, s.Isolation = policy, api.IsolationRunsc }},
		{name: "remote", remote: true, spec: func(*driver.Spec) {}},
		{name: "remote-policed", remote: true, spec: func(s *driver.Spec) { s.NetworkPolicy = policy }},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := &Driver{cfg: Config{Remote: c.remote, PublishIP: "127.0.0.1", ReadyTimeout: 20 * time.Second,
				CorralBinary: "/usr/local/bin/corral", ServerID: "server-1", RunscRuntime: "runsc"}}
			s := base()
			c.spec(&s)
			cfg, host := d.containerConfig(s, "sha256:0123", "app", d.egressModeOf(s), false)
			if !slices.Equal(host.CapDrop, []string{"ALL"}) || !slices.Contains(host.SecurityOpt, "no-new-privileges") || host.Privileged {
				t.Errorf("cap drop %q, security options %q, privileged %v", host.CapDrop, host.SecurityOpt, host.Privileged)
			}
			for _, cp := range host.CapAdd {
				if !slices.Contains(insandbox.Capabilities(), cp) && !(cp == "NET_ADMIN" && c.name == "remote") {
					t.Errorf("capability %s beyond the sandbox set", cp)
				}
			}
			if host.NetworkMode == "host" || host.PidMode != "" || host.IpcMode != "" || host.UsernsMode != "" {
				t.Errorf("shares a host namespace: network %q, pid %q, ipc %q, userns %q", host.NetworkMode, host.PidMode, host.IpcMode, host.UsernsMode)
			}
			golden.JSON(t, "container-"+c.name, struct {
				Config any `json:"config"`
				Host   any `json:"hostConfig"`
			}{cfg, host})
		})
	}
}
