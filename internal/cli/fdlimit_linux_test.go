// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package cli

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/corral-dev/corral/internal/testutil"
)

// TestRaiseOpenFiles: the server's open-file limit goes to the kernel's
// fs.nr_open (at most maxOpenFiles), soft and hard; an unreadable or
// hostile nr_open file only keeps it at maxOpenFiles; it never lowers one.
func TestRaiseOpenFiles(t *testing.T) {
	testutil.RequireRoot(t)
	var before unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &before); err != nil {
		t.Fatal(err)
	}
	nrOpen := filepath.Join(t.TempDir(), "nr_open")
	// Lower than the limit in force: nothing is lowered.
	if err := os.WriteFile(nrOpen, []byte(strconv.FormatUint(before.Max/2, 10)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if n, err := raiseOpenFiles(nrOpen); err != nil || n != before.Max {
		t.Fatalf("raiseOpenFiles with a lower nr_open = %d, %v; want the hard limit %d", n, err, before.Max)
	}
	// Soft goes to hard whatever happens; hard goes up only with
	// CAP_SYS_RESOURCE (root in a container often lacks it, as on the
	// machines CI runs on: then the raise is refused and said so by the
	// limit returned, never an error).
	want := before.Max
	if canRaiseLimits(t) {
		want = min(before.Max+1000, maxOpenFiles)
	}
	if err := os.WriteFile(nrOpen, []byte(strconv.FormatUint(min(before.Max+1000, maxOpenFiles), 10)), 0o600); err != nil {
		t.Fatal(err)
	}
	n, err := raiseOpenFiles(nrOpen)
	var after unix.Rlimit
	_ = unix.Getrlimit(unix.RLIMIT_NOFILE, &after)
	if err != nil || n != want || after.Cur != want || after.Max != want {
		t.Fatalf("raiseOpenFiles = %d, %v; limit %d/%d, want %d/%d", n, err, after.Cur, after.Max, want, want)
	}
	for _, hostile := range []string{"", "-5", "not a number", "18446744073709551616"} {
		if err := os.WriteFile(nrOpen, []byte(hostile), 0o600); err != nil {
			t.Fatal(err)
		}
		if n, err := raiseOpenFiles(nrOpen); err != nil || n < want || n > maxOpenFiles {
			t.Errorf("nr_open %q: raiseOpenFiles = %d, %v; want between %d and %d", hostile, n, err, want, maxOpenFiles)
		}
	}
}

// canRaiseLimits reports whether this process has CAP_SYS_RESOURCE.
func canRaiseLimits(t *testing.T) bool {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if hex, ok := strings.CutPrefix(line, "CapEff:"); ok {
			caps, err := strconv.ParseUint(strings.TrimSpace(hex), 16, 64)
			if err != nil {
				t.Fatal(err)
			}
			return caps&(1<<unix.CAP_SYS_RESOURCE) != 0
		}
	}
	t.Fatal("no CapEff in /proc/self/status")
	return false
}
