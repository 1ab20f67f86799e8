// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package sse_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/corral-dev/corral/sse"
)

func readAll(t *testing.T, s string) []string {
	t.Helper()
	r := sse.NewReader(strings.NewReader(s))
	var out []string
	for {
		ev, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("Next = %v", err)
		}
		out = append(out, string(ev))
	}
}

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	w := sse.NewWriter(&buf)
	events := []map[string]any{{"type": "init", "text": "a<b>&"}, {"type": "stdout", "text": "line\nwith newline"}, {"type": "ping"}}
	for _, ev := range events {
		if err := w.Write(ev); err != nil {
			t.Fatal(err)
		}
	}
	if !strings.HasPrefix(buf.String(), `data: {"text":"a<b>&","type":"init"}`+"\n\n") {
		t.Errorf("framing = %q", buf.String())
	}
	got := readAll(t, buf.String())
	if len(got) != len(events) {
		t.Fatalf("read %d events, want %d", len(got), len(events))
	}
	for i, g := range got {
		var m map[string]any
		if err := json.Unmarshal([]byte(g), &m); err != nil || m["type"] != events[i]["type"] || m["text"] != events[i]["text"] {
			t.Errorf("event %d = %s", i, g)
		}
	}
}

func TestReaderAcceptsOpenSandboxFraming(t *testing.T) {
	t.Parallel()
	in := "{\"type\":\"init\"}\n\n{\"type\":\"stdout\",\"text\":\"x\"}\n\n: comment\nevent: x\nid: 3\nretry: 1\ndata: {\"type\":\"ping\"}\r\n\r\n"
	got := readAll(t, in)
	want := []string{`{"type":"init"}`, `{"type":"stdout","text":"x"}`, `{"type":"ping"}`}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("events = %q, want %q", got, want)
	}
	// A final event without its blank line still counts.
	if got := readAll(t, "data: {\"a\":1}"); len(got) != 1 {
		t.Errorf("unterminated final event: %q", got)
	}
}

func TestReaderRejectsGarbageAndHugeEvents(t *testing.T) {
	t.Parallel()
	if _, err := sse.NewReader(strings.NewReader("hello\n\n")).Next(); err == nil {
		t.Error("garbage line accepted")
	}
	huge := "data: " + strings.Repeat("x", sse.MaxEventSize+10) + "\n\n"
	if _, err := sse.NewReader(strings.NewReader(huge)).Next(); !errors.Is(err, sse.ErrEventTooLarge) {
		t.Errorf("huge event = %v", err)
	}
}

func FuzzReader(f *testing.F) {
	for _, s := range []string{"data: {}\n\n", "{\"a\":1}\n\n", "data: a\ndata: b\n\n", ": c\n", "\r\n\r\n", "data:\n\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r := sse.NewReader(strings.NewReader(s))
		for i := 0; i < 10000; i++ {
			ev, err := r.Next()
			if err != nil {
				return
			}
			if len(ev) > sse.MaxEventSize {
				t.Fatalf("event of %d bytes", len(ev))
			}
		}
		t.Fatalf("no end after 10000 events")
	})
}

func FuzzWriterReader(f *testing.F) {
	f.Add("hello", "stdout")
	f.Add("a\nb\r\n\x00\xff", "x")
	f.Fuzz(func(t *testing.T, text, typ string) {
		var buf bytes.Buffer
		if err := sse.NewWriter(&buf).Write(map[string]string{"type": typ, "text": text}); err != nil {
			t.Fatal(err)
		}
		got, err := sse.NewReader(&buf).Next()
		if err != nil {
			t.Fatalf("Next = %v on %q", err, buf.String())
		}
		// JSON carries invalid UTF-8 as one U+FFFD per bad byte (where
		// strings.ToValidUTF8 would fold a run into one).
		want := strings.Map(func(r rune) rune { return r }, typ)
		var m map[string]string
		if err := json.Unmarshal(got, &m); err != nil || m["type"] != want {
			t.Fatalf("round trip of %q = %s (%v)", typ, got, err)
		}
	})
}
