// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package cli

import (
	"context"
	"os"
)

// runInstallBinary copies the running corral binary to PATH: the init
// container of a Kubernetes sandbox pod uses it to put corral into the
// volume the sandbox container starts from. The copy is written beside
// PATH and renamed into place, so a reader never sees half a binary.
func runInstallBinary(_ context.Context, e *env, args []string) int {
	fs := newFlagSet(e, "install-binary", "install-binary PATH")
	if ok, code := parseFlags(fs, e, args); !ok {
		return code
	}
	if fs.NArg() != 1 {
		return fail(e, "install-binary takes one PATH (got %d arguments)", fs.NArg())
	}
	dst := fs.Arg(0)
	src, err := os.Open("/proc/self/exe")
	if err != nil {
		return fail(e, "install-binary: %v", err)
	}
	defer src.Close()
	if err := writeFileAtomic(dst, src, 0o555); err != nil {
		return fail(e, "install-binary: %v", err)
	}
	return 0
}
