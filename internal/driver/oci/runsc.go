// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package oci

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	runc "github.com/containerd/go-runc"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/internal/driver"
	"github.com/corral-dev/corral/internal/insandbox"
	"github.com/corral-dev/corral/internal/procfs"
	"github.com/corral-dev/corral/internal/runscversion"
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

// runscArgs are runsc's global flags for every command:
//
//   - --network=host: the Sentry's sockets are host sockets in the
//     sandbox's own network namespace (docs/isolation.md);
//   - --overlay2=none: the root's writes go through the gofer to the
//     host directory. gVisor's default since 2023, root:self, keeps them
//     in a file store of the sandbox's own, where the server would not
//     find PID 1's exit file and snapshots and forks (which copy the
//     host's writable layer) would miss them. Debian's 2022 runsc has
//     no overlay by default and takes the flag too.
var runscArgs = []string{"--network=host", "--overlay2=none"}

// runscGoferNetns is added to runscArgs for a runsc that has the flag
// (gVisor of 2026; not Debian's): each gofer gets an empty network
// namespace of its own, as older runsc gave it. Its default, "null",
// shares one that it pins by a bind mount in runsc's --root, which would
// stay mounted in the data directory after the last sandbox.
const runscGoferNetns = "--gofer-network-namespace=new"

// runscExit is where PID 1 of a runsc sandbox writes its exit code, in
// the sandbox's root, when the runsc cannot pass it the exit pipe
// (Debian's of 2022 has no --pass-fd).
const runscExit = insandbox.ExitFile

// runscCanPassFD reports whether the runsc at path passes host
// descriptors to the container's process (run --pass-fd).
func runscCanPassFD(path string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	out, _ := exec.CommandContext(ctx, path, "help", "run").CombinedOutput()
	return bytes.Contains(out, []byte("-pass-fd"))
}

// newRunsc finds the runsc binary (cfg.Runsc, else runsc on PATH) and
// returns its client, or nil and why the tier is not offered; and what
// is wrong with its version (runscversion.Check).
func newRunsc(cfg Config, run string) (*runc.Runc, string, []string) {
	bin := cfg.Runsc
	if bin == "" {
		bin = "runsc"
	}
	path, err := exec.LookPath(bin)
	if err != nil {
		return nil, fmt.Sprintf("gVisor's runsc is not installed (scripts/runtimes.sh runsc installs the one corral pins): %v", err), nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, "--version").CombinedOutput()
	if err != nil {
		return nil, fmt.Sprintf("%s --version failed: %v %s", path, err, out), nil
	}
	warnings := runscversion.Check(path, string(out))
	return &runc.Runc{Command: path, Root: filepath.Join(run, "runsc"), ExtraArgs: RunscArgs(ctx, path)}, "", warnings
}

// RunscArgs returns the global flags corral gives the runsc at path:
// runscArgs, and runscGoferNetns where runsc has that flag.
func RunscArgs(ctx context.Context, path string) []string {
	args := slices.Clone(runscArgs)
	if flags, err := exec.CommandContext(ctx, path, "flags").CombinedOutput(); err == nil &&
		bytes.Contains(flags, []byte("-gofer-network-namespace")) {
		args = append(args, runscGoferNetns)
	}
	return args
}

// runscStateExited corrects the state runsc gives of a sandbox whose
// Sentry has exited: gVisor of 2026 asks the Sentry's control server,
// and once that is gone counts a Sentry that signal 0 reaches as
// running, which an exited Sentry is until the host's init reaps it
// (the driver's Wait returns as it exits). Debian's 2022 runsc had the
// container's stop from the Sentry before it exited. A Sentry that has
// exited, or is gone, stops the sandbox.
func runscStateExited(c *runc.Container) {
	if (c.Status == "running" || c.Status == "created") && c.Pid > 0 {
		if _, err := procfs.StartTime(c.Pid); err != nil {
			c.Status = "stopped"
		}
	}
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
// then tracks the sandbox and returns its handle. PID 1 gets the console
// and, where runsc can pass it (--pass-fd), the exit pipe as fd 3.
func (d *Driver) startRunsc(ctx context.Context, b *build) (*driver.Handle, error) {
	console, exit, err := d.makePipes(b, d.runscPassFD)
	if err != nil {
		return nil, err
	}
	defer console.Close()
	pidFile := filepath.Join(b.bundle, "init.pid")
	if exit != nil {
		defer exit.Close()
		err = d.runRunscPassing(ctx, b.spec.ID, b.bundle, pidFile, console, exit)
	} else {
		opts := &runc.CreateOpts{IO: fileIO{console}, PidFile: pidFile, Detach: true}
		_, err = d.runsc.Run(ctx, b.spec.ID, b.bundle, opts)
	}
	if err != nil {
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

// runRunscPassing runs `runsc run --detach` with files handed to PID 1 as
// its descriptors 3 and up. go-runc cannot ask for that: it passes extra
// files with runc's --preserve-fds, which runsc does not have, so the
// command is made here the way go-runc makes it (global flags, then run).
func (d *Driver) runRunscPassing(ctx context.Context, id, bundle, pidFile string, console *os.File, files ...*os.File) error {
	pidFile, err := filepath.Abs(pidFile)
	if err != nil {
		return err
	}
	args := append([]string{"--root", d.runsc.Root}, d.runsc.ExtraArgs...)
	args = append(args, "run", "--bundle", bundle, "--pid-file", pidFile, "--detach")
	for i := range files {
		args = append(args, "--pass-fd", fmt.Sprintf("%d:%d", 3+i, 3+i))
	}
	cmd := exec.CommandContext(ctx, d.runsc.Command, append(args, id)...)
	cmd.Stdout, cmd.Stderr = console, console
	cmd.ExtraFiles = files
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "NOTIFY_SOCKET=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	return cmd.Run()
}
