// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package corraltest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/corral-dev/corral/internal/testutil"
)

// mountedBelow lists the mount points below dir.
func mountedBelow(t *testing.T, dir string) []string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for line := range strings.Lines(string(b)) {
		if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(mountPath.Replace(f[4]), dir+"/") {
			out = append(out, f[4])
		}
	}
	return out
}

// TestUnmountLeavesNothing: what a server left mounted below its data
// directory (a tmpfs, one stacked on it, one inside it, a path with a
// space) is gone after Unmount, whatever the runtime's layout.
func TestUnmountLeavesNothing(t *testing.T) {
	testutil.RequireRoot(t)
	dir := t.TempDir()
	run := filepath.Join(dir, "oci", "run")
	inner := filepath.Join(run, "bundles x")
	for _, m := range []string{run, run, inner} {
		if err := os.MkdirAll(m, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := unix.Mount("tmpfs", m, "tmpfs", 0, "size=1m"); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _ = Unmount(dir) })
	if got := mountedBelow(t, dir); len(got) != 3 {
		t.Fatalf("mounted below %s: %q, want 3", dir, got)
	}
	if err := Unmount(dir); err != nil {
		t.Fatal(err)
	}
	if got := mountedBelow(t, dir); len(got) != 0 {
		t.Errorf("still mounted below %s: %q", dir, got)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Errorf("remove the data directory: %v", err)
	}
}
