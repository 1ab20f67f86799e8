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

	"github.com/corral-dev/corral/errdefs"
	"github.com/corral-dev/corral/internal/procfs"
)

// newNetns makes a network namespace with loopback up and returns a
// descriptor that holds it. No bind mount pins
// it: every mount in the server's mount namespace is copied by each new
// sandbox's runtime and costs every later create (docs/benchmarks.md#density).
// Once the sandbox runs, its processes hold the namespace too.
func newNetns() (*os.File, error) {
	type result struct {
		f   *os.File
		err error
	}
	c := make(chan result, 1)
	// A fresh goroutine whose thread is thrown away afterwards: unshare
	// cannot be undone, so this thread must never run anything else.
	go func() {
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			c <- result{err: fmt.Errorf("unshare netns: %w", err)}
			return
		}
		f, err := os.Open("/proc/self/task/" + strconv.Itoa(unix.Gettid()) + "/ns/net")
		if err != nil {
			c <- result{err: fmt.Errorf("hold netns: %w", err)}
			return
		}
		if err := loopbackUp(); err != nil {
			f.Close()
			c <- result{err: err}
			return
		}
		c <- result{f: f}
		// Exit with the thread still locked: the runtime then ends it.
	}()
	r := <-c
	return r.f, r.err
}

// netnsOf opens the network namespace of process pid if it is the one
// that started at start: opened first and checked after, so a pid reused
// by another process is never mistaken for the sandbox's.
func netnsOf(pid int, start uint64) (*os.File, error) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/ns/net")
	if err != nil {
		return nil, fmt.Errorf("the sandbox's network namespace: %w", err)
	}
	if !procfs.Alive(pid, start) {
		f.Close()
		return nil, fmt.Errorf("the sandbox's PID 1 has exited: %w", errdefs.ErrFailedPrecondition)
	}
	return f, nil
}

// fdPath names an open descriptor of this process for its own use.
func fdPath(f *os.File) string { return "/proc/self/fd/" + strconv.Itoa(int(f.Fd())) }

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

// removeNetns unpins and removes a namespace file, which sandboxes made
// before namespaces were held by descriptors have. Missing is fine.
func removeNetns(path string) error {
	if err := unix.Unmount(path, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("unmount netns: %w", err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}
