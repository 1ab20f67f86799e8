// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package code

import (
	"encoding/binary"
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"
)

// decodeStream reads a stream message's content, {"name": ..., "text":
// ...}. Printed output comes as one message of everything the kernel
// buffered, often megabytes: encoding/json scans such a string twice
// (validation, then unquoting) a byte at a time, which was half of
// execd's CPU while it relayed printed output. The fast path here takes
// only what kernels send (an object of string values, valid UTF-8) and
// copies runs of plain bytes whole; anything else, or anything it doubts,
// goes to encoding/json.
//
// The strings may share content's bytes (no copy of hundreds of
// megabytes, which cost as much as the decoding): content must not
// change afterwards. A message's frames are its own and never written
// again (jupyter's decode).
func decodeStream(content []byte) (name, text string, ok bool) {
	if n, t, ok := decodeStreamFast(content); ok {
		return n, t, true
	}
	return decodeStreamJSON(content)
}

// decodeStreamJSON is decodeStream by encoding/json alone.
func decodeStreamJSON(content []byte) (name, text string, ok bool) {
	var s struct {
		Name string `json:"name"`
		Text string `json:"text"`
	}
	if json.Unmarshal(content, &s) != nil {
		return "", "", false
	}
	return s.Name, s.Text, true
}

// decodeStreamFast decodes an object whose values are all strings, with
// "name" and "text" once at most; ok is false for anything else.
func decodeStreamFast(b []byte) (name, text string, ok bool) {
	if !utf8.Valid(b) {
		return "", "", false // encoding/json's replacement characters
	}
	b = skipSpace(b)
	if len(b) == 0 || b[0] != '{' {
		return "", "", false
	}
	b = skipSpace(b[1:])
	if len(b) > 0 && b[0] == '}' {
		return "", "", len(skipSpace(b[1:])) == 0
	}
	var sawName, sawText bool
	for {
		var key, val string
		if key, b, ok = unquote(b); !ok {
			return "", "", false
		}
		b = skipSpace(b)
		if len(b) == 0 || b[0] != ':' {
			return "", "", false
		}
		if val, b, ok = unquote(skipSpace(b[1:])); !ok {
			return "", "", false
		}
		switch {
		case key == "name" && !sawName:
			name, sawName = val, true
		case key == "text" && !sawText:
			text, sawText = val, true
		case strings.EqualFold(key, "name") || strings.EqualFold(key, "text"):
			// Twice, or in another case (encoding/json matches keys
			// without regard to case, the last one winning): leave it
			// to encoding/json.
			return "", "", false
		}
		b = skipSpace(b)
		if len(b) == 0 {
			return "", "", false
		}
		switch b[0] {
		case ',':
			b = skipSpace(b[1:])
		case '}':
			return name, text, len(skipSpace(b[1:])) == 0
		default:
			return "", "", false
		}
	}
}

func skipSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t' || b[0] == '\n' || b[0] == '\r') {
		b = b[1:]
	}
	return b
}

// unquote reads the JSON string at the start of b (known to be valid
// UTF-8) and returns it and what follows it.
func unquote(b []byte) (string, []byte, bool) {
	if len(b) == 0 || b[0] != '"' {
		return "", nil, false
	}
	b = b[1:]
	// The common case: no escape at all, the bytes as they are.
	end := plainRun(b)
	if end < len(b) && b[end] == '"' {
		return shared(b[:end]), b[end+1:], true
	}
	out := make([]byte, 0, len(b))
	for {
		end := plainRun(b)
		out = append(out, b[:end]...)
		b = b[end:]
		if len(b) == 0 {
			return "", nil, false
		}
		switch c := b[0]; {
		case c == '"':
			return shared(out), b[1:], true
		case c < 0x20:
			return "", nil, false
		}
		// A backslash.
		if len(b) < 2 {
			return "", nil, false
		}
		switch b[1] {
		case '"', '\\', '/':
			out = append(out, b[1])
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, ok := hex4(b[2:])
			if !ok {
				return "", nil, false
			}
			b = b[6:]
			if utf16.IsSurrogate(r) {
				r2, ok := rune(-1), false
				if len(b) >= 6 && b[0] == '\\' && b[1] == 'u' {
					r2, ok = hex4(b[2:])
				}
				if d := utf16.DecodeRune(r, r2); ok && d != utf8.RuneError {
					r, b = d, b[6:]
				} else {
					r = utf8.RuneError // a lone surrogate, as encoding/json takes it
				}
			}
			out = utf8.AppendRune(out, r)
			continue
		default:
			return "", nil, false
		}
		b = b[2:]
	}
}

// shared is b as a string, without a copy: b must never change.
func shared(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// plainRun is the length of b's leading run of bytes a JSON string holds
// as they are: no quote, backslash or control character.
func plainRun(b []byte) int {
	i := 0
	for i+16 <= len(b) {
		if !plainWord(binary.LittleEndian.Uint64(b[i:])) || !plainWord(binary.LittleEndian.Uint64(b[i+8:])) {
			break
		}
		i += 16
	}
	for i+8 <= len(b) && plainWord(binary.LittleEndian.Uint64(b[i:])) {
		i += 8
	}
	for i < len(b) && b[i] >= 0x20 && b[i] != '"' && b[i] != '\\' {
		i++
	}
	return i
}

// plainWord tells whether none of x's eight bytes is a quote, a
// backslash or a control character. Each test is exact about whether
// any byte matches (a borrow only follows a byte that does), whatever
// the bytes of 0x80 and up around it.
func plainWord(x uint64) bool {
	const lo, hi = 0x0101010101010101, 0x8080808080808080
	hasLess := func(x, n uint64) bool { return (x-lo*n)&^x&hi != 0 }
	return !hasLess(x, 0x20) && !hasLess(x^(lo*'"'), 1) && !hasLess(x^(lo*'\\'), 1)
}

func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	v, err := strconv.ParseUint(string(b[:4]), 16, 32)
	if err != nil {
		return 0, false
	}
	return rune(v), true
}
