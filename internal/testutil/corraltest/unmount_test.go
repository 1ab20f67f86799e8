// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package corraltest

import (
	"os"
	"path/filepath"
	"testing"
)

// TestUnmountNothingMounted: a data directory with nothing mounted in it
// (a server that never ran the native runtime) is no error.
func TestUnmountNothingMounted(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "oci", "run"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := Unmount(dir); err != nil {
		t.Fatal(err)
	}
	if err := Unmount(filepath.Join(dir, "missing")); err != nil {
		t.Fatal(err)
	}
}
