// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package dnsproxy

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// MarkSocket sets SO_MARK on a socket before it connects (a net.Dialer's
// Control).
func MarkSocket(mark uint32) func(network, address string, c syscall.RawConn) error {
	return func(_, _ string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_MARK, int(mark))
		}); err != nil {
			return err
		}
		return serr
	}
}
