// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

// Package caplog is a log file that stays under a size however much is
// written to it: when it would pass its limit, the older part is dropped
// and a line at the top says how much. PID 1 keeps a sandbox's console
// log with it, and the egress enforcer its own log, so that a sandbox
// that prints (or makes its enforcer log) without end cannot fill the
// file system they share with every other sandbox.
package caplog

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"
)

// Writer writes to a file that stays under a size: a write that would
// take it past the limit first drops all but the newest quarter of the
// limit (from a line boundary where there is one), behind a line saying
// how much was dropped. It is safe for concurrent use.
type Writer struct {
	// mu guards the fields below and the file's content.
	mu sync.Mutex
	f  *os.File
	// path, for a Writer of OpenPath: f is open only between a Write and
	// the next Idle.
	path    string
	limit   int64
	size    int64
	dropped int64
}

// New returns a Writer writing to f, which must be a regular file
// that only this writer writes to (opened O_APPEND or not). If f is open
// for writing only, the newest output cannot be kept when the limit is
// reached: all of it is dropped.
func New(f *os.File, limit int64) *Writer {
	c := &Writer{f: f, limit: max(limit, 4096)}
	if fi, err := f.Stat(); err == nil {
		c.size = fi.Size()
	}
	return c
}

// OpenPath returns a Writer to the regular file at path (made if
// missing, never through a symbolic link) that holds no descriptor while
// idle: a Write opens the file, Idle closes it. A server that keeps the
// logs of thousands of sandboxes, most of them quiet, would otherwise
// hold a descriptor for each.
func OpenPath(path string, limit int64) (*Writer, error) {
	c := &Writer{path: path, limit: max(limit, 4096)}
	size, err := c.open()
	if err != nil {
		return nil, err
	}
	c.size = size
	c.Idle()
	return c, nil
}

// open opens the file of a Writer of OpenPath, c.mu held or not yet
// shared, and returns its size: a regular file, never a link or a pipe
// put in its place.
func (c *Writer) open() (int64, error) {
	f, err := os.OpenFile(c.path, os.O_CREATE|os.O_RDWR|os.O_APPEND|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return 0, err
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = fmt.Errorf("%s: not a regular file", c.path)
	}
	if err != nil {
		f.Close()
		return 0, err
	}
	c.f = f
	return fi.Size(), nil
}

// Idle closes the file of a Writer of OpenPath until the next Write; a
// Writer of New keeps its file.
func (c *Writer) Idle() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.path != "" && c.f != nil {
		_ = c.f.Close()
		c.f = nil
	}
}

// Write implements io.Writer. It reports all of p written even when part
// of it was dropped to stay under the limit.
func (c *Writer) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.f == nil {
		if _, err := c.open(); err != nil {
			return 0, err
		}
	}
	n := len(p)
	trimmed := int64(len(p)) > c.limit/2
	if trimmed {
		c.dropped += int64(len(p)) - c.limit/2
		p = p[int64(len(p))-c.limit/2:]
	}
	if trimmed || c.size+int64(len(p)) > c.limit {
		if err := c.rotate(); err != nil {
			return 0, err
		}
	}
	k, err := c.f.Write(p)
	c.size += int64(k)
	if err != nil {
		return 0, err
	}
	return n, nil
}

// rotate keeps the newest quarter of the limit, behind a line that says
// how much came before it.
func (c *Writer) rotate() error {
	keep := min(c.size, c.limit/4)
	tail := make([]byte, keep)
	k, err := c.f.ReadAt(tail, c.size-keep)
	if err != nil && !errors.Is(err, io.EOF) {
		// A file open for writing only: nothing of it can be kept.
		k = 0
	}
	tail = tail[:k]
	if i := bytes.IndexByte(tail, '\n'); i >= 0 && i < len(tail)-1 {
		tail = tail[i+1:]
	}
	c.dropped += c.size - int64(len(tail))
	if err := c.f.Truncate(0); err != nil {
		return err
	}
	// Without O_APPEND the offset would stay where it was.
	if _, err := c.f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	head := fmt.Appendf(nil, "[corral: this log keeps at most %d bytes; %d earlier bytes were dropped]\n", c.limit, c.dropped)
	k1, err := c.f.Write(head)
	c.size = int64(k1)
	if err != nil {
		return err
	}
	k2, err := c.f.Write(tail)
	c.size += int64(k2)
	return err
}
