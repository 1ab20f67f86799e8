// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package oci

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/corral-dev/corral/internal/testutil"
)

// TestUsernsMaker: the helper makes namespaces that map a slot's range
// (a file of on-disk root reads, through an idmapped mount made with one,
// as the range's first host ID); it refuses hostile requests and goes on
// serving; a helper that died is replaced; closing ends it.
func TestUsernsMaker(t *testing.T) {
	testutil.RequireRoot(t)
	m := newUsernsMaker(corralBin)
	t.Cleanup(m.close)

	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "file"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	owner := func(ns *os.File) uint32 {
		t.Helper()
		mnt, err := idmappedPath(dir, ns)
		if err != nil {
			t.Fatal(err)
		}
		defer mnt.Close()
		var st unix.Stat_t
		if err := unix.Fstatat(int(mnt.Fd()), "file", &st, 0); err != nil {
			t.Fatal(err)
		}
		return st.Uid
	}
	for _, slot := range []int{5, usernsSlots - 1, 5} {
		ns, err := m.make(slotHost(slot))
		if err != nil {
			t.Fatalf("slot %d: %v", slot, err)
		}
		if got := owner(ns); got != slotHost(slot) {
			t.Errorf("slot %d: root's file reads as owned by %d through the namespace, want %d", slot, got, slotHost(slot))
		}
		ns.Close()
	}

	// Hostile requests, straight on the helper's socket: refused with a
	// reason and no descriptor; the helper serves on.
	m.mu.Lock()
	helper := m.cmd.Process.Pid
	for _, req := range [][]byte{
		nil, {1, 2, 3}, binary.BigEndian.AppendUint32(nil, 0),
		binary.BigEndian.AppendUint32(nil, usernsFirst+1),
		binary.BigEndian.AppendUint32(nil, usernsFirst-usernsSize),
		binary.BigEndian.AppendUint32(nil, slotHost(usernsSlots-1)+usernsSize),
		binary.BigEndian.AppendUint32(nil, 0xFFFFFFFF),
		append(binary.BigEndian.AppendUint32(nil, slotHost(1)), 0),
	} {
		if len(req) == 0 {
			// An empty message reads as the end: not sent.
			continue
		}
		if err := unix.Sendmsg(m.conn, req, nil, nil, unix.MSG_NOSIGNAL); err != nil {
			t.Fatal(err)
		}
		buf, oob := make([]byte, 512), make([]byte, unix.CmsgSpace(4))
		n, oobn, _, _, err := unix.Recvmsg(m.conn, buf, oob, unix.MSG_CMSG_CLOEXEC)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(string(buf[:n]), "error: ") || oobn != 0 {
			t.Errorf("request %x: answered %q with %d bytes of descriptors, want a refusal", req, buf[:n], oobn)
		}
	}
	m.mu.Unlock()
	var refused *makerError
	if _, err := m.make(usernsFirst + 7); !errors.As(err, &refused) {
		t.Errorf("an unaligned range: %v, want the helper's refusal", err)
	}
	m.mu.Lock()
	same := m.cmd != nil && m.cmd.Process.Pid == helper
	m.mu.Unlock()
	if !same {
		t.Error("a refused request replaced the helper")
	}

	// The helper dies: the next request gets a new one.
	if err := syscall.Kill(helper, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	ns, err := m.make(slotHost(9))
	if err != nil {
		t.Fatalf("after the helper died: %v", err)
	}
	ns.Close()
	m.mu.Lock()
	next := m.cmd.Process.Pid
	m.mu.Unlock()
	if next == helper {
		t.Error("the dead helper was not replaced")
	}

	m.close()
	if err := syscall.Kill(next, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("the helper outlived close: kill(0) = %v", err)
	}
}
