// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package process

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// pipeSize is the capacity asked for each output pipe: a command writing
// fast runs ahead of execd by up to this much, and each move into the log
// is larger.
const pipeSize = 1 << 20

// growPipe asks the kernel for a larger pipe; failing that, the default
// capacity (64 KiB) serves.
func growPipe(f *os.File) {
	if rc, err := f.SyscallConn(); err == nil {
		_ = rc.Control(func(fd uintptr) { _, _ = unix.FcntlInt(fd, unix.F_SETPIPE_SZ, pipeSize) })
	}
}

// pipeHolds reports whether the read end f still holds unread bytes
// (FIONREAD, which Linux names TIOCINQ). A closed f holds nothing.
func pipeHolds(f *os.File) bool {
	rc, err := f.SyscallConn()
	if err != nil {
		return false
	}
	n := 0
	if rc.Control(func(fd uintptr) { n, _ = unix.IoctlGetInt(int(fd), unix.TIOCINQ) }) != nil {
		return false
	}
	return n > 0
}

// errNoSplice reports that the kernel cannot splice into the log's file.
var errNoSplice = errors.New("splice unsupported")

// appendFromPipe moves what the pipe fd holds, up to max bytes, to the end
// of the log without copying it through user space, and indexes it as one
// record of stream s. It returns unix.EAGAIN when the pipe is empty, and
// 0, nil at the end of the pipe.
func (l *Log) appendFromPipe(s Stream, fd int, max int) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return 0, l.err
	}
	off := l.size
	n, err := unix.Splice(fd, nil, l.dataFD, &off, max, unix.SPLICE_F_NONBLOCK|unix.SPLICE_F_MOVE)
	if err != nil {
		if errors.Is(err, unix.EINVAL) {
			return 0, errNoSplice
		}
		if !errors.Is(err, unix.EAGAIN) && !errors.Is(err, unix.EINTR) {
			l.err = fmt.Errorf("retain output: %w", err)
		}
		return 0, err
	}
	if n == 0 {
		return 0, nil
	}
	var e [indexEntrySize]byte
	e[0] = byte(s)
	binary.LittleEndian.PutUint32(e[4:], uint32(n))
	binary.LittleEndian.PutUint64(e[8:], uint64(l.size))
	if _, err := l.index.WriteAt(e[:], l.records*indexEntrySize); err != nil {
		l.err = fmt.Errorf("retain output: %w", err)
		return 0, l.err
	}
	l.size += n
	l.records++
	l.notifyLocked()
	return int(n), nil
}
