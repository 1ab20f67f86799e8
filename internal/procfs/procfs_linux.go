// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

// Package procfs identifies host processes across pid reuse (a pid plus
// its start time) and waits for processes that are not our children.
package procfs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// StartTime reads field 22 of /proc/PID/stat: the start time that, with
// the pid, identifies a process across pid reuse. A process that has
// exited but is not reaped yet (its parent may be gone, and nothing reaps
// orphans on some hosts) is an error.
func StartTime(pid int) (uint64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// The command name may contain spaces and parentheses; fields start
	// after the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("bad /proc/%d/stat", pid)
	}
	fields := strings.Fields(string(b[i+1:]))
	if len(fields) < 20 {
		return 0, fmt.Errorf("bad /proc/%d/stat", pid)
	}
	if fields[0] == "Z" || fields[0] == "X" {
		return 0, fmt.Errorf("process %d has exited", pid)
	}
	return strconv.ParseUint(fields[19], 10, 64)
}

// Alive reports whether the process with pid and start time still runs.
func Alive(pid int, start uint64) bool {
	st, err := StartTime(pid)
	return err == nil && st == start
}

// WaitExit returns once the process pid (with start time start) has
// exited, or ctx ends. It uses a pidfd through the Go poller, so waiting
// costs no thread, and works for processes that are not our children.
func WaitExit(ctx context.Context, pid int, start uint64) error {
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if errors.Is(err, unix.ESRCH) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("pidfd: %w", err)
	}
	f := os.NewFile(uintptr(fd), "pidfd")
	defer f.Close()
	// The pid may have been reused between the caller's check and here.
	if !Alive(pid, start) {
		return nil
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	stop := context.AfterFunc(ctx, func() { _ = f.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	err = rc.Read(func(fd uintptr) bool {
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, _ := unix.Poll(pfd, 0)
		return n > 0
	})
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// Cmdline returns the arguments of process pid (at most 64 KiB of them).
func Cmdline(pid int) ([]string, error) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, 64<<10)
	n, err := io.ReadFull(f, b)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return nil, err
	}
	if n == 0 {
		return nil, nil // a kernel thread, or a process being reaped
	}
	return strings.Split(strings.TrimSuffix(string(b[:n]), "\x00"), "\x00"), nil
}

// Proc is a host process, identified across pid reuse.
type Proc struct {
	Pid       int
	StartTime uint64
}

// Find lists the host's processes whose arguments match. It reads every
// process's command line: for the rare cases where nothing recorded the
// pid (a server killed between starting a process and writing it down).
func Find(match func(args []string) bool) ([]Proc, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var out []Proc
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 1 || pid == os.Getpid() {
			continue
		}
		args, err := Cmdline(pid)
		if err != nil || len(args) == 0 || !match(args) {
			continue
		}
		if st, err := StartTime(pid); err == nil {
			out = append(out, Proc{Pid: pid, StartTime: st})
		}
	}
	return out, nil
}

// Runs reports whether process pid runs the executable file at path
// (the same file: device and inode), as seen through /proc/PID/exe.
func Runs(pid int, path string) (bool, error) {
	var want, got unix.Stat_t
	if err := unix.Stat(path, &want); err != nil {
		return false, err
	}
	if err := unix.Stat("/proc/"+strconv.Itoa(pid)+"/exe", &got); err != nil {
		return false, err
	}
	return got.Dev == want.Dev && got.Ino == want.Ino, nil
}
