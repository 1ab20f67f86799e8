// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package cli

import (
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// maxOpenFiles is the open-file limit the server asks for: a native
// sandbox holds four of the server's descriptors (its network namespace,
// a pidfd, the console and exit pipes), so the usual 1024 or 20,000 ends
// creates in the hundreds or the low thousands with "too many open files".
const maxOpenFiles = 1 << 20

// raiseOpenFiles raises the process's open-file limit, soft and hard, to
// maxOpenFiles or the kernel's fs.nr_open, whichever is lower. Raising
// the hard limit needs CAP_SYS_RESOURCE; without it the soft limit goes
// to the hard one (which Go's runtime has already done). It returns the
// soft limit now in force. Sandboxes do not inherit it: their runtime
// spec sets their own.
func raiseOpenFiles(nrOpenPath string) (uint64, error) {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		return 0, err
	}
	want := uint64(maxOpenFiles)
	if b, err := os.ReadFile(nrOpenPath); err == nil {
		if n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64); err == nil && n < want {
			want = n
		}
	}
	if lim.Max < want {
		if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: want, Max: want}); err == nil {
			return want, nil
		}
	}
	if lim.Cur < lim.Max {
		if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: lim.Max, Max: lim.Max}); err != nil {
			return lim.Cur, err
		}
		return lim.Max, nil
	}
	return lim.Cur, nil
}
