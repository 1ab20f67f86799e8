// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	sdkmcp "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/corral-dev/corral/mcp"
)

// validConfig is the smallest configuration a run starts with.
func validConfig() Config {
	return Config{Task: "count the lines", ModelURL: "http://model.invalid/v1", Model: "m1"}
}

func TestCheckConfigRefuses(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, tc := range []struct {
		name   string
		change func(*Config)
		want   string
	}{
		{"no task", func(c *Config) { c.Task = " \n" }, "the task is empty"},
		{"no model endpoint", func(c *Config) { c.ModelURL = "" }, "--model-url"},
		{"no model name", func(c *Config) { c.Model = "" }, "--model"},
		{"a URL for a credential host", func(c *Config) {
			c.Credentials = []Credential{{Host: "https://api.example.com", Value: "sk-secret"}}
		}, `credential host "https://api.example.com"`},
		{"a port in a credential host", func(c *Config) {
			c.Credentials = []Credential{{Host: "api.example.com:443", Value: "sk-secret"}}
		}, "give a host name"},
		{"a wildcard credential host", func(c *Config) { c.Credentials = []Credential{{Host: "*.example.com", Value: "sk-secret"}} }, "give a host name"},
		{"an empty credential", func(c *Config) { c.Credentials = []Credential{{Host: "api.example.com"}} }, "credential for api.example.com: the value is empty"},
		{"a missing input", func(c *Config) { c.Inputs = []string{filepath.Join(dir, "nope.csv")} }, "not a readable file"},
		{"a directory for an input", func(c *Config) { c.Inputs = []string{dir} }, "not a readable file"},
		{"a run id with a space", func(c *Config) { c.RunID = "run 1" }, `run id "run 1"`},
		{"a run id with a slash", func(c *Config) { c.RunID = "../x" }, "use up to 63 letters"},
		{"a run id too long for a label", func(c *Config) { c.RunID = strings.Repeat("r", 64) }, "use up to 63 letters"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := validConfig()
			tc.change(&cfg)
			_, err := checkConfig(cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("checkConfig = %v, want an error with %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "sk-secret") {
				t.Errorf("the error shows the credential: %v", err)
			}
			// Run refuses it the same way, before it reaches anything.
			if rep, rerr := Run(t.Context(), cfg); rep != nil || rerr == nil || rerr.Error() != err.Error() {
				t.Errorf("Run = %v, %v; want nil, %v", rep, rerr, err)
			}
		})
	}
}

func TestCheckConfigDefaults(t *testing.T) {
	t.Parallel()
	input := filepath.Join(t.TempDir(), "data.csv")
	if err := os.WriteFile(input, []byte("a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := validConfig()
	cfg.Inputs = []string{input}
	cfg.Domains = []string{"pypi.org"}
	cfg.Credentials = []Credential{{Host: "api.example.com", Value: "v1"}, {Host: "pypi.org", Value: "v2"}}
	cfg.Policy = mcp.Policy{ToolPrefix: "corral", Tools: []string{"command_run", "sandbox_delete", "file_read", "sandbox_list"}}
	got, err := checkConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got.HTTPClient != http.DefaultClient || got.ModelAttempts != 5 {
		t.Errorf("defaults: HTTPClient %p, ModelAttempts %d", got.HTTPClient, got.ModelAttempts)
	}
	// The credentials' hosts join the network once each.
	if diff := cmp.Diff([]string{"pypi.org", "api.example.com"}, got.Domains); diff != "" {
		t.Errorf("Domains (-want +got):\n%s", diff)
	}
	// The model gets its tools only; the sandbox's lifecycle is the
	// agent's, which needs sandbox_create, and no prefix renames them.
	if diff := cmp.Diff([]string{"command_run", "file_read", "sandbox_create"}, got.Policy.Tools); diff != "" {
		t.Errorf("Policy.Tools (-want +got):\n%s", diff)
	}
	if got.Policy.ToolPrefix != "" {
		t.Errorf("ToolPrefix = %q, want none", got.Policy.ToolPrefix)
	}
	// The caller's configuration is its own.
	if len(cfg.Domains) != 1 || len(cfg.Policy.Tools) != 4 || cfg.Policy.Tools[1] != "sandbox_delete" || cfg.HTTPClient != nil {
		t.Errorf("checkConfig changed its argument: %+v", cfg)
	}

	cfg.ModelAttempts = 2
	if got, _ := checkConfig(cfg); got.ModelAttempts != 2 {
		t.Errorf("ModelAttempts = %d, want the 2 asked for", got.ModelAttempts)
	}
}

func TestCtxStop(t *testing.T) {
	t.Parallel()
	live := t.Context()
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	expired, cancel2 := context.WithTimeout(t.Context(), -time.Second)
	defer cancel2()
	for _, tc := range []struct {
		name         string
		parent, wctx context.Context
		want         string
	}{
		{"both live", live, live, ""},
		{"wall time spent", live, expired, StopTimeBudget},
		{"cancelled", cancelled, cancelled, StopCancelled},
		{"cancelled while the wall time is spent too", cancelled, expired, StopCancelled},
	} {
		err := ctxStop(tc.parent, tc.wctx)
		var se *stopErr
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: ctxStop = %v, want nil", tc.name, err)
		case tc.want != "" && (!errors.As(err, &se) || se.reason != tc.want):
			t.Errorf("%s: ctxStop = %v, want %s", tc.name, err, tc.want)
		}
	}
}

func TestStopRecordsTheReason(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err         error
		reason, msg string
	}{
		{stopf(StopTurnBudget, "the budget of %d model turns is spent", 3), StopTurnBudget, "the budget of 3 model turns is spent"},
		{fmt.Errorf("setup: %w", stopf(StopDone, "the model finished")), StopDone, "the model finished"},
		{errors.New("connection refused"), StopSandboxError, "connection refused"},
	} {
		r := &run{rep: &Report{}}
		r.stop(tc.err)
		if r.rep.StopReason != tc.reason || r.rep.StopMessage != tc.msg {
			t.Errorf("stop(%v): %q, %q; want %q, %q", tc.err, r.rep.StopReason, r.rep.StopMessage, tc.reason, tc.msg)
		}
	}
}

