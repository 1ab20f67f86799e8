// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package cli

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// lockDataDir takes an exclusive lock on the data dir, so two servers never
// write one database. The lock dies with the process, even on kill -9.
func lockDataDir(dir string) (func(), error) {
	f, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock data dir: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("data dir %s is in use by another corral serve (lock: %v)", dir, err)
	}
	return func() { f.Close() }, nil
}
