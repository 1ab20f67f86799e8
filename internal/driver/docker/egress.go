// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package docker

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/moby/moby/api/types/container"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/internal/driver"
	"github.com/corral-dev/corral/internal/egress/launch"
	"github.com/corral-dev/corral/internal/initproc"
	"github.com/corral-dev/corral/internal/insandbox"
)

// egressMode is how a sandbox's egress is enforced on this engine, chosen
// once per create.
type egressMode uint8

const (
	// noNetwork: no policy on a local engine; the container has loopback
	// only.
	noNetwork egressMode = iota
	// isolatedBridge: no policy on a remote engine; the container is on
	// the engine's bridge (execd is published), and PID 1 closes the
	// namespace to all but execd's port.
	isolatedBridge
	// localEnforcer: a policy on a local engine; an enforcer process on
	// this machine polices the container's namespace from outside.
	localEnforcer
	// sidecarEnforcer: a policy on a remote engine; an enforcer container
	// shares the sandbox's namespace.
	sidecarEnforcer
)

func (m egressMode) policed() bool { return m == localEnforcer || m == sidecarEnforcer }

// egressModeOf picks spec's egress mode on this driver's engine.
func (d *Driver) egressModeOf(spec driver.Spec) egressMode {
	switch {
	case spec.Policed() && d.cfg.Remote:
		return sidecarEnforcer
	case spec.Policed():
		return localEnforcer
	case d.cfg.Remote:
		return isolatedBridge
	}
	return noNetwork
}

// prepareEgress writes a policed sandbox's enforcer directory and, for a
// local enforcer, binds its resolv.conf, CA and start gate into host.
func (d *Driver) prepareEgress(spec driver.Spec, mode egressMode, host *container.HostConfig) error {
	dir := d.egressDir(spec.ID)
	if err := launch.Prepare(dir, launch.Sandbox{ID: spec.ID, Policy: spec.NetworkPolicy, Token: spec.EgressToken, CredentialProxy: spec.CredentialProxy}); err != nil {
		return err
	}
	if mode != localEnforcer {
		return nil
	}
	host.Binds = append(host.Binds, filepath.Join(dir, "resolv.conf")+":/etc/resolv.conf:ro")
	if ca := launch.CAFile(dir); ca != "" {
		host.Binds = append(host.Binds, ca+":"+insandbox.VaultCA+":ro")
	}
	// PID 1 holds the entrypoint back until the network is policed.
	gate := filepath.Join(dir, "gate")
	if err := os.Mkdir(gate, 0o700); err != nil {
		return err
	}
	if err := syscall.Mkfifo(filepath.Join(gate, "start"), 0o600); err != nil {
		return err
	}
	host.Binds = append(host.Binds, gate+":"+gateInSandbox+":ro")
	return nil
}

// startEgress polices a started container: the sidecar on a remote
// engine (PID 1 waits for it), else the enforcer here, after which PID 1
// is handed the entrypoint through the gate.
func (d *Driver) startEgress(ctx context.Context, spec driver.Spec, mode egressMode, containerID string, upstreams []string) error {
	switch mode {
	case sidecarEnforcer:
		return d.startSidecar(ctx, spec.ID, containerID, upstreams)
	case localEnforcer:
	default:
		return nil
	}
	// The container starts with loopback only; its way out appears once
	// the enforcer's rules are in place.
	c, err := d.inspect(ctx, spec.ID)
	if err != nil {
		return err
	}
	if !c.State.Running {
		return d.exitedEarly(ctx, spec.ID, c)
	}
	ns, err := d.nsPath(spec.ID, c)
	if err != nil {
		return err
	}
	if err := d.net.Start(ctx, spec.ID, d.egressDir(spec.ID), ns); err != nil {
		return err
	}
	gateDir := filepath.Join(d.egressDir(spec.ID), "gate")
	st := initproc.Start{Args: spec.Entrypoint}
	if spec.Isolation == api.IsolationRunsc {
		err = initproc.SendStartFile(gateDir, startFile, st)
	} else {
		gate, oerr := os.OpenRoot(gateDir)
		if oerr != nil {
			return oerr
		}
		err = initproc.SendStart(ctx, gate, "start", st)
		gate.Close()
	}
	if err != nil {
		return fmt.Errorf("start the entrypoint of %s: %w", spec.ID, err)
	}
	return nil
}

// gateInSandbox holds the FIFO a policed sandbox's PID 1 waits on (a
// runsc sandbox's: startFile, which it polls for).
const (
	gateInSandbox = insandbox.GateFile
	startFile     = "start.json"
)

// egressDir holds sandbox id's egress enforcer's files ("" without a
// state directory).
func (d *Driver) egressDir(id string) string {
	if d.cfg.StateDir == "" {
		return ""
	}
	return filepath.Join(d.cfg.StateDir, "egress", id)
}

// stopNetwork ends sandbox id's enforcer and removes its files.
func (d *Driver) stopNetwork(ctx context.Context, id string) error {
	dir := d.egressDir(id)
	if dir == "" {
		return nil
	}
	if err := d.net.Stop(ctx, id, dir); err != nil {
		return err
	}
	return os.RemoveAll(dir)
}
