// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

// Package sse is the event-stream framing execd speaks and clients read:
// one JSON object per event, written as "data: {json}" and a blank line.
// The reader also accepts the raw "{json}" lines OpenSandbox's execd writes,
// ignores "event:", "id:", "retry:" and comment lines, and never buffers
// more than a bounded event. Server and SDK share it. Standard library only.
package sse

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// MaxEventSize bounds one event on the read side.
const MaxEventSize = 4 << 20

// Writer writes events to w.
type Writer struct {
	w   io.Writer
	buf bytes.Buffer
}

// NewWriter returns a Writer on w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// JSONAppender is implemented by events that encode themselves without
// reflection; Write uses it when present.
type JSONAppender interface {
	AppendJSON([]byte) []byte
}

// Write encodes v as one event and writes it with a single Write call.
func (w *Writer) Write(v any) error {
	w.buf.Reset()
	w.buf.WriteString("data: ")
	if a, ok := v.(JSONAppender); ok {
		w.buf.Write(a.AppendJSON(w.buf.AvailableBuffer()))
		w.buf.WriteString("\n\n")
	} else {
		enc := json.NewEncoder(&w.buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(v); err != nil {
			return err
		}
		// Encode ended the JSON with "\n"; one more ends the event.
		w.buf.WriteByte('\n')
	}
	_, err := w.w.Write(w.buf.Bytes())
	return err
}

// ErrEventTooLarge is returned for an event over MaxEventSize.
var ErrEventTooLarge = errors.New("sse: event too large")

// Reader reads events from a stream.
type Reader struct {
	r    *bufio.Reader
	data []byte
}

// NewReader returns a Reader on r.
func NewReader(r io.Reader) *Reader { return &Reader{r: bufio.NewReaderSize(r, 64<<10)} }

// Next returns the JSON of the next event, or io.EOF at the end of the
// stream. A "data:" event ends at a blank line; a raw JSON line is an event
// by itself.
func (r *Reader) Next() ([]byte, error) {
	r.data = r.data[:0]
	for {
		line, err := r.readLine()
		if err != nil {
			if errors.Is(err, io.EOF) && len(r.data) > 0 {
				return r.data, nil
			}
			return nil, err
		}
		switch {
		case len(line) == 0:
			if len(r.data) > 0 {
				return r.data, nil
			}
		case line[0] == ':':
		case bytes.HasPrefix(line, []byte("data:")):
			d := bytes.TrimPrefix(line[5:], []byte(" "))
			if len(r.data) > 0 {
				r.data = append(r.data, '\n')
			}
			r.data = append(r.data, d...)
			if len(r.data) > MaxEventSize {
				return nil, ErrEventTooLarge
			}
		case line[0] == '{' && len(r.data) == 0:
			return append(r.data, line...), nil
		case bytes.HasPrefix(line, []byte("event:")), bytes.HasPrefix(line, []byte("id:")), bytes.HasPrefix(line, []byte("retry:")):
		default:
			return nil, fmt.Errorf("sse: unexpected line %.40q", line)
		}
	}
}

// readLine reads one line without its terminator ("\n" or "\r\n").
func (r *Reader) readLine() ([]byte, error) {
	var line []byte
	for {
		chunk, isPrefix, err := r.r.ReadLine()
		if err != nil {
			return nil, err
		}
		line = append(line, chunk...)
		if len(line) > MaxEventSize {
			return nil, ErrEventTooLarge
		}
		if !isPrefix {
			return line, nil
		}
	}
}
