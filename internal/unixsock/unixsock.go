// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

// Package unixsock listens on and dials Unix sockets whose paths are
// longer than the kernel's 108 bytes (deep data directories): the path is
// reached through /proc/self/fd of its directory.
package unixsock

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
)

// maxPath is what fits in sockaddr_un with room to spare.
const maxPath = 100

// via runs fn with a short name for path, opening its directory.
func via(path string, fn func(short string) error) error {
	if len(path) <= maxPath {
		return fn(path)
	}
	dir, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer dir.Close()
	return fn("/proc/self/fd/" + strconv.Itoa(int(dir.Fd())) + "/" + filepath.Base(path))
}

// Listen listens on the Unix socket path.
func Listen(path string) (net.Listener, error) {
	var ln net.Listener
	err := via(path, func(short string) error {
		var err error
		ln, err = net.Listen("unix", short)
		return err
	})
	return ln, err
}

// Dial connects to the Unix socket path.
func Dial(ctx context.Context, path string) (net.Conn, error) {
	var c net.Conn
	err := via(path, func(short string) error {
		var d net.Dialer
		var err error
		c, err = d.DialContext(ctx, "unix", short)
		return err
	})
	return c, err
}
