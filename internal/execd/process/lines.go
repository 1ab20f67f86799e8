// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package process

// MaxLine is the longest line emitted as one event; a longer one is emitted
// in pieces of this size, so memory stays bounded whatever a program prints.
const MaxLine = 64 << 10

// Lines splits one stream's bytes into line events as OpenSandbox clients
// expect: one event per line with its terminator stripped; "\n", "\r\n"
// and a lone "\r" each end a line; an empty line is the text "\n". Each
// emitted line comes with end, the offset in the combined output just past
// its last byte (terminator included), so a reader that resumes from end
// neither loses nor repeats anything.
type Lines struct {
	buf []byte
	// pendingCR is set when the last byte seen was '\r': the line is
	// emitted when the next byte shows whether a '\n' follows.
	pendingCR bool
	crEnd     int64
}

// Feed consumes data, which starts at offset off of the combined output,
// calling emit for each complete line.
func (l *Lines) Feed(data []byte, off int64, emit func(text string, end int64) error) error {
	start := 0
	for i, c := range data {
		pos := off + int64(i)
		if l.pendingCR {
			l.pendingCR = false
			if c == '\n' {
				if err := l.emit(emit, pos+1); err != nil {
					return err
				}
				start = i + 1
				continue
			}
			if err := l.emit(emit, l.crEnd); err != nil {
				return err
			}
		}
		switch c {
		case '\n':
			l.buf = append(l.buf, data[start:i]...)
			start = i + 1
			if err := l.emit(emit, pos+1); err != nil {
				return err
			}
		case '\r':
			l.buf = append(l.buf, data[start:i]...)
			start = i + 1
			l.pendingCR, l.crEnd = true, pos+1
		default:
			if len(l.buf)+(i-start) >= MaxLine {
				l.buf = append(l.buf, data[start:i]...)
				start = i
				if err := l.emitRaw(emit, pos); err != nil {
					return err
				}
			}
		}
	}
	l.buf = append(l.buf, data[start:]...)
	return nil
}

// Flush emits a final line without a terminator, if any; end is the offset
// just past the stream's last byte.
func (l *Lines) Flush(end int64, emit func(text string, end int64) error) error {
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
func (l *Lines) emit(emit func(string, int64) error, end int64) error {
	text := string(l.buf)
	if text == "" {
		text = "\n"
	}
	l.buf = l.buf[:0]
	return emit(text, end)
}

// emitRaw emits the buffered bytes as they are (a piece of a long line, or
// a final unterminated line).
func (l *Lines) emitRaw(emit func(string, int64) error, end int64) error {
	text := string(l.buf)
	l.buf = l.buf[:0]
	return emit(text, end)
}
