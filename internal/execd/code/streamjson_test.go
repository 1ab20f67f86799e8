// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package code

import (
	"strings"
	"testing"
)

// TestDecodeStreamIsEncodingJSONs: what kernels send goes the fast way;
// for every content, fast or not, the result is encoding/json's.
func TestDecodeStreamIsEncodingJSONs(t *testing.T) {
	big := strings.Repeat("x", 1<<20)
	cases := map[string]struct {
		in   string
		fast bool
	}{
		"ipykernel's":          {`{"name": "stdout", "text": "hello\n"}`, true},
		"compact, other order": {`{"text":"a","name":"stderr"}`, true},
		"large":                {`{"name": "stdout", "text": "` + big + `"}`, true},
		"escapes":              {`{"name":"stdout","text":"q\" b\\ s\/ \b\f\n\r\t \u00e9 \u20ac \ud83d\ude00 caf\u00E9"}`, true},
		"raw UTF-8":            {`{"name":"stdout","text":"café 日本 😀"}`, true},
		"lone surrogates":      {`{"name":"stdout","text":"\ud83d x \ude00 \ud83d\u0041"}`, true},
		"other keys":           {`{"name":"stdout","text":"a","extra":"b"}`, true},
		"empty object":         {`{}`, true},
		"spaces around":        {" \n{ \"name\" : \"stdout\" ,\t\"text\" : \"a\" } \r\n", true},
		"a key in other case":  {`{"NAME":"stderr","text":"a"}`, false},
		"a key twice":          {`{"text":"a","text":"b"}`, false},
		"a number value":       {`{"name":"stdout","text":"a","n":1}`, false},
		"null text":            {`{"name":"stdout","text":null}`, false},
		"invalid UTF-8":        {"{\"name\":\"stdout\",\"text\":\"a\xff\"}", false},
		"a raw control byte":   {"{\"name\":\"stdout\",\"text\":\"a\x01\"}", false},
		"a bad escape":         {`{"name":"stdout","text":"\x"}`, false},
		"a short \\u":          {`{"name":"stdout","text":"\u12"}`, false},
		"unterminated":         {`{"name":"stdout","text":"abc`, false},
		"trailing junk":        {`{"name":"stdout","text":"a"} x`, false},
		"not an object":        {`["stdout","a"]`, false},
		"empty":                {``, false},
	}
	for name, c := range cases {
		_, _, fast := decodeStreamFast([]byte(c.in))
		if fast != c.fast {
			t.Errorf("%s: fast path %v, want %v", name, fast, c.fast)
		}
		n, txt, ok := decodeStream([]byte(c.in))
		wn, wt, wok := decodeStreamJSON([]byte(c.in))
		if n != wn || txt != wt || ok != wok {
			t.Errorf("%s: (%q, %.40q, %v), encoding/json's (%q, %.40q, %v)", name, n, txt, ok, wn, wt, wok)
		}
	}
}

// TestPlainWord: each byte value at each of the eight places.
func TestPlainWord(t *testing.T) {
	for pos := range 8 {
		for c := range 256 {
			var w [8]byte
			for i := range w {
				w[i] = 'a'
				if i%3 == 0 {
					w[i] = 0xc3 // bytes of 0x80 and up around it
				}
			}
			w[pos] = byte(c)
			x := uint64(0)
			for i := range w {
				x |= uint64(w[i]) << (8 * i)
			}
			want := c >= 0x20 && c != '"' && c != '\\'
			if plainWord(x) != want {
				t.Fatalf("byte %#x at %d: plainWord %v, want %v", c, pos, !want, want)
			}
		}
	}
}

func FuzzDecodeStream(f *testing.F) {
	f.Add([]byte(`{"name": "stdout", "text": "hello\n"}`))
	f.Add([]byte(`{"name":"stdout","text":"q\" \u00e9 \ud83d\ude00 \ud83d x"}`))
	f.Add([]byte(`{"Text":"a","text":"b"}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		n, txt, ok := decodeStream(in)
		wn, wt, wok := decodeStreamJSON(in)
		if n != wn || txt != wt || ok != wok {
			t.Fatalf("(%q, %q, %v), encoding/json's (%q, %q, %v)", n, txt, ok, wn, wt, wok)
		}
	})
}
