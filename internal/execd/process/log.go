// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package process

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"sync"
)

// Stream names an output stream of a process.
type Stream byte

// The streams.
const (
	Stdout Stream = 1
	Stderr Stream = 2
)

func (s Stream) String() string {
	if s == Stderr {
		return "stderr"
	}
	return "stdout"
}

// indexEntry is one record of the index file: which stream wrote bytes
// [off, off+n) of the combined output.
const indexEntrySize = 16

// Log is a command's output, retained on disk: the combined bytes in arrival
// order (what the logs endpoint serves, with byte-offset cursors) and an
// index of which stream wrote each record (what streams replay). Appending
// never blocks on readers, and readers never hold output in memory beyond
// one record, so output of any size costs disk, not heap.
type Log struct {
	data   *os.File
	dataFD int // data's descriptor, for splice
	index  *os.File

	// mu guards the fields below.
	mu      sync.Mutex
	size    int64
	records int64
	closed  bool
	err     error
	// changed is closed (and replaced) on every append and on close.
	changed chan struct{}
}

// CreateLog creates an empty log in dir.
func CreateLog(dir string) (*Log, error) {
	data, err := os.OpenFile(filepath.Join(dir, "output"), os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, err
	}
	index, err := os.OpenFile(filepath.Join(dir, "index"), os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o600)
	if err != nil {
		data.Close()
		return nil, err
	}
	return &Log{data: data, dataFD: int(data.Fd()), index: index, changed: make(chan struct{})}, nil
}

// Append records p as output of stream s.
func (l *Log) Append(s Stream, p []byte) error {
	if len(p) == 0 {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return l.err
	}
	if _, err := l.data.WriteAt(p, l.size); err != nil {
		l.err = fmt.Errorf("retain output: %w", err)
		return l.err
	}
	var e [indexEntrySize]byte
	e[0] = byte(s)
	binary.LittleEndian.PutUint32(e[4:], uint32(len(p)))
	binary.LittleEndian.PutUint64(e[8:], uint64(l.size))
	if _, err := l.index.WriteAt(e[:], l.records*indexEntrySize); err != nil {
		l.err = fmt.Errorf("retain output: %w", err)
		return l.err
	}
	l.size += int64(len(p))
	l.records++
	l.notifyLocked()
	return nil
}

func (l *Log) notifyLocked() {
	close(l.changed)
	l.changed = make(chan struct{})
}

// Finish marks the log complete: no more appends will come.
func (l *Log) Finish() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.closed {
		l.closed = true
		l.notifyLocked()
	}
}

// Close releases the files.
func (l *Log) Close() error {
	l.Finish()
	return errors.Join(l.data.Close(), l.index.Close())
}

// Size returns the number of bytes retained so far.
func (l *Log) Size() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.size
}

// Err returns the error that stopped retention, if any.
func (l *Log) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// Reader returns the combined output from off to the current end, and the
// end offset (the next cursor).
func (l *Log) Reader(off int64) (io.Reader, int64) {
	end := l.Size()
	off = min(max(off, 0), end)
	return io.NewSectionReader(l.data, off, end-off), end
}

// Record is one append: Data came from Stream and starts at Offset of the
// combined output.
type Record struct {
	Stream Stream
	Offset int64
	Data   []byte
}

func (l *Log) snapshot() (records int64, closed bool, changed <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.records, l.closed, l.changed
}

func (l *Log) entry(i int64) (s Stream, off int64, n int, err error) {
	var e [indexEntrySize]byte
	if _, err := l.index.ReadAt(e[:], i*indexEntrySize); err != nil {
		return 0, 0, 0, err
	}
	return Stream(e[0]), int64(binary.LittleEndian.Uint64(e[8:])), int(binary.LittleEndian.Uint32(e[4:])), nil
}

// firstRecordEndingAfter returns the index of the first record whose end
// is past off.
func (l *Log) firstRecordEndingAfter(off, records int64) (int64, error) {
	var ferr error
	i := sort.Search(int(records), func(i int) bool {
		_, o, n, err := l.entry(int64(i))
		if err != nil {
			ferr = err
			return true
		}
		return o+int64(n) > off
	})
	return int64(i), ferr
}

// Follow calls fn with every record that ends past from, in order, and then
// with new records as they are appended, until the log is finished and
// fully read, or stop is closed and the records appended before that are
// read (nil), or ctx ends. Record data is only valid during the call.
func (l *Log) Follow(ctx context.Context, from int64, stop <-chan struct{}, fn func(Record) error) error {
	records, _, _ := l.snapshot()
	i, err := l.firstRecordEndingAfter(from, records)
	if err != nil {
		return err
	}
	buf := make([]byte, 64<<10)
	limit := int64(-1) // records to deliver once stop is seen
	for {
		records, closed, changed := l.snapshot()
		if limit >= 0 {
			records = min(records, limit)
		}
		for ; i < records; i++ {
			s, off, n, err := l.entry(i)
			if err != nil {
				return err
			}
			if n > len(buf) {
				buf = make([]byte, n)
			}
			if _, err := l.data.ReadAt(buf[:n], off); err != nil {
				return err
			}
			if err := fn(Record{Stream: s, Offset: off, Data: buf[:n]}); err != nil {
				return err
			}
		}
		if closed || limit >= 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-stop:
			limit, _, _ = l.snapshot()
		case <-changed:
		}
	}
}
