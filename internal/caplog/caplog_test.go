// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package caplog

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
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
