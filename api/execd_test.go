// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package api_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/corral-dev/corral/api"
)

func marshalNoEscape(t *testing.T, v any) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

func TestAppendJSONMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	cur := int64(42)
	events := []api.ServerStreamEvent{
		{Type: "init", Text: "abc", Timestamp: 1},
		{Type: "stdout", Text: "tab\there \"quoted\" \\ <html> & \x00\x1f \u2028 é 日本 \xff\xfe", Timestamp: 2, Cursor: &cur},
		{Type: "error", Timestamp: 3, Error: &api.ExecError{EName: "CommandExecError", EValue: "3", Traceback: []string{"exit status 3"}}},
		{Type: "execution_complete", ExecutionTime: 15, ExecutionCount: 2, Timestamp: 4},
		{Type: "result", Results: map[string]any{"text/plain": "4", "text": "4"}, Timestamp: 5},
	}
	for _, ev := range events {
		want := marshalNoEscape(t, ev)
		got := ev.AppendJSON(nil)
		if !bytes.Equal(got, want) {
			t.Errorf("AppendJSON = %s\nencoding/json = %s", got, want)
		}
	}
}

func FuzzAppendJSON(f *testing.F) {
	f.Add("line", "stdout")
	f.Add("\xff\x00\u2029", "x\"")
	f.Fuzz(func(t *testing.T, text, typ string) {
		ev := api.ServerStreamEvent{Type: typ, Text: text, Timestamp: 7}
		got := ev.AppendJSON(nil)
		want := marshalNoEscape(t, ev)
		if !bytes.Equal(got, want) {
			t.Fatalf("AppendJSON(%q) = %s, want %s", text, got, want)
		}
	})
}

func BenchmarkAppendJSONStringPlain(b *testing.B) {
	line := []byte(strings.Repeat("x", 1023))
	buf := make([]byte, 0, 2048)
	b.SetBytes(int64(len(line)))
	for b.Loop() {
		buf = api.AppendJSONString(buf[:0], line)
	}
}
