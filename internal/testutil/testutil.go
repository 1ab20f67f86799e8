// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

// Package testutil holds what most tests share and nothing heavy: the
// root tier's gate (RequireRoot, which skips unless CORRAL_TEST_ROOT=1
// and fails if it is set but the test cannot run) and the tiers'
// environment variables, polling with WaitFor, goroutine-leak checks for
// TestMain (VerifyTestMain, NoLeaks), LockedBuffer, ModuleRoot and tree
// comparisons. It links only the standard library and goleak; what needs
// more lives beside it: netlab (network test worlds), registry (local
// registries and test image layers), dockertest (the Docker tier's gate
// and image), corraltest (building and serving corral) and contracttest
// (the reference contracts); the Kubernetes tier's are in
// internal/kube/kubetest. Only tests, those helpers and the bench/
// commands import it (internal/archtest checks).
package testutil

import (
	"crypto/sha256"
	"fmt"
	"io/fs"
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

// Tree describes the directory tree under dir for comparisons: each
// relative path maps to its permission bits and kind, with a link's
// target and a file's SHA-256.
func Tree(t testing.TB, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			l, _ := os.Readlink(p)
			out[rel] = "link " + l
		case fi.IsDir():
			out[rel] = fi.Mode().Perm().String() + " dir"
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out[rel] = fmt.Sprintf("%v file %x", fi.Mode().Perm(), sha256.Sum256(b))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// SameTree fails the test unless the trees under want and got are alike
// (see Tree).
func SameTree(t testing.TB, want, got string) {
	t.Helper()
	w, g := Tree(t, want), Tree(t, got)
	for k, v := range w {
		if g[k] != v {
			t.Errorf("%s: got %q, want %q", k, g[k], v)
		}
	}
	for k := range g {
		if _, ok := w[k]; !ok {
			t.Errorf("%s: not expected", k)
		}
	}
}
