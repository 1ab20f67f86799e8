// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

// Package testutil holds helpers for tests only: the gates of the
// integration tiers (RequireRoot, RequireDocker, RequireKube, which skip
// unless an environment variable opts in and fail if it opts in but the
// tier cannot run), polling with WaitFor, and validation of HTTP answers
// against the reference OpenSandbox contracts. Only _test.go files import it.
package testutil

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// Environment variables that opt integration tiers in.
const (
	EnvRoot   = "CORRAL_TEST_ROOT"
	EnvDocker = "CORRAL_TEST_DOCKER"
	EnvKube   = "CORRAL_TEST_KUBE"
)

// RequireRoot skips unless CORRAL_TEST_ROOT=1; when it is set, the test
// fails if it does not run as root on Linux (so CI cannot skip silently).
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Getenv(EnvRoot) != "1" {
		t.Skipf("root tier: set %s=1 to run", EnvRoot)
	}
	if runtime.GOOS != "linux" || os.Geteuid() != 0 {
		t.Fatalf("%s=1 but this test cannot run here: needs root on Linux", EnvRoot)
	}
}

// WaitFor polls cond until it is true or timeout passes, then fails with msg.
func WaitFor(t testing.TB, timeout time.Duration, msg string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, msg)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// ModuleRoot returns the directory of go.mod.
func ModuleRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found above the test's directory")
		}
		dir = parent
	}
}
