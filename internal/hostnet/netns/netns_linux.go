// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

// Package netns runs code inside another network namespace, such as a
// sandbox's, without letting any other goroutine run there: Do switches a
// locked thread in and out, Dial opens a connection from inside.
package netns

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"strconv"

	"golang.org/x/sys/unix"
)

// Do runs fn on a thread switched into the network namespace at path
// and switches back. The thread is locked throughout; if switching back
// fails it stays locked and dies with the goroutine, so no other goroutine
// ever runs in the wrong namespace.
func Do(path string, fn func() error) (err error) {
	target, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("open netns: %w", err)
	}
	defer target.Close()
	runtime.LockOSThread()
	orig, err := os.Open("/proc/self/task/" + strconv.Itoa(unix.Gettid()) + "/ns/net")
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer orig.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("enter netns: %w", err)
	}
	ferr := fn()
	if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
		return errors.Join(ferr, fmt.Errorf("leave netns: %w", err))
	}
	runtime.UnlockOSThread()
	return ferr
}

// Dial connects to addr inside the namespace at path. The socket is
// created inside it; the connection is then used from anywhere.
func Dial(ctx context.Context, path, addr string) (net.Conn, error) {
	var conn net.Conn
	err := Do(path, func() error {
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", addr)
		conn = c
		return err
	})
	return conn, err
}

// ReservePorts takes ports out of the ephemeral range of the namespace at
// path, so a connection Dial makes there is never given one of them as
// its own. Without it a ping to a port whose server has not bound yet
// can be given that very port and connect to itself (TCP's simultaneous
// open), which holds the port and makes the server's bind fail. The
// runtime's own sysctl does this for runc; gVisor ignores it.
func ReservePorts(path string, ports ...int) error {
	s := ""
	for i, p := range ports {
		if i > 0 {
			s += ","
		}
		s += strconv.Itoa(p)
	}
	return Do(path, func() error {
		// /proc/sys/net answers for the namespace of the thread that
		// opens it.
		if err := os.WriteFile("/proc/sys/net/ipv4/ip_local_reserved_ports", []byte(s), 0); err != nil {
			return fmt.Errorf("reserve ports %s: %w", s, err)
		}
		return nil
	})
}
