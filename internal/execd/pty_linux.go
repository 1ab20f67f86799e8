// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package execd

import (
	"os"

	"golang.org/x/sys/unix"
)

// foregroundGroup returns the foreground process group of a terminal.
func foregroundGroup(master *os.File) (int, error) {
	return unix.IoctlGetInt(int(master.Fd()), unix.TIOCGPGRP)
}
