// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package cli

import (
	"strings"
	"testing"
)

// TestStorageFlagsAndCheckMountsRejectBadInput: the storage bounds'
// flags and check-mounts refuse what they cannot use with a line naming
// it, before anything is started or checked.
func TestStorageFlagsAndCheckMountsRejectBadInput(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--data-dir", dir, "--max-snapshots", "-1"}, "--max-snapshots -1"},
		{[]string{"serve", "--data-dir", dir, "--max-volume", "1Ki"}, "--max-volume"},
		{[]string{"serve", "--data-dir", dir, "--max-volume", "lots"}, "--max-volume"},
		{[]string{"serve", "--data-dir", dir, "--max-snapshot-bytes", "-5Gi"}, "--max-snapshot-bytes"},
		{[]string{"check-mounts", "--", "relative/path"}, "not an absolute, clean path"},
		{[]string{"check-mounts", "--", "/a/../.corral"}, "not an absolute, clean path"},
	} {
		code, stderr := run(t, nil, tc.args...)
		if code == 0 || !strings.Contains(stderr, tc.want) {
			t.Errorf("corral %s = %d %q, want a failure naming %q", strings.Join(tc.args, " "), code, stderr, tc.want)
		}
	}
}
