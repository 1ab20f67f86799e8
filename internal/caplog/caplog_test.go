// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package caplog

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestWriterStaysUnderItsLimit(t *testing.T) {
	t.Parallel()
	for _, flag := range []int{os.O_APPEND, 0} {
		t.Run(fmt.Sprintf("flags=%d", flag), func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "log")
			f, err := os.OpenFile(p, os.O_CREATE|os.O_RDWR|flag, 0o600)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			const limit = 64 << 10
			w := New(f, limit)
			var last string
			for i := range 20000 {
				last = fmt.Sprintf("line %d of a program that never stops printing\n", i)
				if n, err := w.Write([]byte(last)); err != nil || n != len(last) {
					t.Fatalf("Write = %d, %v", n, err)
				}
				if fi, _ := f.Stat(); fi.Size() > limit {
					t.Fatalf("after line %d the file is %d bytes, over %d", i, fi.Size(), limit)
				}
			}
			b, _ := os.ReadFile(p)
			if !strings.HasPrefix(string(b), "[corral: this log keeps at most 65536 bytes; ") {
				t.Errorf("the file does not say that output was dropped: %q", b[:80])
			}
			if !strings.HasSuffix(string(b), last) {
				t.Errorf("the newest line is missing: ends %q", b[len(b)-80:])
			}
			// Only whole lines survive behind the marker.
			lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
			for _, l := range lines[1:] {
				if !strings.HasPrefix(l, "line ") {
					t.Fatalf("a cut line survived: %q", l)
				}
			}
		})
	}
}

func TestWriterTrimsOneHugeWrite(t *testing.T) {
	t.Parallel()
	p := filepath.Join(t.TempDir(), "log")
	f, err := os.OpenFile(p, os.O_CREATE|os.O_RDWR|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := New(f, 8192)
	big := append(bytes.Repeat([]byte("x"), 1<<20), []byte("END\n")...)
	if n, err := w.Write(big); err != nil || n != len(big) {
		t.Fatalf("Write = %d, %v", n, err)
	}
	if _, err := w.Write([]byte("after\n")); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(p)
	if len(b) > 8192 || !strings.HasSuffix(string(b), "END\nafter\n") || !strings.HasPrefix(string(b), "[corral: ") {
		t.Fatalf("file = %d bytes ending %q", len(b), b[max(0, len(b)-20):])
	}
}

func TestWriterOnAWriteOnlyFile(t *testing.T) {
	t.Parallel()
	p := filepath.Join(t.TempDir(), "log")
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := New(f, 4096)
	for range 1000 {
		if _, err := w.Write([]byte("0123456789\n")); err != nil {
			t.Fatal(err)
		}
	}
	b, _ := os.ReadFile(p)
	if len(b) > 4096 || !strings.HasPrefix(string(b), "[corral: ") || !strings.HasSuffix(string(b), "0123456789\n") {
		t.Fatalf("file = %d bytes: %q", len(b), b[:min(len(b), 80)])
	}
}

// TestOpenPathHoldsNoDescriptorWhileIdle: a Writer of OpenPath keeps its
// file open only between a Write and Idle, keeps the size across idles
// (and across Writers, as after a restart), stays under its limit, and
// refuses a link or a pipe in its file's place.
func TestOpenPathHoldsNoDescriptorWhileIdle(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "console.log")
	const limit = 8 << 10
	w, err := OpenPath(p, limit)
	if err != nil {
		t.Fatal(err)
	}
	open := func() int {
		n := 0
		fds, _ := os.ReadDir("/proc/self/fd")
		for _, fd := range fds {
			if l, _ := os.Readlink(filepath.Join("/proc/self/fd", fd.Name())); l == p {
				n++
			}
		}
		return n
	}
	if n := open(); n != 0 {
		t.Fatalf("a new Writer holds %d descriptors of its file", n)
	}
	var last string
	for i := range 2000 {
		last = fmt.Sprintf("line %d\n", i)
		if _, err := w.Write([]byte(last)); err != nil {
			t.Fatal(err)
		}
		if n := open(); n != 1 {
			t.Fatalf("after a write %d descriptors, want 1", n)
		}
		if i%7 == 0 {
			w.Idle()
			if n := open(); n != 0 {
				t.Fatalf("an idle Writer holds %d descriptors", n)
			}
		}
		if i == 1000 {
			// A new Writer of the same file (a restarted server) goes on
			// from its size.
			w.Idle()
			if w, err = OpenPath(p, limit); err != nil {
				t.Fatal(err)
			}
		}
		if fi, _ := os.Stat(p); fi.Size() > limit {
			t.Fatalf("after line %d the file is %d bytes, over %d", i, fi.Size(), limit)
		}
	}
	w.Idle()
	b, _ := os.ReadFile(p)
	if !strings.HasPrefix(string(b), "[corral: this log keeps at most 8192 bytes; ") || !strings.HasSuffix(string(b), last) {
		t.Errorf("the log does not keep the newest output behind the marker: %q…%q", b[:60], b[len(b)-20:])
	}

	// A link or a pipe put in the file's place is never written through.
	target := filepath.Join(dir, "target")
	if err := os.WriteFile(target, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, p); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte("through a link\n")); err == nil {
		t.Error("a write went through a symbolic link")
	}
	if _, err := OpenPath(p, limit); err == nil {
		t.Error("OpenPath opened a symbolic link")
	}
	if b, _ := os.ReadFile(target); len(b) != 0 {
		t.Errorf("the link's target was written: %q", b)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenPath(fifo, limit); err == nil {
		t.Error("OpenPath opened a named pipe")
	}
}
