// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package oci

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	runc "github.com/containerd/go-runc"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/errdefs"
	"github.com/corral-dev/corral/internal/driver"
	"github.com/corral-dev/corral/internal/hostnet/forward"
	"github.com/corral-dev/corral/internal/hostnet/netns"
	"github.com/corral-dev/corral/internal/initproc"
	"github.com/corral-dev/corral/internal/insandbox"
	"github.com/corral-dev/corral/internal/procfs"
	"github.com/corral-dev/corral/internal/safefile"
)

// start runs the bundle and waits until execd answers, then tracks the
// sandbox and returns its handle.
func (d *Driver) start(ctx context.Context, b *build) (*driver.Handle, error) {
	if b.runsc {
		return d.startRunsc(ctx, b)
	}
	// PID 1 prints into a pipe the server drains, and writes its exit
	// code into another (fd 3) that the server reads: nothing of the
	// host's grows by what it writes, whatever program it is.
	console, exit, err := d.makePipes(b, true)
	if err != nil {
		return nil, err
	}
	defer console.Close()
	defer exit.Close()
	// PID 1 writes a line here (fd 4) once it holds execd's port: only
	// then does the server connect, so no connection of its can be given
	// that port as its own.
	ready, readyW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer ready.Close()
	pidFile := filepath.Join(b.bundle, "init.pid")
	extra := []*os.File{exit, readyW}
	var gate *os.File
	if b.userns != nil {
		// PID 1 waits on this (fd 5) until the network is set up.
		gateR, gateW, err := os.Pipe()
		if err != nil {
			return nil, err
		}
		defer gateR.Close()
		gate = gateW
		defer func() {
			if gate != nil {
				gate.Close() // unopened: PID 1 gives up
			}
		}()
		extra = append(extra, gateR)
	}
	opts := &runc.CreateOpts{IO: fileIO{console}, PidFile: pidFile, Detach: true, ExtraFiles: extra}
	_, err = d.runc.Run(ctx, b.spec.ID, b.bundle, opts)
	readyW.Close()
	if err != nil {
		return nil, d.startError(b.bundle, b.disk, fmt.Errorf("runc run: %w", err))
	}
	b.mark("runc")
	pid, start, err := d.started(b, pidFile)
	if err != nil {
		return nil, err
	}
	if gate != nil {
		// The sandbox's mount namespace has its copies of the server's
		// mounts now.
		d.unstage(ctx, b)
		if err := d.openGate(ctx, b, pid, start, gate); err != nil {
			return nil, d.startError(b.bundle, b.disk, err)
		}
		gate = nil
	}
	if err := d.waitReady(ctx, ready, b.netns, pid, start); err != nil {
		if ierr := d.checkInit(pid); errors.Is(ierr, errdefs.ErrInvalidArgument) {
			return nil, ierr
		}
		return nil, d.startError(b.bundle, b.disk, err)
	}
	if err := d.checkInit(pid); err != nil {
		if errors.Is(err, errdefs.ErrInvalidArgument) {
			return nil, err
		}
		// PID 1 is gone already: an entrypoint that exited right after
		// execd answered (sh -c 'exit 3'), reported as such.
		return nil, d.startError(b.bundle, b.disk, err)
	}
	return d.ready(b, handleState{Bundle: b.bundle, Pid: pid, StartTime: start, UserNS: b.userns != nil}), nil
}

// started reads the pid runc (or runsc: the Sentry's) wrote, and its
// start time; an error if it is gone already.
func (d *Driver) started(b *build, pidFile string) (int, uint64, error) {
	pid, err := readPid(pidFile)
	if err != nil {
		return 0, 0, err
	}
	start, err := procfs.StartTime(pid)
	if err != nil {
		return 0, 0, d.startError(b.bundle, b.disk, fmt.Errorf("the sandbox exited at once"))
	}
	return pid, start, nil
}

// ready tracks a sandbox whose execd answers and returns its handle.
func (d *Driver) ready(b *build, hs handleState) *driver.Handle {
	b.mark("ready")
	d.track(b.spec.ID, &instance{bundle: b.bundle, pid: hs.Pid, startTime: hs.StartTime, netns: b.netns, ns: b.ns, runsc: hs.Runsc})
	state, _ := json.Marshal(hs)
	return &driver.Handle{ID: b.spec.ID, Driver: Name, Version: 1, State: state}
}

// openGate sets up the network namespace runc made in the sandbox's user
// namespace (loopback up; a policed sandbox's enforcer started in it),
// then lets PID 1 go on.
func (d *Driver) openGate(ctx context.Context, b *build, pid int, start uint64, gate *os.File) error {
	ns, err := netnsOf(pid, start)
	if err != nil {
		return err
	}
	b.ns, b.netns = ns, fdPath(ns)
	if err := netns.Do(b.netns, loopbackUp); err != nil {
		return err
	}
	if b.spec.Policed() {
		if err := d.net.Start(ctx, b.spec.ID, egressDir(b.bundle), b.netns); err != nil {
			return err
		}
		b.mark("egress")
	}
	_, err = gate.WriteString(initproc.GateOpen)
	if cerr := gate.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("open the gate of PID 1: %w", err)
	}
	b.mark("gate")
	return nil
}

