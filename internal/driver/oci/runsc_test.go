// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package oci

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	runc "github.com/containerd/go-runc"
)

// TestRunscStateExited: a sandbox whose Sentry has exited is stopped,
// whatever runsc says, while the Sentry is a zombie (runsc of 2026 says
// running until the host's init reaps it) and once it is gone; a Sentry
// that runs, and a paused sandbox, keep runsc's word.
func TestRunscStateExited(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("/bin/true")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			t.Fatal(err)
		}
		if f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:])); f[0] == "Z" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d did not exit", pid)
		}
	}
	for _, tc := range []struct {
		name   string
		c      runc.Container
		reaped bool
		want   string
	}{
		{"a zombie Sentry", runc.Container{Status: "running", Pid: pid}, false, "stopped"},
		{"a zombie Sentry, created", runc.Container{Status: "created", Pid: pid}, false, "stopped"},
		{"a Sentry that runs", runc.Container{Status: "running", Pid: os.Getpid()}, false, "running"},
		{"paused", runc.Container{Status: "paused", Pid: os.Getpid()}, false, "paused"},
		{"stopped", runc.Container{Status: "stopped", Pid: -1}, false, "stopped"},
		{"a reaped Sentry", runc.Container{Status: "running", Pid: pid}, true, "stopped"},
	} {
		if tc.reaped && cmd.ProcessState == nil {
			_ = cmd.Wait()
		}
		c := tc.c
		runscStateExited(&c)
		if c.Status != tc.want {
			t.Errorf("%s: status %q, want %q", tc.name, c.Status, tc.want)
		}
	}
}
