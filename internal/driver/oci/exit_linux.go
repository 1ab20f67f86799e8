// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package oci

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// makeExitFile mounts a tmpfs of one page at the bundle's exitDir and
// makes the exit file in it, for PID 1 to write through a descriptor.
// The runtime tmpfs that every sandbox's small files share is out of its
// reach, whatever program PID 1 is. Destroy unmounts it with the rest of
// the bundle's mounts.
func makeExitFile(bundle string) (*os.File, error) {
	dir := filepath.Join(bundle, exitDir)
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, err
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "size=4k,nr_inodes=4,mode=0700"); err != nil {
		return nil, fmt.Errorf("mount the exit file's tmpfs: %w", err)
	}
	return os.OpenFile(filepath.Join(dir, exitFile), os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o600)
}
