// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package oci

import (
	"fmt"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/errdefs"
	"github.com/corral-dev/corral/internal/procfs"
)

// checkInit makes sure a runc sandbox's PID 1 (host pid) runs the
// server's own corral binary, which the sandbox sees bind-mounted, so
// the same file: a readiness line and an answer on execd's port are
// what any program could give, and no host-side bound may rest on a
// program that replaced corral init (through a volume, or a link in the
// image). A different program is the tenant's doing, reported as such.
func (d *Driver) checkInit(pid int) error {
	ok, err := procfs.Runs(pid, d.cfg.CorralBinary)
	if err != nil {
		return fmt.Errorf("the sandbox's PID 1 (%d): %w", pid, err)
	}
	if !ok {
		return errdefs.New(errdefs.ErrInvalidArgument, api.CodeSandboxStartFailed,
			"the sandbox's PID 1 is not corral's init: something in the image, a snapshot or a volume replaced /.corral/corral")
	}
	return nil
}

// initBinary is the file the sandboxes see as corral's binary: the
// server's own, or (tests only) standIn.
func (d *Driver) initBinary() string {
	if d.standIn != "" {
		return d.standIn
	}
	return d.cfg.CorralBinary
}
