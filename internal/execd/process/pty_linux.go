// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package process

import (
	"os"

	"golang.org/x/sys/unix"
)

// foregroundGroup returns the foreground process group of a terminal.
func foregroundGroup(master *os.File) (pgid int, err error) {
	err = control(master, func(fd int) error {
		pgid, err = unix.IoctlGetInt(fd, unix.TIOCGPGRP)
		return err
	})
	return pgid, err
}

// setSize sets a terminal's size (which sends its foreground group
// SIGWINCH when the size changes).
func setSize(master *os.File, ws *unix.Winsize) error {
	return control(master, func(fd int) error { return unix.IoctlSetWinsize(fd, unix.TIOCSWINSZ, ws) })
}

// getSize returns a terminal's size.
func getSize(master *os.File) (ws *unix.Winsize, err error) {
	err = control(master, func(fd int) error {
		ws, err = unix.IoctlGetWinsize(fd, unix.TIOCGWINSZ)
		return err
	})
	return ws, err
}

// control runs fn on f's descriptor while f cannot be closed under it;
// f.Fd() would race with the reaper closing the terminal.
func control(f *os.File, fn func(fd int) error) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) { ferr = fn(int(fd)) }); err != nil {
		return err
	}
	return ferr
}
