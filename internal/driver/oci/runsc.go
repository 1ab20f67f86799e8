// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package oci

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	runc "github.com/containerd/go-runc"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/internal/driver"
	"github.com/corral-dev/corral/internal/safefile"
)

// The runsc tier runs a sandbox under gVisor (docs/isolation.md): the
// same bundle, driven through runsc's runc-compatible command line, with
// what runsc does differently:
//
//   - the root overlay is mounted by the server (runsc serves "/" from a
//     directory, and knows no overlay mount);
//   - host networking in the sandbox's own network namespace
//     (--network=host), so the egress enforcer's rules there, and the
//     server's dials into it, see the Sentry's sockets;
//   - runsc passes no descriptors but stdio: PID 1 writes its exit code
//     into the sandbox's own root (read back as hostile input), and the
//     server polls execd for readiness;
//   - the request's pids bound the sandbox's tasks through RLIMIT_NPROC,
//     which the Sentry keeps; the host pids cgroup gets room for the
//     Sentry's own threads;
//   - pause is runsc's (the Sentry stops its tasks), not the freezer.
//
// No user namespace: gVisor's kernel is the boundary. The Sentry and the
// gofer run as host root, confined by gVisor's own seccomp filters and
// namespaces.

// runscArgs are runsc's global flags for every command.
var runscArgs = []string{"--network=host"}

// runscExit is where PID 1 of a runsc sandbox writes its exit code, in
// the sandbox's root.
const runscExit = "/.corral-exit"

// newRunsc finds the runsc binary (cfg.Runsc, else runsc on PATH) and
// returns its client, or nil and why the tier is not offered.
func newRunsc(cfg Config, run string) (*runc.Runc, string) {
	bin := cfg.Runsc
	if bin == "" {
		bin = "runsc"
	}
	path, err := exec.LookPath(bin)
	if err != nil {
		return nil, fmt.Sprintf("gVisor's runsc is not installed (on Debian: apt-get install runsc): %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, path, "--version").CombinedOutput(); err != nil {
		return nil, fmt.Sprintf("%s --version failed: %v %s", path, err, out)
	}
	return &runc.Runc{Command: path, Root: filepath.Join(run, "runsc"), ExtraArgs: runscArgs}, ""
}

// Tiers implements driver.Tierer: runc (with or without user
// namespaces, as the server says), and runsc where it is installed.
func (d *Driver) Tiers() ([]string, map[string]string) {
	if d.runsc == nil {
		return []string{api.IsolationRunc}, map[string]string{api.IsolationRunsc: d.noRunsc}
	}
	return []string{api.IsolationRunc, api.IsolationRunsc}, nil
}

// rt is the runtime of sandbox id.
func (d *Driver) rt(id string) *runc.Runc {
	if d.runsc != nil && d.isRunsc(id) {
		return d.runsc
	}
	return d.runc
}

// rtOf is the runtime of the sandbox meta describes (runc without one).
func (d *Driver) rtOf(meta *bundleMeta) *runc.Runc {
	if meta != nil && meta.Isolation == api.IsolationRunsc && d.runsc != nil {
		return d.runsc
	}
	return d.runc
}

// isRunsc reports whether sandbox id runs under gVisor: what the driver
// tracks of it, else its bundle.
func (d *Driver) isRunsc(id string) bool {
	d.mu.Lock()
	sb := d.live[id]
	d.mu.Unlock()
	if sb != nil {
		return sb.runsc
	}
	return bundleRunsc(d.bundleDir(id))
}

// bundleRunsc reports whether the bundle's sandbox runs under gVisor.
func bundleRunsc(bundle string) bool {
	meta, _ := readMeta(bundle)
	return meta != nil && meta.Isolation == api.IsolationRunsc
}

// runscExitCode reads the exit code PID 1 of a runsc sandbox wrote in its
// root (mounted at rootfs while the sandbox exists): anything in the
// sandbox could have written it, so it is read as hostile input.
func runscExitCode(rootfs string) (int, time.Time, bool) {
	b, fi, err := safefile.ReadFile(rootfs, runscExit[1:], 32)
	if err != nil {
		return 0, time.Time{}, false
	}
	n, ok := parseExitCode(b)
	return n, fi.ModTime().UTC(), ok
}

// waitRunscReady polls execd inside the sandbox's network namespace
// until it answers, the Sentry exits, or the ready timeout passes.
func (d *Driver) waitRunscReady(ctx context.Context, netns string, pid int, start uint64) error {
	ctx, cancel := context.WithTimeout(ctx, d.cfg.ReadyTimeout)
	defer cancel()
	return d.pollExecd(ctx, netns, pid, start, time.Millisecond, 20*time.Millisecond)
}

// setPaused freezes or thaws sandbox id for a snapshot: the cgroup
// freezer for runc, runsc's own pause for gVisor (whose Sentry the
// freezer would stop mid-trace).
func (d *Driver) setPaused(ctx context.Context, id string, pause bool) error {
	if !d.isRunsc(id) {
		return setFrozen(ctx, id, pause)
	}
	if pause {
		return d.runsc.Pause(ctx, id)
	}
	return d.runsc.Resume(ctx, id)
}

// paused reports whether sandbox id is paused.
func (d *Driver) paused(ctx context.Context, id string) (bool, error) {
	if !d.isRunsc(id) {
		return frozen(id)
	}
	c, err := d.state(ctx, id)
	if err != nil {
		return false, err
	}
	return c.Status == "paused", nil
}

// startRunsc runs the bundle under gVisor and waits until execd answers,
// then tracks the sandbox and returns its handle. runsc passes stdio
// only: the console is the one descriptor the sandbox gets.
func (d *Driver) startRunsc(ctx context.Context, b *build) (*driver.Handle, error) {
	console, err := os.OpenFile(filepath.Join(b.disk, consoleFile), os.O_CREATE|os.O_RDWR|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	defer console.Close()
	pidFile := filepath.Join(b.bundle, "init.pid")
	opts := &runc.CreateOpts{IO: fileIO{console}, PidFile: pidFile, Detach: true}
	if _, err := d.runsc.Run(ctx, b.spec.ID, b.bundle, opts); err != nil {
		return nil, d.startError(b.bundle, b.disk, fmt.Errorf("runsc run: %w", err))
	}
	b.mark("runsc")
	// The Sentry's pid: it exits with the sandbox.
	pid, start, err := d.started(b, pidFile)
	if err != nil {
		return nil, err
	}
	if err := d.waitRunscReady(ctx, b.netns, pid, start); err != nil {
		return nil, d.startError(b.bundle, b.disk, err)
	}
	return d.ready(b, handleState{Bundle: b.bundle, Pid: pid, StartTime: start, Runsc: true}), nil
}