func readPid(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// startError explains a sandbox that did not come up, with the last lines
// its entrypoint and init printed, as a user-facing error.
func (d *Driver) startError(bundle, disk string, cause error) error {
	if errors.Is(cause, context.Canceled) || errors.Is(cause, context.DeadlineExceeded) {
		return cause
	}
	// What is in the console pipe reaches the log first: runc's own
	// words, or the entrypoint's last.
	d.drains.stop(filepath.Base(bundle))
	tail := consoleTail(disk, 5)
	ex, exited := exitCode(bundle)
	if !exited {
		// The runtime failed, not the user's program: the server's side,
		// and worth a retry (a runtime killed or starved mid-create), as
		// the other runtimes answer it. What the console holds then is
		// the runtime's own words (host paths, descriptors): for the log.
		if tail != "" {
			cause = fmt.Errorf("%w; console: %s", cause, tail)
		}
		return errdefs.Wrap(errdefs.ErrUnavailable, api.CodeSandboxStartFailed, "the runtime could not start the sandbox (details are in the server log)", cause)
	}
	return driver.ExitedDuringStart(filepath.Base(bundle), ex.Code, "", tail, cause)
}

// consoleFile is the console log's name in a sandbox's disk directory.
const consoleFile = "console.log"

// consoleTail is the last n non-empty lines of the console log in dir
// (of its last 64 KiB, each cut to 512 bytes).
func consoleTail(dir string, n int) string {
	f, _, err := safefile.Open(dir, consoleFile)
	if err != nil {
		return ""
	}
	defer f.Close()
	b, err := safefile.Tail(f, 64<<10)
	if err != nil {
		return ""
	}
	var lines []string
	for l := range strings.SplitSeq(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l[:min(len(l), 512)])
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// waitReady waits for PID 1's line on ready (execd's port is bound), then
// polls execd's /ping inside the sandbox until it answers, the sandbox
// dies, or the ready timeout passes.
func (d *Driver) waitReady(ctx context.Context, ready *os.File, netns string, pid int, start uint64) error {
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, d.cfg.ReadyTimeout)
	defer cancel()
	if dl, ok := ctx.Deadline(); ok {
		_ = ready.SetReadDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { _ = ready.SetReadDeadline(time.Now()) })
	defer stop()
	var b [1]byte
	if _, err := ready.Read(b[:]); err != nil {
		if err := parent.Err(); err != nil {
			return err
		}
		if ctx.Err() != nil {
			return fmt.Errorf("execd did not listen within %v", d.cfg.ReadyTimeout)
		}
		// Closed without a line: PID 1 exited first.
		return fmt.Errorf("the sandbox exited before execd listened")
	}
	return d.pollExecd(ctx, netns, pid, start, 250*time.Microsecond, 2*time.Millisecond)
}

// pollExecd pings execd inside the namespace until it answers, PID 1 (or
// runsc's Sentry) exits, or ctx ends; the pause between pings doubles
// from delay up to most. execd's port is first taken out of the
// namespace's ephemeral range: a ping before execd listens could
// otherwise be given that port and connect to itself.
func (d *Driver) pollExecd(ctx context.Context, nsPath string, pid int, start uint64, delay, most time.Duration) error {
	if err := netns.ReservePorts(nsPath, insandbox.ExecdPort); err != nil {
		return err
	}
	dial := func(ctx context.Context) (net.Conn, error) {
		return netns.Dial(ctx, nsPath, "127.0.0.1:"+strconv.Itoa(insandbox.ExecdPort))
	}
	alive := func(context.Context) error {
		if !procfs.Alive(pid, start) {
			return errors.New("the sandbox exited before execd answered")
		}
		return nil
	}
	if err := forward.AwaitPing(ctx, dial, alive, delay, most); err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("execd did not answer within %v: %v", d.cfg.ReadyTimeout, err)
		}
		return err
	}
	return nil
}

// pingExecd sends GET /ping to execd inside the namespace.
func pingExecd(ctx context.Context, nsPath string) (bool, error) {
	return forward.Ping(ctx, func(ctx context.Context) (net.Conn, error) {
		return netns.Dial(ctx, nsPath, "127.0.0.1:"+strconv.Itoa(insandbox.ExecdPort))
	})
}

// fileIO gives runc a file for the sandbox's stdout and stderr, which the
// sandbox keeps after runc exits.
type fileIO struct{ f *os.File }

func (f fileIO) Close() error          { return nil }
func (f fileIO) Stdin() io.WriteCloser { return nil }
func (f fileIO) Stdout() io.ReadCloser { return nil }
func (f fileIO) Stderr() io.ReadCloser { return nil }
func (f fileIO) Set(cmd *exec.Cmd)     { cmd.Stdout, cmd.Stderr = f.f, f.f }

var _ runc.IO = fileIO{}
