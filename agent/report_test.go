// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"bytes"
	"encoding/json"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func intp(i int) *int { return &i }

func TestMarkdown(t *testing.T) {
	t.Parallel()
	rep := &Report{
		StopReason: StopDone, StopMessage: "the model finished", Model: "m1",
		SandboxID: "sb-1", SandboxDeleted: true,
		Network: []string{"pypi.org", "files.pythonhosted.org"}, Credentials: []string{"api.example.com"},
		Turns: 3, ToolCalls: 4, ToolErrors: 1, PromptTokens: 120, CompletionTokens: 45, DurationMS: 12345,
		RunID: "run-1",
		Commands: []CommandRecord{
			{CallID: "c1", Tool: "command_run", ExitCode: intp(0), DurationMS: 10},
			{CallID: "c2", Tool: "code_run", ExitCode: intp(1), CodeError: "ZeroDivisionError", DurationMS: 5},
			{CallID: "c3", Tool: "command_run", TimedOut: true, DurationMS: 60000},
		},
		Artifacts: []Artifact{{Path: "/workspace/out/chart.png", Local: "/tmp/out/out/chart.png", Bytes: 2048,
			SHA256: "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", ProducedBy: "c2"},
			{Path: "/workspace/in.csv", Local: "/tmp/out/in.csv", Bytes: 10, SHA256: "abcdef0123456789abcdef", Input: true}},
		ModelSummary:   "Plotted the data.\nThe trend is up 12%, on 40 rows.",
		SummaryFigures: []Citation{{Figure: "12", Verified: true, CallID: "c2", Tool: "code_run", Field: "stdout.text"}, {Figure: "40"}},
	}
	want := "# corral agent report\n\n" +
		"- **Stopped**: `done` — the model finished\n" +
		"- **Model**: m1, 3 turns, 120 prompt and 45 completion tokens\n" +
		"- **Tool calls**: 4 (1 failed)\n" +
		"- **Sandbox**: sb-1, network: pypi.org, files.pythonhosted.org (credentials injected for api.example.com), deleted\n" +
		"- **Duration**: 12.3 s\n" +
		"- **Run**: `run-1` (in the trajectory, the trace and the sandbox's metadata)\n\n" +
		"## Commands (from their results)\n\n" +
		"| # | call | tool | exit | timed out | ms |\n|---|---|---|---|---|---|\n" +
		"| 1 | `c1` | command_run | 0 | false | 10 |\n" +
		"| 2 | `c2` | code_run | ZeroDivisionError | false | 5 |\n" +
		"| 3 | `c3` | command_run | - | true | 60000 |\n\n" +
		"## Artifacts\n\n" +
		"- `/workspace/out/chart.png` → `/tmp/out/out/chart.png` (2048 bytes, sha256 0123456789ab, made by `c2`)\n" +
		"- `/workspace/in.csv` → `/tmp/out/in.csv` (10 bytes, sha256 abcdef012345, an input)\n\n" +
		"## The model's summary (its own words)\n\n" +
		"> Plotted the data.\n> The trend is up 12%, on 40 rows.\n\n" +
		"### Where its figures come from\n\n" +
		"- 12: `c2` (code_run), in `stdout.text`\n" +
		"- 40: **unverified**, no tool result the model saw holds it\n"
	if diff := cmp.Diff(want, rep.Markdown()); diff != "" {
		t.Errorf("Markdown() (-want +got):\n%s", diff)
	}
}

// What the report says about the sandbox's end, and what it leaves out
// when there is nothing to say.
func TestMarkdownSandboxLine(t *testing.T) {
	t.Parallel()
	expires := time.Date(2026, 12, 6, 10, 0, 0, 0, time.FixedZone("CET", 3600))
	for _, tc := range []struct {
		name string
		rep  Report
		want string
	}{
		{"never created", Report{StopReason: StopSandboxError},
			"- **Sandbox**: , network: none, never created\n"},
		{"deleted", Report{SandboxID: "sb-1", SandboxDeleted: true},
			"- **Sandbox**: sb-1, network: none, deleted\n"},
		{"left to its TTL", Report{SandboxID: "sb-1", SandboxExpiresAt: &expires},
			"- **Sandbox**: sb-1, network: none, NOT deleted: it expires at 2026-12-06T09:00:00Z (its TTL)\n"},
		{"left with no TTL known", Report{SandboxID: "sb-1"},
			"- **Sandbox**: sb-1, network: none, NOT deleted\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			md := tc.rep.Markdown()
			if !strings.Contains(md, tc.want) {
				t.Errorf("Markdown() = %q, want the line %q", md, tc.want)
			}
			if strings.Contains(md, "## ") {
				t.Errorf("Markdown() of a report with no commands, artifacts or summary has a section:\n%s", md)
			}
		})
	}
}

