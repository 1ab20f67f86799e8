// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package files

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"testing/iotest"
	"time"
)

// TestBlockWriterWritesEverything: what is copied in, by reads of any
// size or by writes, is the file's content, in order.
func TestBlockWriterWritesEverything(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	data := make([]byte, 5*blockSize+writebackEvery+123)
	for i := range data {
		data[i] = byte(rng.IntN(256))
	}
	for name, copyIn := range map[string]func(w *blockWriter) error{
		"ReadFrom, large reads": func(w *blockWriter) error { _, err := w.ReadFrom(bytes.NewReader(data)); return err },
		"ReadFrom, small reads": func(w *blockWriter) error {
			_, err := w.ReadFrom(iotest.HalfReader(iotest.DataErrReader(bytes.NewReader(data))))
			return err
		},
		"Write, odd sizes": func(w *blockWriter) error {
			for rest := data; len(rest) > 0; {
				n := min(len(rest), 1+rng.IntN(3*blockSize))
				if k, err := w.Write(rest[:n]); k != n || err != nil {
					return err
				}
				rest = rest[n:]
			}
			return nil
		},
	} {
		f, err := os.Create(filepath.Join(t.TempDir(), "f"))
		if err != nil {
			t.Fatal(err)
		}
		w := newBlockWriter(f)
		if err := copyIn(w); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := w.Close(); err != nil {
			t.Fatalf("%s: close: %v", name, err)
		}
		got, err := os.ReadFile(f.Name())
		f.Close()
		if err != nil || !bytes.Equal(got, data) {
			t.Errorf("%s: the file has %d bytes (%v), want the %d written, equal", name, len(got), err, len(data))
		}
	}
}

// TestBlockWriterFails: a write that fails stops the copy with its error
// (not a hang with every block queued), and its goroutine ends.
func TestBlockWriterFails(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path) // read-only: every write fails
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	before := runtime.NumGoroutine()
	w := newBlockWriter(f)
	_, err = io.Copy(w, io.LimitReader(zeros{}, 64*blockSize))
	if err == nil {
		t.Fatal("the copy into a read-only file succeeded")
	}
	if cerr := w.Close(); !errors.Is(cerr, err) && cerr.Error() != err.Error() {
		t.Errorf("Close: %v, want the copy's error %v", cerr, err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Errorf("%d goroutines after, %d before: the writer's goroutine is left", n, before)
	}
}

type zeros struct{}

func (zeros) Read(b []byte) (int, error) { clear(b); return len(b), nil }
