// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package files

import (
	"errors"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// blockSize is the size of a blockWriter's blocks; blocks is how many it
// has (one being filled, the rest being written or waiting to be).
const (
	blockSize = 256 << 10
	blocks    = 4
	// writebackEvery is how many written bytes start the disk's
	// writeback of them, so the fsync at the end waits for the last few
	// only.
	writebackEvery = 2 << 20
)

// blockWriter writes what is copied into it to a file in large blocks,
// from a goroutine of its own: the next block is read from the network
// while the last one goes to the file, and the file's writeback starts as
// it grows instead of all at the final fsync. A multipart part reads a
// few KiB at a time; writing each at once would cost a system call per
// read and leave the reading and the writing taking turns.
type blockWriter struct {
	f    *os.File
	cur  []byte
	free chan []byte
	full chan []byte
	// done carries the writing goroutine's first error (or nil) once it
	// has written every block; failed is closed as soon as it fails.
	done   chan error
	failed chan struct{}
	err    error
	closed bool
	// made is how many blocks exist: they are made as the copy needs
	// them, so a small file takes one.
	made int
}

func newBlockWriter(f *os.File) *blockWriter {
	w := &blockWriter{f: f, free: make(chan []byte, blocks), full: make(chan []byte, blocks),
		done: make(chan error, 1), failed: make(chan struct{})}
	go w.write()
	return w
}

func (w *blockWriter) write() {
	var off, synced int64
	var err error
	for b := range w.full {
		if err == nil {
			var n int
			n, err = w.f.Write(b)
			off += int64(n)
			if err != nil {
				close(w.failed)
			} else if off-synced >= writebackEvery {
				// Only a start: where the kernel or a seccomp profile
				// refuses, the final fsync does it all.
				_ = unix.SyncFileRange(int(w.f.Fd()), synced, off-synced, unix.SYNC_FILE_RANGE_WRITE)
				synced = off
			}
		}
		w.free <- b[:0]
	}
	w.done <- err
}

// ReadFrom reads r into the blocks directly, with no copy between.
func (w *blockWriter) ReadFrom(r io.Reader) (int64, error) {
	var total int64
	for {
		if len(w.cur) == cap(w.cur) {
			if err := w.handOff(); err != nil {
				return total, err
			}
		}
		n, err := r.Read(w.cur[len(w.cur):cap(w.cur)])
		w.cur = w.cur[:len(w.cur)+n]
		total += int64(n)
		if errors.Is(err, io.EOF) {
			return total, nil
		}
		if err != nil {
			return total, err
		}
	}
}

func (w *blockWriter) Write(p []byte) (int, error) {
	written := 0
	for len(p) > 0 {
		if len(w.cur) == cap(w.cur) {
			if err := w.handOff(); err != nil {
				return written, err
			}
		}
		n := copy(w.cur[len(w.cur):cap(w.cur)], p)
		w.cur = w.cur[:len(w.cur)+n]
		p, written = p[n:], written+n
	}
	return written, nil
}

// handOff queues the full block for writing and takes a free one, or
// makes one while fewer than blocks exist.
func (w *blockWriter) handOff() error {
	select {
	case <-w.failed:
		return w.Close()
	default:
	}
	if len(w.cur) > 0 {
		w.full <- w.cur
	}
	select {
	case w.cur = <-w.free:
	default:
		if w.made < blocks {
			w.made++
			w.cur = make([]byte, 0, blockSize)
		} else {
			w.cur = <-w.free
		}
	}
	return nil
}

// Close writes what is left and waits for every block to be written; it
// returns the first write error. The file stays open.
func (w *blockWriter) Close() error {
	if w.closed {
		return w.err
	}
	w.closed = true
	if len(w.cur) > 0 {
		w.full <- w.cur
		w.cur = nil
	}
	close(w.full)
	w.err = <-w.done
	return w.err
}
