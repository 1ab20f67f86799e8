// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func TestCapForModel(t *testing.T) {
	t.Parallel()
	small := map[string]any{"stdout": map[string]any{"text": "ok"}}
	if _, s, cut := capForModel(small, 1024); cut != 0 || s != `{"stdout":{"text":"ok"}}` {
		t.Fatalf("a small result: %s, %d cut", s, cut)
	}
	// A 900 KiB file read, text with a multi-byte character at every
	// position a cut could land, and NULs that JSON writes six to a byte.
	for name, content := range map[string]string{
		"ascii": strings.Repeat("x", 900<<10),
		"utf8":  strings.Repeat("é€", 200<<10),
		"nul":   strings.Repeat("\x00", 300<<10),
	} {
		out := map[string]any{"path": "/workspace/big.txt", "content": content, "size": float64(len(content))}
		_, s, cut := capForModel(out, 64<<10)
		if len(s) > 64<<10 || cut == 0 || !utf8.ValidString(s) {
			t.Fatalf("%s: %d bytes sent, %d cut, valid UTF-8 %v", name, len(s), cut, utf8.ValidString(s))
		}
		var got map[string]any
		if err := json.Unmarshal([]byte(s), &got); err != nil {
			t.Fatalf("%s: not JSON: %v", name, err)
		}
		c, _ := got["context_cut"].(map[string]any)
		text, _ := got["content"].(string)
		if c == nil || c["bytes"] != float64(cut) || !strings.Contains(text, "bytes cut for the model's context") ||
			got["path"] != "/workspace/big.txt" || got["size"] != float64(len(content)) {
			t.Fatalf("%s: %.300s", name, s)
		}
		if !strings.HasPrefix(content, text[:10]) || !strings.HasSuffix(content, text[len(text)-10:]) {
			t.Fatalf("%s: the head and tail are not the content's", name)
		}
	}
	// Many small fields: only the shape is sent.
	many := map[string]any{}
	for i := range 5000 {
		many[strings.Repeat("k", 10)+string(rune('a'+i%26))+strings.Repeat("z", i%40)] = "short value here"
	}
	if _, s, cut := capForModel(many, 2048); len(s) > 2048 || cut == 0 || !strings.Contains(s, "too large") {
		t.Fatalf("many fields: %d bytes, %d cut: %.200s", len(s), cut, s)
	}
}

func TestCite(t *testing.T) {
	t.Parallel()
	ev := []evidence{
		{callID: "c1", tool: "command_run", out: map[string]any{"stdout": map[string]any{"text": "rows 6\ntotal 847\n"}, "exit_code": float64(0), "duration_ms": float64(23)}},
		{callID: "c2", tool: "code_run", out: map[string]any{"stdout": map[string]any{"text": "mean 141.17, best jun (1,780 kg)\n"}, "results": []any{map[string]any{"text": "12.5"}}}},
	}
	got := cite("847 units over 6 months (mean 141.17); jun had 1,780 kg, 1780 again, up 12.5% and 31.7% by gpt-4o; 8470 is not 847; took 23 ms; -6.", ev)
	want := map[string]Citation{
		"847":    {Figure: "847", Verified: true, CallID: "c1", Tool: "command_run", Field: "stdout.text"},
		"6":      {Figure: "6", Verified: true, CallID: "c1", Tool: "command_run", Field: "stdout.text"},
		"141.17": {Figure: "141.17", Verified: true, CallID: "c2", Tool: "code_run", Field: "stdout.text"},
		"1,780":  {Figure: "1,780", Verified: true, CallID: "c2", Tool: "code_run", Field: "stdout.text"},
		"1780":   {Figure: "1780", Verified: false},
		"12.5":   {Figure: "12.5", Verified: true, CallID: "c2", Tool: "code_run", Field: "results[0].text"},
		"31.7":   {Figure: "31.7"},
		"8470":   {Figure: "8470"},
		"23":     {Figure: "23", Verified: true, CallID: "c1", Tool: "command_run", Field: "duration_ms"},
		"-6":     {Figure: "-6", Verified: true, CallID: "c1", Tool: "command_run", Field: "stdout.text"},
	}
	if len(got) != len(want) {
		t.Fatalf("cited %d figures, want %d: %+v", len(got), len(want), got)
	}
	for _, c := range got {
		if w, ok := want[c.Figure]; !ok || c != w {
			t.Errorf("figure %s: %+v, want %+v", c.Figure, c, w)
		}
	}
	if u := unverified(got); strings.Join(u, " ") != "1780 31.7 8470" {
		t.Errorf("unverified = %v", u)
	}
}

func TestAttribute(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	calls := []evidence{
		{callID: "c1", start: t0, end: t0.Add(2 * time.Second)},
		{callID: "c2", start: t0.Add(10 * time.Second), end: t0.Add(15 * time.Second)},
	}
	arts := []Artifact{
		{Path: "/workspace/sales.csv", SHA256: "in", ModifiedAt: t0.Add(-time.Minute)},
		{Path: "/workspace/notes.csv", SHA256: "changed", ModifiedAt: t0.Add(12 * time.Second)},
		{Path: "/workspace/chart.png", SHA256: "x", ModifiedAt: t0.Add(2500 * time.Millisecond)},
		{Path: "/workspace/late.txt", SHA256: "y", ModifiedAt: t0.Add(time.Minute)},
	}
	attribute(arts, map[string]string{"/workspace/sales.csv": "in", "/workspace/notes.csv": "original"}, calls)
	if !arts[0].Input || arts[0].ProducedBy != "" || arts[1].Input || arts[1].ProducedBy != "c2" || arts[2].ProducedBy != "c1" ||
		arts[3].ProducedBy != "" || arts[3].Input {
		t.Fatalf("artifacts: %+v", arts)
	}
}

func TestContentLogRedactsAndStops(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	l := newContentLog(&buf, []string{"sk-model-key", `tok"en\with`, ""})
	l.write(map[string]any{"type": "tool_call", "result": "the key sk-model-key and tok\"en\\with", "call_id": "c1"})
	if s := buf.String(); strings.Contains(s, "sk-model-key") || strings.Contains(s, `tok\"en\\with`) || strings.Count(s, "[REDACTED]") != 2 {
		t.Fatalf("content log: %s", s)
	}
	l.left = 100
	l.write(map[string]any{"type": "tool_call", "result": strings.Repeat("x", 200)})
	l.write(map[string]any{"type": "tool_call", "result": "after"})
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[1], "content_log_full") {
		t.Fatalf("a full log: %q", lines)
	}
	var none *contentLog
	none.write(map[string]any{}) // a run without a content log
}
