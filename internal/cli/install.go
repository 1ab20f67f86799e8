// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package cli

import (
	"context"
	"io"
	"os"
	"path/filepath"

	"github.com/corral-dev/corral/internal/cli/client"
)

// runInstallBinary copies the running corral binary to PATH: the init
// container of a Kubernetes sandbox pod uses it to put corral into the
// volume the sandbox container starts from. The copy is written beside
// PATH and renamed into place, so a reader never sees half a binary.
// With --isolate-network it also closes the pod's network namespace to
// everything but answers (a sandbox without a policy): from this
// container, which holds NET_ADMIN and is gone before the sandbox's
// starts, so the sandbox's never holds it.
func runInstallBinary(_ context.Context, e *env, args []string) int {
	fs := client.NewFlagSet(e, "install-binary", "install-binary [--isolate-network] PATH")
	isolate := fs.Bool("isolate-network", false, "also close the pod's network to all but inbound connections and their answers")
	if ok, code := client.ParseFlags(fs, e, args); !ok {
		return code
	}
	if fs.NArg() != 1 {
		return client.Fail(e, "install-binary takes one PATH (got %d arguments)", fs.NArg())
	}
	dst := fs.Arg(0)
	src, err := os.Open("/proc/self/exe")
	if err != nil {
		return client.Fail(e, "install-binary: %v", err)
	}
	defer src.Close()
	if err := writeFileAtomic(dst, src, 0o555); err != nil {
		return client.Fail(e, "install-binary: %v", err)
	}
	if *isolate {
		// Fail closed: the sandbox never starts in a namespace that could
		// not be isolated.
		if err := isolateOutbound(); err != nil {
			return client.Fail(e, "install-binary: --isolate-network: %v", err)
		}
	}
	return 0
}

// writeFileAtomic writes what r holds beside path, syncs it and renames
// it into place, so a reader never sees half a file.
func writeFileAtomic(path string, r io.Reader, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".corral-*")
	if err != nil {
		return err
	}
	_, err = io.Copy(tmp, r)
	if err == nil {
		err = tmp.Chmod(mode)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return err
}