// secretFields lists the fields of typ, however deep, whose names are
// those of a key, a token, a password or a credential's value.
func secretFields(typ reflect.Type) []string {
	// Token counts are fine; a token is not.
	secretName := regexp.MustCompile(`(?i)secret|passw|bearer|key\b|token\b|value`)
	var found []string
	seen := map[reflect.Type]bool{}
	var walk func(path string, typ reflect.Type)
	walk = func(path string, typ reflect.Type) {
		for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice {
			typ = typ.Elem()
		}
		if typ.Kind() != reflect.Struct || seen[typ] || typ.PkgPath() != reflect.TypeFor[Report]().PkgPath() {
			return
		}
		seen[typ] = true
		for i := range typ.NumField() {
			f := typ.Field(i)
			if secretName.MatchString(f.Name + " " + f.Tag.Get("json")) {
				found = append(found, path+"."+f.Name)
			}
			walk(path+"."+f.Name, f.Type)
		}
	}
	walk(typ.Name(), typ)
	return found
}

// A report has no place for a secret: no field of it, however deep, is
// named for one, so neither the JSON report nor its Markdown can carry
// one. Credentials appear as their hosts only.
func TestReportHoldsNoSecret(t *testing.T) {
	t.Parallel()
	if got := secretFields(reflect.TypeFor[Report]()); len(got) != 0 {
		t.Errorf("fields of Report that could hold a secret: %v", got)
	}
	// The check finds the secrets where they are.
	if got, want := secretFields(reflect.TypeFor[Config]()), []string{"Config.ModelKey", "Config.Credentials.Value"}; !cmp.Equal(got, want) {
		t.Errorf("secretFields(Config) = %v, want %v", got, want)
	}
	rep := Report{StopReason: StopDone, Credentials: []string{"api.example.com"}, Network: []string{"api.example.com"}}
	if md := rep.Markdown(); !strings.Contains(md, "credentials injected for api.example.com") {
		t.Errorf("Markdown() does not name the credential's host:\n%s", md)
	}
}

func TestTrajectory(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	tr := &trajectory{w: &buf}
	before := time.Now().UTC()
	tr.write(map[string]any{"type": "start", "task_sha256": sha("the task")})
	tr.write(map[string]any{"type": "stop", "reason": StopDone})
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("trajectory = %q, want two lines", buf.String())
	}
	for i, wantType := range []string{"start", "stop"} {
		var ev map[string]any
		if err := json.Unmarshal([]byte(lines[i]), &ev); err != nil {
			t.Fatalf("line %d %q is not a JSON object: %v", i+1, lines[i], err)
		}
		if ev["type"] != wantType {
			t.Errorf("line %d type = %v, want %s", i+1, ev["type"], wantType)
		}
		ts, err := time.Parse(time.RFC3339Nano, ev["time"].(string))
		if err != nil || ts.Before(before.Add(-time.Second)) || ts.Location() != time.UTC {
			t.Errorf("line %d time = %v (%v), want a UTC RFC 3339 time from now", i+1, ev["time"], err)
		}
	}
	if !strings.Contains(lines[0], `"task_sha256":"`+sha("the task")+`"`) || strings.Contains(buf.String(), "the task") {
		t.Errorf("the start line carries the task, not only its digest: %s", lines[0])
	}

	// Without a writer, events go nowhere.
	(&trajectory{}).write(map[string]any{"type": "start"})
}

// Events written at once from several goroutines stay whole lines.
func TestTrajectoryConcurrentWritesStayLines(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	tr := &trajectory{w: &buf}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 50 {
				tr.write(map[string]any{"type": "tool_call", "goroutine": g, "i": i, "pad": strings.Repeat("x", 512)})
			}
		})
	}
	wg.Wait()
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != 400 {
		t.Fatalf("%d lines, want 400", len(lines))
	}
	for _, l := range lines {
		if !json.Valid([]byte(l)) {
			t.Fatalf("a torn line: %.80q", l)
		}
	}
}

func TestSHA(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"":    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
		"abc": "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
	} {
		if got := sha(in); got != want {
			t.Errorf("sha(%q) = %s, want %s", in, got, want)
		}
	}
}
