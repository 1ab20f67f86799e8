// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package procfs

import (
	"context"
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"
)

// A process is the pair (pid, start time): the same pid with another
// start time is another process (pid reuse), and a process that exited
// but is not reaped yet is not alive.
func TestAliveAcrossPidReuse(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	start, err := StartTime(pid)
	if err != nil {
		t.Fatal(err)
	}
	if !Alive(pid, start) {
		t.Fatal("a running process is not alive")
	}
	if Alive(pid, start+1) {
		t.Error("another start time at the same pid counts as the same process")
	}
	// Start returns once the child's exec has closed its descriptors,
	// which the kernel does before it lays out the new program's
	// arguments: for that moment the command line reads empty.
	args, err := Cmdline(pid)
	for deadline := time.Now().Add(5 * time.Second); err == nil && len(args) == 0 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
		args, err = Cmdline(pid)
	}
	if err != nil || !slices.Equal(args, []string{"sleep", "60"}) {
		t.Errorf("Cmdline = %q, %v", args, err)
	}
	found, err := Find(func(a []string) bool { return slices.Equal(a, []string{"sleep", "60"}) })
	if err != nil || !slices.Contains(found, Proc{Pid: pid, StartTime: start}) {
		t.Errorf("Find = %v, %v; want it to hold %d", found, err, pid)
	}
	if ok, err := Runs(pid, cmd.Path); !ok || err != nil {
		t.Errorf("Runs(%s) = %v, %v", cmd.Path, ok, err)
	}
	self, _ := os.Executable()
	if ok, _ := Runs(pid, self); ok {
		t.Error("the process runs the test binary, says Runs")
	}

	_ = cmd.Process.Kill()
	// Exited, not reaped: a zombie is not alive.
	deadline := time.Now().Add(10 * time.Second)
	for Alive(pid, start) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if Alive(pid, start) {
		t.Error("a killed, unreaped process is alive")
	}
	// WaitExit returns for a process that is gone, ours or not.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := WaitExit(ctx, pid, start); err != nil {
		t.Errorf("WaitExit of an exited process: %v", err)
	}
	_ = cmd.Wait()
}

// WaitExit waits for a process that still runs until ctx ends.
func TestWaitExitEndsWithCtx(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	start, err := StartTime(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	if err := WaitExit(ctx, cmd.Process.Pid, start); err != context.DeadlineExceeded {
		t.Errorf("WaitExit = %v, want the deadline", err)
	}
}
