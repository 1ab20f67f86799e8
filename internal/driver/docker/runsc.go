// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package docker

import (
	"context"
	"fmt"
	"slices"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/internal/driver"
)

// Tiers implements driver.Tierer: runc (the engine's runtime, or
// Config.Runtime) always; runsc when the engine has Config.RunscRuntime.
func (d *Driver) Tiers() ([]string, map[string]string) {
	if d.noRunsc != "" {
		return []string{api.IsolationRunc}, map[string]string{api.IsolationRunsc: d.noRunsc}
	}
	return []string{api.IsolationRunc, api.IsolationRunsc}, nil
}

// checkRunsc says why the engine cannot run the runsc tier, "" if it
// can: it needs the runtime, and on a local engine that runtime must use
// the sandbox's network namespace as it is (--network=host).
func (d *Driver) checkRunsc(ctx context.Context) string {
	info, err := d.cli.Info(ctx, client.InfoOptions{})
	if err != nil {
		return "the engine's info: " + err.Error()
	}
	rt, ok := info.Info.Runtimes[d.cfg.RunscRuntime]
	if !ok {
		return fmt.Sprintf(`the engine has no runtime %q (add it to daemon.json's "runtimes", with "runtimeArgs": [%s])`, d.cfg.RunscRuntime, runscArgsJSON)
	}
	if d.cfg.Remote {
		return ""
	}
	return runscArgsProblem(d.cfg.RunscRuntime, rt.Args)
}

// runscArgsJSON is what a local engine's runsc runtime must pass.
const runscArgsJSON = `"--network=host", "--overlay2=none"`

// runscArgsProblem says what a local engine's runsc runtime named name,
// passing args, lacks for the runsc tier ("": nothing).
func runscArgsProblem(name string, args []string) string {
	for _, need := range []struct{ arg, why string }{
		{"--network=host", "gVisor's own network stack would take the sandbox's network namespace, where execd and the egress enforcer reach it"},
		{"--overlay2=none", "gVisor (since 2023) would keep the root's writes in a store of its own, which snapshots would miss"},
	} {
		if !slices.Contains(args, need.arg) {
			return fmt.Sprintf(`the engine's runtime %q does not pass %s (its "runtimeArgs" must have %s): %s`, name, need.arg, runscArgsJSON, need.why)
		}
	}
	return ""
}

// runtimeFor is the engine runtime that runs spec's sandbox ("": the
// engine's default).
func (d *Driver) runtimeFor(spec driver.Spec) string {
	if spec.Isolation == api.IsolationRunsc {
		return d.cfg.RunscRuntime
	}
	return d.cfg.Runtime
}

// runscPids bounds a runsc sandbox's processes at pids. The host pids
// cgroup counts the Sentry's threads and stubs, not the sandbox's
// processes, so it only bounds the whole with room for them
// (driver.RunscHostPids); the sandbox's tasks are bounded by
// RLIMIT_NPROC, which the Sentry keeps per user of the sandbox (nothing
// in it holds CAP_SYS_RESOURCE).
func runscPids(host *container.HostConfig, pids int64) {
	limit := driver.RunscHostPids(pids)
	host.Resources.PidsLimit = &limit
	host.Resources.Ulimits = append(host.Resources.Ulimits, &container.Ulimit{Name: "nproc", Soft: pids, Hard: pids})
}