// The model is told the hosts whose requests carry a credential, never
// the credential, and the inputs by name, not by where they came from.
func TestSystemPrompt(t *testing.T) {
	t.Parallel()
	r := &run{
		cfg: Config{Inputs: []string{"/home/me/private/data.csv"}, Credentials: []Credential{{Host: "api.example.com", Value: "sk-secret"}},
			Policy: mcp.Policy{Template: mcp.Template{Workdir: "/workspace"}}},
		rep: &Report{Network: []string{"pypi.org", "api.example.com"}, Credentials: []string{"api.example.com"}},
	}
	p := r.systemPrompt()
	for _, want := range []string{"Your work directory is /workspace", "network access only to pypi.org, api.example.com",
		"HTTPS requests to api.example.com are given their API key", "input files are there: data.csv."} {
		if !strings.Contains(p, want) {
			t.Errorf("the system prompt lacks %q:\n%s", want, p)
		}
	}
	for _, never := range []string{"sk-secret", "/home/me"} {
		if strings.Contains(p, never) {
			t.Errorf("the system prompt holds %q:\n%s", never, p)
		}
	}
	r = &run{cfg: Config{Policy: mcp.Policy{Template: mcp.Template{Workdir: "/workspace"}}}, rep: &Report{}}
	if p := r.systemPrompt(); !strings.Contains(p, "the sandbox has no network.") || strings.Contains(p, "input files") {
		t.Errorf("the system prompt of a run with no network or inputs:\n%s", p)
	}
}

// A call the model gets wrong is answered with a bad_arguments error and
// counted, never sent to the tool layer; the trajectory records the
// arguments' digest, not the arguments.
func TestCallToolRefusesWithoutCalling(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, tool, args, want string
	}{
		{"a tool the model may not call", "sandbox_delete", `{"sandbox_id":"sb-1","note":"hunter2"}`, `there is no tool \"sandbox_delete\"`},
		{"an unknown tool", "rm_rf", `{"note":"hunter2"}`, `there is no tool \"rm_rf\"`},
		{"arguments that are not JSON", "command_run", `echo hunter2`, "the arguments are not a JSON object"},
		{"arguments that are not an object", "command_run", `["hunter2"]`, "the arguments are not a JSON object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var buf bytes.Buffer
			// No tool session: reaching the tool layer would panic.
			r := &run{cfg: Config{RunID: "run-1"}, rep: &Report{SandboxID: "sb-1"}, traj: &trajectory{w: &buf}}
			var call toolCall
			call.ID, call.Function.Name, call.Function.Arguments = "call-1", tc.tool, tc.args
			content, stop := r.callTool(t.Context(), 2, call)
			if stop != nil {
				t.Errorf("callTool stops the loop: %v", stop)
			}
			if !strings.Contains(content, `"class":"bad_arguments"`) || !strings.Contains(content, tc.want) {
				t.Errorf("the model is told %s, want a bad_arguments error with %s", content, tc.want)
			}
			if r.rep.ToolErrors != 1 || r.rep.ToolCalls != 0 {
				t.Errorf("ToolErrors %d, ToolCalls %d; want 1, 0", r.rep.ToolErrors, r.rep.ToolCalls)
			}
			lines := trajectoryLines(t, &buf)
			if len(lines) != 1 || lines[0]["type"] != "tool_call" || lines[0]["id"] != "call-1" || lines[0]["turn"] != float64(2) ||
				lines[0]["tool"] != tc.tool || lines[0]["args_sha256"] != mcp.Digest(tc.args) || lines[0]["request_id"] != "run-1.1" || lines[0]["error"] == nil {
				t.Errorf("trajectory = %v", lines)
			}
			if strings.Contains(buf.String(), "hunter2") {
				t.Errorf("the trajectory holds the arguments: %s", buf.String())
			}
		})
	}
}

