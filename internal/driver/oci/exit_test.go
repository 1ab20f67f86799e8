// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package oci

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/corral-dev/corral/errdefs"
	"github.com/corral-dev/corral/internal/testutil"
)

// The exit code is read from the bundle, where no sandbox path leads; a
// sandbox made by an older corral wrote it into its status directory,
// which it could write, so what is there is read as hostile.
func TestExitCodeIgnoresWhatASandboxPlanted(t *testing.T) {
	t.Parallel()
	outside := filepath.Join(t.TempDir(), "host-file")
	if err := os.WriteFile(outside, []byte("42\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		plant  func(status string) error
		bundle string // the bundle's own exit file, "" for empty
		want   int    // -1: no exit recorded
	}{
		{"link to /dev/zero", func(s string) error { return os.Symlink("/dev/zero", filepath.Join(s, "exit")) }, "", -1},
		{"link to a host file", func(s string) error { return os.Symlink(outside, filepath.Join(s, "exit")) }, "", -1},
		{"fifo", func(s string) error { return syscall.Mkfifo(filepath.Join(s, "exit"), 0o600) }, "", -1},
		{"directory", func(s string) error { return os.Mkdir(filepath.Join(s, "exit"), 0o755) }, "", -1},
		{"huge file", func(s string) error { return os.WriteFile(filepath.Join(s, "exit"), make([]byte, 1<<20), 0o644) }, "", -1},
		{"not a code", func(s string) error { return os.WriteFile(filepath.Join(s, "exit"), []byte("999999\n"), 0o644) }, "", -1},
		{"the bundle's code wins", func(s string) error { return os.WriteFile(filepath.Join(s, "exit"), []byte("9\n"), 0o644) }, "3\n", 3},
		{"an older sandbox's code", func(s string) error { return os.WriteFile(filepath.Join(s, "exit"), []byte("5\n"), 0o644) }, "", 5},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			bundle := t.TempDir()
			status := filepath.Join(bundle, "status")
			if err := os.Mkdir(status, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(bundle, exitFile), []byte(tc.bundle), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := tc.plant(status); err != nil {
				t.Fatal(err)
			}
			type result struct {
				code int
				ok   bool
			}
			done := make(chan result, 1)
			go func() { ex, ok := exitCode(bundle); done <- result{ex.Code, ok} }()
			select {
			case r := <-done:
				got := r.code
				if !r.ok {
					got = -1
				}
				if got != tc.want {
					t.Fatalf("exitCode = %d, want %d", got, tc.want)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("exitCode blocked")
			}
			if ex := exitOf(bundle); tc.want == -1 && (ex.Code != 137 || ex.Reason != "killed") {
				t.Fatalf("exitOf = %+v, want a kill", ex)
			}
		})
	}
}

// Layers are named by their whole DiffID, so a deep image's lower
// directories do not fit in one mount option: they are passed one by one.
func TestMountOverlayOfManyLayers(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	dir := t.TempDir()
	var lowers []string
	for i := range 80 {
		l := filepath.Join(dir, "layers", fmt.Sprintf("%064x", i))
		if err := os.MkdirAll(l, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(l, fmt.Sprintf("f%d", i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		lowers = append([]string{l}, lowers...)
	}
	upper, work, target := filepath.Join(dir, "upper"), filepath.Join(dir, "work"), filepath.Join(dir, "rootfs")
	for _, d := range []string{upper, work, target} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := mountOverlay(lowers, upper, work, target); err != nil {
		t.Fatal(err)
	}
	defer unmount(target)
	for _, f := range []string{"f0", "f79"} {
		if _, err := os.Stat(filepath.Join(target, f)); err != nil {
			t.Errorf("%s of the stack is missing: %v", f, err)
		}
	}
}

// TestRuntimeWordsStayInTheLog: when runc fails before the entrypoint ran,
// what the console holds is runc's (host paths, descriptors): it goes to
// the error's cause, for the server's log, not to the user's message.
func TestRuntimeWordsStayInTheLog(t *testing.T) {
	t.Parallel()
	bundle, disk := t.TempDir(), t.TempDir()
	runcSaid := `level=error msg="runc run failed: error mounting \"/proc/6734/fd/16\" to rootfs"`
	if err := os.WriteFile(filepath.Join(disk, consoleFile), []byte(runcSaid+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d := &Driver{}
	err := d.startError(bundle, disk, fmt.Errorf("runc run: exit status 1"))
	var pe *errdefs.Error
	if !errors.As(err, &pe) || strings.Contains(pe.Message, "/proc/") || !errors.Is(err, errdefs.ErrUnavailable) {
		t.Fatalf("startError = %v, want an unavailable error without runc's words", err)
	}
	if !strings.Contains(errdefs.Detail(err), "/proc/6734/fd/16") {
		t.Errorf("the log's detail lacks runc's words: %s", errdefs.Detail(err))
	}
	// An entrypoint that exited is the user's: its words are the message.
	if err := os.WriteFile(filepath.Join(bundle, exitFile), []byte("3\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(disk, consoleFile), []byte("python: no module named x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := d.startError(bundle, disk, fmt.Errorf("exited")); !errors.As(err, &pe) || !strings.Contains(pe.Message, "no module named x") {
		t.Errorf("startError of an exited entrypoint = %v", err)
	}
}

// A runsc sandbox's exit code is in its own root, which anything in it
// can write: what is there is read as hostile, and never blocks.
func TestRunscExitCodeIsReadAsHostile(t *testing.T) {
	t.Parallel()
	outside := filepath.Join(t.TempDir(), "host-file")
	if err := os.WriteFile(outside, []byte("42\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	name := runscExit[1:]
	for _, tc := range []struct {
		name  string
		plant func(root string) error
		want  int // -1: none
	}{
		{"nothing", func(string) error { return nil }, -1},
		{"empty (made at start)", func(r string) error { return os.WriteFile(filepath.Join(r, name), nil, 0o600) }, -1},
		{"link to a host file", func(r string) error { return os.Symlink(outside, filepath.Join(r, name)) }, -1},
		{"link to /dev/zero", func(r string) error { return os.Symlink("/dev/zero", filepath.Join(r, name)) }, -1},
		{"fifo", func(r string) error { return syscall.Mkfifo(filepath.Join(r, name), 0o600) }, -1},
		{"huge file", func(r string) error { return os.WriteFile(filepath.Join(r, name), make([]byte, 1<<20), 0o600) }, -1},
		{"out of range", func(r string) error { return os.WriteFile(filepath.Join(r, name), []byte("256\n"), 0o600) }, -1},
		{"a code", func(r string) error { return os.WriteFile(filepath.Join(r, name), []byte("7\n"), 0o600) }, 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			if err := tc.plant(root); err != nil {
				t.Fatal(err)
			}
			done := make(chan int, 1)
			go func() {
				n, _, ok := runscExitCode(root)
				if !ok {
					n = -1
				}
				done <- n
			}()
			select {
			case got := <-done:
				if got != tc.want {
					t.Fatalf("runscExitCode = %d, want %d", got, tc.want)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("runscExitCode blocked")
			}
		})
	}
}
