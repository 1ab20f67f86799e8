// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package process

import "bytes"

// MaxLine is the longest line emitted as one event; a longer one is emitted
// in pieces of this size, so memory stays bounded whatever a program prints.
const MaxLine = 64 << 10

// Lines splits one stream's bytes into line events as OpenSandbox clients
// expect: one event per line with its terminator stripped; "\n", "\r\n"
// and a lone "\r" each end a line; an empty line is the text "\n". Each
// emitted line comes with end, the offset in the combined output just past
// its last byte (terminator included), so a reader that resumes from end
// neither loses nor repeats anything. The text passed to emit is only
// valid during the call.
type Lines struct {
	buf []byte
	// pendingCR is set when the last byte seen was '\r': the line is
	// emitted when the next byte shows whether a '\n' follows.
	pendingCR bool
	crEnd     int64
}

// Feed consumes data, which starts at offset off of the combined output,
// calling emit for each complete line.
func (l *Lines) Feed(data []byte, off int64, emit func(text []byte, end int64) error) error {
	i := 0
	if l.pendingCR && len(data) > 0 {
		l.pendingCR = false
		end := l.crEnd
		if data[0] == '\n' {
			i, end = 1, off+1
		}
		if err := l.emit(emit, end); err != nil {
			return err
		}
	}
	// nextCR and nextLF are the positions of the next '\r' and '\n' at or
	// after i (len(data) if none), each found once by a vectorised scan.
	nextCR, nextLF := -1, -1
	for i < len(data) {
		if nextCR < i {
			nextCR = indexFrom(data, i, '\r')
		}
		if nextLF < i {
			nextLF = indexFrom(data, i, '\n')
		}
		stop, j := min(nextCR, nextLF), 0
		if stop == len(data) {
			j = -1
		}
		// A line that outgrows MaxLine is emitted in pieces.
		for stop-i+len(l.buf) > MaxLine {
			take := MaxLine - len(l.buf)
			l.buf = append(l.buf, data[i:i+take]...)
			i += take
			if err := l.emitRaw(emit, off+int64(i)); err != nil {
				return err
			}
		}
		l.buf = append(l.buf, data[i:stop]...)
		if j < 0 {
			return nil
		}
		if data[stop] == '\n' {
			i = stop + 1
			if err := l.emit(emit, off+int64(i)); err != nil {
				return err
			}
			continue
		}
		// '\r': a line end; one '\n' right after it belongs to it.
		if stop+1 == len(data) {
			l.pendingCR, l.crEnd = true, off+int64(stop+1)
			return nil
		}
		i = stop + 1
		if data[i] == '\n' {
			i++
		}
		if err := l.emit(emit, off+int64(i)); err != nil {
			return err
		}
	}
	return nil
}

// indexFrom returns the index of c in data at or after i, or len(data).
func indexFrom(data []byte, i int, c byte) int {
	if k := bytes.IndexByte(data[i:], c); k >= 0 {
		return i + k
	}
	return len(data)
}

// Flush emits a final line without a terminator, if any; end is the offset
// just past the stream's last byte.
func (l *Lines) Flush(end int64, emit func(text []byte, end int64) error) error {
	if l.pendingCR {
		l.pendingCR = false
		return l.emit(emit, l.crEnd)
	}
	if len(l.buf) > 0 {
		return l.emitRaw(emit, end)
	}
	return nil
}

// emit ends a line at a terminator.
func (l *Lines) emit(emit func([]byte, int64) error, end int64) error {
	text := l.buf
	if len(text) == 0 {
		text = []byte{'\n'}
	}
	err := emit(text, end)
	l.buf = l.buf[:0]
	return err
}

// emitRaw emits the buffered bytes as they are (a piece of a long line, or
// a final unterminated line).
func (l *Lines) emitRaw(emit func([]byte, int64) error, end int64) error {
	err := emit(l.buf, end)
	l.buf = l.buf[:0]
	return err
}
