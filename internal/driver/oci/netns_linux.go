// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package oci

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"

	"golang.org/x/sys/unix"
)

// createNetns makes a network namespace with loopback up and pins it at
// path with a bind mount.
func createNetns(path string) (err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_RDONLY, 0o400)
	if err != nil {
		return fmt.Errorf("netns file: %w", err)
	}
	f.Close()
	defer func() {
		if err != nil {
			_ = unix.Unmount(path, unix.MNT_DETACH)
			_ = os.Remove(path)
		}
	}()
	errc := make(chan error, 1)
	// A fresh goroutine whose thread is thrown away afterwards: unshare
	// cannot be undone, so this thread must never run anything else.
	go func() {
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("unshare netns: %w", err)
			return
		}
		self := "/proc/self/task/" + strconv.Itoa(unix.Gettid()) + "/ns/net"
		if err := unix.Mount(self, path, "", unix.MS_BIND, ""); err != nil {
			errc <- fmt.Errorf("pin netns: %w", err)
			return
		}
		if err := loopbackUp(); err != nil {
			errc <- err
			return
		}
		errc <- reserveExecdPort()
		// Exit with the thread still locked: the runtime then ends it.
	}()
	return <-errc
}

// ReservedPorts keeps execd's port out of the namespace's ephemeral
// range. Otherwise the server's readiness pings, which connect to
// 127.0.0.1:44772 from an ephemeral port before execd listens, can pick
// 44772 itself: the socket then connects to itself and holds the port,
// and execd cannot bind it.
const ReservedPorts = "44772"

// reserveExecdPort applies ReservedPorts to the calling thread's
// namespace.
func reserveExecdPort() error {
	if err := os.WriteFile("/proc/sys/net/ipv4/ip_local_reserved_ports", []byte(ReservedPorts), 0); err != nil {
		return fmt.Errorf("reserve execd's port: %w", err)
	}
	return nil
}

// loopbackUp sets IFF_UP on lo in the current network namespace.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("loopback: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("loopback flags: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("loopback up: %w", err)
	}
	return nil
}

// removeNetns unpins and removes a namespace file. Missing is fine.
func removeNetns(path string) error {
	if err := unix.Unmount(path, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("unmount netns: %w", err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}
