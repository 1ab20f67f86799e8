// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package oci

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// The user namespaces of ID ranges are made by a helper process, `corral
// userns-maker`, not by the server itself. Making one takes a process
// cloned into a new user namespace, and Go clones such a process with a
// full fork (it cannot share its parent's memory while the parent writes
// the child's ID maps): a fork of the server copies its page tables, and
// each page the server writes afterwards faults once. That cost grows
// with the server's memory, which grows with its sandboxes; it was a
// tenth of the machine's CPU at 1,500 sandboxes (docs/benchmarks.md). The
// helper stays small, so its forks cost the same at any count.
//
// The protocol is this package's own, over a SOCK_SEQPACKET socket pair
// (one message per request and per answer, so no framing to write): the
// server sends the range's first host ID (4 bytes, big-endian); the
// helper answers "ok" with the namespace's descriptor attached, or an
// error's text. The helper ends when the server's end closes.

// usernsMaker is the server's side of the helper: it starts the helper
// when first asked and again if it dies. Requests are made one at a time.
type usernsMaker struct {
	binary string

	// mu guards the fields below and serialises requests.
	mu   sync.Mutex
	cmd  *exec.Cmd
	conn int // the server's end; -1: not started
}

// makerAnswerTimeout bounds one answer of the helper: a namespace takes it
// a few milliseconds.
const makerAnswerTimeout = 30 * time.Second

// makerError is the helper's refusal, as opposed to a broken helper.
type makerError struct{ msg string }

func (e *makerError) Error() string { return "user namespace: " + e.msg }

func newUsernsMaker(binary string) *usernsMaker { return &usernsMaker{binary: binary, conn: -1} }

// make returns a user namespace mapping 0-65535 to host IDs from first.
func (m *usernsMaker) make(first uint32) (*os.File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for attempt := 0; ; attempt++ {
		if m.conn < 0 {
			if err := m.start(); err != nil {
				return nil, err
			}
		}
		f, err := m.ask(first)
		var refused *makerError
		if err == nil || errors.As(err, &refused) || attempt == 1 {
			return f, err
		}
		// Broken (it died, or answered nonsense): a new one, once.
		m.stop()
	}
}

// start starts the helper, m.mu held.
func (m *usernsMaker) start() error {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("user namespace helper: %w", err)
	}
	theirs := os.NewFile(uintptr(fds[1]), "userns-maker")
	defer theirs.Close()
	cmd := exec.Command(m.binary, "userns-maker")
	cmd.ExtraFiles = []*os.File{theirs} // its fd 3
	if err := cmd.Start(); err != nil {
		unix.Close(fds[0])
		return fmt.Errorf("user namespace helper: %w", err)
	}
	m.cmd, m.conn = cmd, fds[0]
	return nil
}

// stop ends the helper, m.mu held: closing its socket ends it.
func (m *usernsMaker) stop() {
	if m.conn < 0 {
		return
	}
	unix.Close(m.conn)
	m.conn = -1
	done := make(chan struct{})
	go func() { _ = m.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = m.cmd.Process.Kill()
		<-done
	}
	m.cmd = nil
}

// close ends the helper.
func (m *usernsMaker) close() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.stop()
}

// ask sends one request and reads its answer, m.mu held.
func (m *usernsMaker) ask(first uint32) (*os.File, error) {
	req := binary.BigEndian.AppendUint32(nil, first)
	if err := unix.Sendmsg(m.conn, req, nil, nil, unix.MSG_NOSIGNAL); err != nil {
		return nil, fmt.Errorf("user namespace helper: %w", err)
	}
	pfd := []unix.PollFd{{Fd: int32(m.conn), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(pfd, int(makerAnswerTimeout.Milliseconds()))
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("user namespace helper: %w", err)
		}
		if n == 0 {
			return nil, errors.New("user namespace helper: no answer")
		}
		break
	}
	buf, oob := make([]byte, 512), make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := unix.Recvmsg(m.conn, buf, oob, unix.MSG_CMSG_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("user namespace helper: %w", err)
	}
	var fds []int
	if oobn > 0 {
		if msgs, err := unix.ParseSocketControlMessage(oob[:oobn]); err == nil {
			for _, msg := range msgs {
				if got, err := unix.ParseUnixRights(&msg); err == nil {
					fds = append(fds, got...)
				}
			}
		}
	}
	switch answer := string(buf[:n]); {
	case answer == "ok" && len(fds) == 1:
		return os.NewFile(uintptr(fds[0]), "userns"), nil
	case n == 0:
		closeAll(fds)
		return nil, errors.New("user namespace helper: it ended")
	case strings.HasPrefix(answer, "error: ") && len(fds) == 0:
		return nil, &makerError{msg: strings.TrimPrefix(answer, "error: ")}
	default:
		closeAll(fds)
		return nil, fmt.Errorf("user namespace helper: unexpected answer %q with %d descriptors", answer, len(fds))
	}
}

func closeAll(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

// ServeUsernsMaker is the helper (`corral userns-maker`): it answers the
// requests on the socket at fd until the server closes its end, making
// each namespace from a process of binary. A request for anything but the
// start of a slot's range is refused.
func ServeUsernsMaker(fd int, binary string) error {
	buf := make([]byte, 16)
	for {
		n, _, _, _, err := unix.Recvmsg(fd, buf, nil, 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return err
		}
		if n == 0 {
			return nil // the server closed its end
		}
		var answer []byte
		var rights []byte
		first, err := parseMakerRequest(buf[:n])
		var ns *os.File
		if err == nil {
			ns, err = newUserns(binary, first)
		}
		if err != nil {
			answer = []byte("error: " + strings.TrimPrefix(err.Error(), "user namespace: "))
		} else {
			answer, rights = []byte("ok"), unix.UnixRights(int(ns.Fd()))
		}
		err = unix.Sendmsg(fd, answer, rights, nil, unix.MSG_NOSIGNAL)
		if ns != nil {
			ns.Close()
		}
		if err != nil {
			return err
		}
	}
}

// parseMakerRequest reads a request: the first host ID of a slot.
func parseMakerRequest(b []byte) (uint32, error) {
	if len(b) != 4 {
		return 0, fmt.Errorf("a request of %d bytes, want 4", len(b))
	}
	first := binary.BigEndian.Uint32(b)
	if first < usernsFirst || (first-usernsFirst)%usernsSize != 0 || (first-usernsFirst)/usernsSize >= usernsSlots {
		return 0, fmt.Errorf("host ID %d starts no range", first)
	}
	return first, nil
}
