// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package egress

import (
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"
)

// dropPrivileges keeps, on every thread, only CAP_NET_ADMIN (to change
// the rules at run time) and sets no_new_privs: once its sockets are
// bound, the enforcer — which parses DNS, HTTP and TLS from the sandbox —
// can no longer enter namespaces, mount, trace, load modules or override
// file permissions. It needs a binary built without cgo (the shipped
// one); elsewhere it reports that it could not.
func dropPrivileges() (boundingKept bool, err error) {
	if _, _, e := syscall.AllThreadsSyscall(syscall.SYS_PRCTL, unix.PR_SET_NO_NEW_PRIVS, 1, 0); e != 0 {
		return false, fmt.Errorf("no_new_privs: %w", e)
	}
	for c := 0; c <= unix.CAP_LAST_CAP; c++ {
		if c == unix.CAP_NET_ADMIN {
			continue
		}
		_, _, e := syscall.AllThreadsSyscall(syscall.SYS_PRCTL, unix.PR_CAPBSET_DROP, uintptr(c), 0)
		if e == unix.EPERM {
			// No CAP_SETPCAP (a sidecar container that was given only what
			// it needs): the bounding set is its container's, and
			// no_new_privs keeps anything outside the permitted set out.
			boundingKept = true
			break
		}
		if e != 0 && e != unix.EINVAL {
			return false, fmt.Errorf("drop capability %d from the bounding set: %w", c, e)
		}
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	data := [2]unix.CapUserData{{Effective: 1 << unix.CAP_NET_ADMIN, Permitted: 1 << unix.CAP_NET_ADMIN}}
	if _, _, e := syscall.AllThreadsSyscall(syscall.SYS_CAPSET, uintptrOf(&hdr), uintptrOf(&data[0]), 0); e != 0 {
		return boundingKept, fmt.Errorf("capset: %w", e)
	}
	return boundingKept, nil
}
