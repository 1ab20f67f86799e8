// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package process

import (
	"strings"
	"testing"
)

type line struct {
	text string
	end  int64
}

// split feeds data in chunks of the given size and returns the lines.
func split(data string, chunk int) []line {
	var out []line
	var l Lines
	emit := func(text []byte, end int64) error { out = append(out, line{string(text), end}); return nil }
	for off := 0; off < len(data); off += chunk {
		_ = l.Feed([]byte(data[off:min(off+chunk, len(data))]), int64(off), emit)
	}
	_ = l.Flush(int64(len(data)), emit)
	return out
}

func TestLines(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in   string
		want []string
	}{
		{"a\nb\n", []string{"a", "b"}},
		{"a\r\nb\rc\n\nd", []string{"a", "b", "c", "\n", "d"}},
		{"\n\n", []string{"\n", "\n"}},
		{"no newline", []string{"no newline"}},
		{"progress 1\rprogress 2\r", []string{"progress 1", "progress 2"}},
		{"", nil},
	}
	for _, tc := range cases {
		for _, chunk := range []int{1, 2, 3, 1000} {
			got := split(tc.in, chunk)
			var texts []string
			for _, l := range got {
				texts = append(texts, l.text)
			}
			if strings.Join(texts, "|") != strings.Join(tc.want, "|") {
				t.Errorf("split(%q, chunk %d) = %q, want %q", tc.in, chunk, texts, tc.want)
			}
		}
	}
}

func TestLinesBoundsLongLines(t *testing.T) {
	t.Parallel()
	in := strings.Repeat("x", 3*MaxLine+5) + "\n"
	got := split(in, 4096)
	if len(got) != 4 {
		t.Fatalf("a line of 3×MaxLine+5 became %d events, want 4", len(got))
	}
	total := 0
	for _, l := range got {
		if len(l.text) > MaxLine {
			t.Fatalf("an event of %d bytes exceeds MaxLine", len(l.text))
		}
		total += len(l.text)
	}
	if total != 3*MaxLine+5 || got[len(got)-1].end != int64(len(in)) {
		t.Fatalf("pieces add to %d bytes, last end %d", total, got[len(got)-1].end)
	}
}

// FuzzLinesResume checks the property streams rely on: resuming from any
// event's end offset yields exactly the events that followed it.
func FuzzLinesResume(f *testing.F) {
	f.Add("a\r\nb\rc\n\nd", 3)
	f.Add("\r\r\n\n\r", 1)
	f.Fuzz(func(t *testing.T, data string, chunk int) {
		if chunk <= 0 || chunk > 64 || len(data) > 2000 {
			return
		}
		all := split(data, chunk)
		for i, l := range all {
			if l.end <= 0 || l.end > int64(len(data)) || i > 0 && l.end < all[i-1].end {
				t.Fatalf("bad end %d at event %d of %q", l.end, i, data)
			}
			rest := split(data[l.end:], chunk)
			want := all[i+1:]
			if len(rest) != len(want) {
				t.Fatalf("resume after event %d of %q: %d events, want %d", i, data, len(rest), len(want))
			}
			for j := range rest {
				if rest[j].text != want[j].text || rest[j].end+l.end != want[j].end {
					t.Fatalf("resume after event %d of %q: %v, want %v", i, data, rest, want)
				}
			}
		}
	})
}

func TestLinesExactlyMaxLine(t *testing.T) {
	t.Parallel()
	in := strings.Repeat("y", MaxLine) + "\n" + strings.Repeat("z", MaxLine+1)
	for _, chunk := range []int{MaxLine, 1000, 7} {
		got := split(in, chunk)
		if len(got) != 3 || len(got[0].text) != MaxLine || len(got[1].text) != MaxLine || got[2].text != "z" {
			var lens []int
			for _, l := range got {
				lens = append(lens, len(l.text))
			}
			t.Errorf("chunk %d: event lengths %v, want [%d %d 1]", chunk, lens, MaxLine, MaxLine)
		}
	}
}