func TestCommandRecord(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		out    map[string]any
		want   CommandRecord
		wantEv map[string]any
	}{
		{"an exit", map[string]any{"exit_code": float64(3), "duration_ms": float64(42), "truncated": true},
			CommandRecord{Tool: "command_run", ExitCode: intp(3), DurationMS: 42},
			map[string]any{"exit_code": 3, "timed_out": false, "truncated": true}},
		{"a timeout", map[string]any{"timed_out": true},
			CommandRecord{Tool: "command_run", TimedOut: true},
			map[string]any{"timed_out": true, "truncated": nil}},
		{"a code error", map[string]any{"error": map[string]any{"name": "ZeroDivisionError"}},
			CommandRecord{Tool: "code_run", CodeError: "ZeroDivisionError"},
			map[string]any{"timed_out": false, "truncated": nil}},
	} {
		ev := map[string]any{}
		got := commandRecord(tc.want.Tool, tc.out, ev)
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s: record (-want +got):\n%s", tc.name, diff)
		}
		if diff := cmp.Diff(tc.wantEv, ev); diff != "" {
			t.Errorf("%s: trajectory event (-want +got):\n%s", tc.name, diff)
		}
	}
}

func TestStructured(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		res     *sdkmcp.CallToolResult
		err     error
		wantOut map[string]any
		wantErr map[string]any
	}{
		{"a result", &sdkmcp.CallToolResult{StructuredContent: map[string]any{"exit_code": 0}}, nil,
			map[string]any{"exit_code": float64(0)}, nil},
		{"no structured content", &sdkmcp.CallToolResult{}, nil, map[string]any{}, nil},
		{"the tool's error", &sdkmcp.CallToolResult{IsError: true,
			StructuredContent: map[string]any{"error": map[string]any{"class": "budget", "message": "spent"}}}, nil,
			map[string]any{"error": map[string]any{"class": "budget", "message": "spent"}},
			map[string]any{"class": "budget", "message": "spent"}},
		{"a schema error, as text", &sdkmcp.CallToolResult{IsError: true,
			Content: []sdkmcp.Content{&sdkmcp.TextContent{Text: "missing "}, &sdkmcp.TextContent{Text: "command"}}}, nil,
			map[string]any{"error": map[string]any{"class": mcp.ClassBadArguments, "message": "missing command", "retryable": false}},
			map[string]any{"class": mcp.ClassBadArguments, "message": "missing command", "retryable": false}},
		{"the call failed", nil, errors.New("connection closed"), map[string]any{},
			map[string]any{"class": mcp.ClassPlatform, "message": "connection closed", "retryable": false}},
	} {
		out, terr := structured(tc.res, tc.err)
		if diff := cmp.Diff(tc.wantOut, out); diff != "" {
			t.Errorf("%s: out (-want +got):\n%s", tc.name, diff)
		}
		if diff := cmp.Diff(tc.wantErr, terr); diff != "" {
			t.Errorf("%s: error (-want +got):\n%s", tc.name, diff)
		}
	}
}

// TestJudge: how a reply ends the run, or does not.
func TestJudge(t *testing.T) {
	t.Parallel()
	call := []toolCall{{ID: "c1"}}
	for _, tc := range []struct {
		name            string
		content         *string
		calls           []toolCall
		finish          string
		tokens          int
		stop, summary   string
		messageContains string
	}{
		{"an answer", text("847 units"), nil, "stop", 10, StopDone, "847 units", "finished"},
		{"tool calls", nil, call, "tool_calls", 10, "", "", ""},
		{"cut off at the length", text("The total is"), nil, "length", 10, StopTruncated, "The total is", "finish_reason length"},
		{"filtered", nil, nil, "content_filter", 10, StopTruncated, "", "content_filter"},
		{"tool calls cut off", nil, call, "length", 10, StopTruncated, "", "cut off"},
		{"tool calls past the token budget", nil, call, "tool_calls", 1000, StopTokenBudget, "", "1000 tokens, the budget is 1000"},
		{"an answer past the token budget is still the answer", text("done"), nil, "stop", 5000, StopDone, "done", "finished"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := &run{rep: &Report{PromptTokens: tc.tokens - tc.tokens/10, CompletionTokens: tc.tokens / 10}}
			r.cfg.Policy.Budget.Tokens = 1000
			err := r.judge(message{Content: tc.content, ToolCalls: tc.calls}, tc.finish)
			if tc.stop == "" {
				if err != nil {
					t.Fatalf("judge = %v, want the tools to run", err)
				}
				return
			}
			var se *stopErr
			if !errors.As(err, &se) || se.reason != tc.stop || !strings.Contains(se.msg, tc.messageContains) || r.rep.ModelSummary != tc.summary {
				t.Fatalf("judge = %v, summary %q; want %s (%q), summary %q", err, r.rep.ModelSummary, tc.stop, tc.messageContains, tc.summary)
			}
		})
	}
}
