// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package mcp

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	sdkmcp "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/sdk"
)

func TestCaptureKeepsHeadAndTail(t *testing.T) {
	c := newCapture(10)
	for _, s := range []string{"01234", "56789", "abcdefghij", "KLMNOPQRST", "uv"} {
		c.WriteString(s)
	}
	out, trunc := c.output()
	if !trunc || out.Bytes != 32 || out.DroppedBytes != 22 {
		t.Fatalf("output = %+v, truncated %v", out, trunc)
	}
	if !strings.HasPrefix(out.Text, "01234\n[... 22 bytes elided ...]\n") || !strings.HasSuffix(out.Text, "RSTuv") {
		t.Fatalf("text = %q", out.Text)
	}
	short := newCapture(10)
	short.WriteString("hello")
	if out, trunc := short.output(); trunc || out.Text != "hello" || out.DroppedBytes != 0 {
		t.Fatalf("short = %+v", out)
	}
	// Exactly the cap, written byte by byte, is kept whole.
	exact := newCapture(10)
	for _, b := range []byte("0123456789") {
		exact.WriteString(string(b))
	}
	if out, trunc := exact.output(); trunc || out.Text != "0123456789" {
		t.Fatalf("exact = %+v", out)
	}
	// A cut through a multi-byte character leaves valid UTF-8.
	u := newCapture(4)
	u.WriteString(strings.Repeat("é", 10))
	if out, _ := u.output(); !json.Valid([]byte(`"`+strings.ReplaceAll(out.Text, "\n", `\n`)+`"`)) || strings.Contains(out.Text, "\xc3\n") {
		t.Fatalf("utf-8 = %q", out.Text)
	}
}

func TestPolicyFile(t *testing.T) {
	p, err := ParsePolicy([]byte(`
tools = ["command_run", "file_read"]
[limits]
command_timeout = "10s"
output_bytes = 1000
[budget]
tool_calls = 3
[template]
image = "python:3.12"
images = ["python:3.12", "host"]
egress = ["pypi.org", "*.pythonhosted.org", "10.1.0.0/16"]
resources = { cpu = "2", memory = "1Gi" }
`), "p.toml")
	if err != nil {
		t.Fatal(err)
	}
	if p.Limits.CommandTimeout.Duration != 10*time.Second || p.Limits.CallTimeout.Duration != DefaultCallTimeout || p.Budget.ToolCalls != 3 ||
		p.Budget.Sandboxes != DefaultSandboxes || p.Template.Workdir != DefaultWorkdir || !p.Offers("file_read") || p.Offers("sandbox_create") {
		t.Fatalf("policy = %+v", p)
	}
	for _, bad := range []string{
		`tols = []`,
		`tools = ["rm_rf"]`,
		"[limits]\ncommand_timeout = \"-1s\"",
		"[limits]\ncommand_timeout = \"10m\"\ncall_timeout = \"1m\"",
		"[template]\nworkdir = \"work\"",
		"[template]\nworkdir = \"/a/../b\"",
		"[template]\negress = [\"a b\"]",
		"[template]\nresources = { gpu = \"1\" }",
		"[limits]\noutput_bytes = 100000000",
		"[template]\nisolation = \"kata\"",
		"[limits]\ncontext_bytes = 100",
		"[limits]\ncontext_bytes = 100000000",
		"[budget]\ntokens = -1",
	} {
		if _, err := ParsePolicy([]byte(bad), "bad.toml"); err == nil {
			t.Errorf("policy %q was accepted", bad)
		}
	}
}

func TestPolicyBoundsTheSandbox(t *testing.T) {
	p, err := ParsePolicy([]byte(`
[template]
image = "img"
max_timeout = "30m"
egress = ["pypi.org", "*.example.com", "10.1.0.0/16"]
resources = { cpu = "1", memory = "1Gi" }
`), "p")
	if err != nil {
		t.Fatal(err)
	}
	if img, err := p.allowedImage(""); err != nil || img != "img" {
		t.Fatalf("default image = %q, %v", img, err)
	}
	if _, err := p.allowedImage("other"); err == nil {
		t.Fatal("an image outside the policy was allowed")
	}
	for _, secs := range []int64{10, 3600} {
		if _, err := p.timeout(&secs); err == nil {
			t.Errorf("timeout %d allowed", secs)
		}
	}
	if _, err := p.resources(map[string]string{"memory": "4Gi"}); err == nil {
		t.Error("4Gi allowed under a 1Gi template")
	}
	if _, err := p.resources(map[string]string{"pids": "100"}); err == nil {
		t.Error("pids allowed though the template sets none")
	}
	if r, err := p.resources(map[string]string{"cpu": "500m"}); err != nil || r["cpu"] != "500m" || r["memory"] != "1Gi" {
		t.Errorf("narrower resources = %v, %v", r, err)
	}
	allow := func(targets ...string) *api.NetworkPolicy {
		np := &api.NetworkPolicy{DefaultAction: "deny"}
		for _, t := range targets {
			np.Egress = append(np.Egress, api.NetworkRule{Action: "allow", Target: t})
		}
		return np
	}
	for _, ok := range [][]string{{"pypi.org"}, {"api.example.com"}, {"*.api.example.com"}, {"*.example.com"}, {"10.1.2.0/24"}, {"10.1.2.3"}} {
		if _, err := p.network(allow(ok...)); err != nil {
			t.Errorf("%v refused: %v", ok, err)
		}
	}
	for _, bad := range [][]string{{"evil.test"}, {"example.com"}, {"*.com"}, {"10.0.0.0/8"}, {"0.0.0.0/0"}, {"pypi.org.evil.test"}} {
		if _, err := p.network(allow(bad...)); err == nil {
			t.Errorf("%v allowed", bad)
		}
	}
	if _, err := p.network(&api.NetworkPolicy{DefaultAction: "allow"}); err == nil {
		t.Error("defaultAction allow accepted")
	}
	if np, err := p.network(nil); err != nil || np.DefaultAction != "deny" || len(np.Egress) != 3 {
		t.Errorf("default network = %+v, %v", np, err)
	}
	none := DefaultPolicy()
	// No network is an explicit deny-all, never "no policy" (which the
	// server would fill with its default, perhaps allow).
	for _, req := range []*api.NetworkPolicy{nil, {}, {DefaultAction: "deny"}, {Egress: []api.NetworkRule{{Action: "deny", Target: "pypi.org"}}}} {
		if np, err := none.network(req); err != nil || np == nil || np.DefaultAction != "deny" || allows(np) {
			t.Errorf("no egress in the template, request %+v: %+v, %v; want a deny-all policy", req, np, err)
		}
	}
	if _, err := none.network(allow("pypi.org")); err == nil {
		t.Error("a network allowed by a policy that gives none")
	}
	for _, bad := range []string{"../etc/passwd", "/etc/passwd", "/workspace/../root", "/workspacex", "a\x00b"} {
		if _, err := p.confine(bad, "path"); err == nil {
			t.Errorf("path %q allowed", bad)
		}
	}
	for arg, want := range map[string]string{"": "/workspace", "a/b.txt": "/workspace/a/b.txt", "/workspace/x/../y": "/workspace/y", "./": "/workspace"} {
		if got, err := p.confine(arg, "path"); err != nil || got != want {
			t.Errorf("confine(%q) = %q, %v; want %q", arg, got, err, want)
		}
	}
}

// connect serves a session in memory and returns a client of it.
func connect(t *testing.T, s *Session) *sdkmcp.ClientSession {
	t.Helper()
	ct, st := sdkmcp.NewInMemoryTransports()
	ctx := t.Context()
	if _, err := s.Server().Connect(ctx, st, nil); err != nil {
		t.Fatal(err)
	}
	cs, err := sdkmcp.NewClient(&sdkmcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// unreachable is a client of a corral that counts requests and answers
// none of them usefully.
func unreachable(t *testing.T) (*sdk.Client, *atomic.Int64) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		http.Error(w, `{"code":"SANDBOX::NOT_FOUND","message":"no such sandbox"}`, http.StatusNotFound)
	}))
	t.Cleanup(srv.Close)
	c, err := sdk.New(sdk.WithBaseURL(srv.URL), sdk.WithAPIKey("k"))
	if err != nil {
		t.Fatal(err)
	}
	return c, &n
}

func callTool(t *testing.T, cs *sdkmcp.ClientSession, name string, args any) (*sdkmcp.CallToolResult, map[string]any) {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &sdkmcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var out map[string]any
	b, _ := json.Marshal(res.StructuredContent)
	_ = json.Unmarshal(b, &out)
	return res, out
}

func TestEveryToolHasSchemas(t *testing.T) {
	c, _ := unreachable(t)
	cs := connect(t, NewSession(Config{Client: c, Policy: DefaultPolicy()}))
	res, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Tools) != len(ToolNames()) {
		t.Fatalf("%d tools listed, want %d", len(res.Tools), len(ToolNames()))
	}
	for _, tl := range res.Tools {
		in, _ := json.Marshal(tl.InputSchema)
		out, _ := json.Marshal(tl.OutputSchema)
		if !bytes.Contains(in, []byte(`"type":"object"`)) || !bytes.Contains(out, []byte(`"error"`)) || tl.Description == "" {
			t.Errorf("%s: input %s output %s", tl.Name, in, out)
		}
	}
	for _, want := range []string{"sandbox_create", "sandbox_kill", "command_run", "file_read", "file_write", "file_search", "code_run", "artifact_get"} {
		if !strings.Contains(strings.Join(ToolNames(), " "), want) {
			t.Errorf("no tool %s", want)
		}
	}
}

func TestPolicyRefusalsNeverReachTheServer(t *testing.T) {
	c, n := unreachable(t)
	var trace bytes.Buffer
	pol := DefaultPolicy()
	pol.Tools = []string{"command_run", "file_read", "sandbox_create", "sandbox_get_endpoint"}
	pol.ToolPrefix = "box"
	s := NewSession(Config{Client: c, Policy: pol, Trace: slog.New(slog.NewJSONHandler(&trace, nil))})
	cs := connect(t, s)
	tools, _ := cs.ListTools(t.Context(), nil)
	if len(tools.Tools) != 4 || !strings.HasPrefix(tools.Tools[0].Name, "box_") {
		t.Fatalf("tools = %v", tools.Tools)
	}
	// Unknown tools and tools the policy leaves out do not exist.
	if res, err := cs.CallTool(t.Context(), &sdkmcp.CallToolParams{Name: "box_file_write", Arguments: map[string]any{"path": "a", "content": "b"}}); err == nil && !res.IsError {
		t.Fatal("a tool outside the policy ran")
	}
	for _, tc := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{"box_command_run", map[string]any{"command": "ls"}, "no sandbox yet"},
		{"box_command_run", map[string]any{"command": "ls", "sandbox_id": "someone-elses"}, "not created by this session"},
		{"box_file_read", map[string]any{"path": "../../etc/shadow", "sandbox_id": "x"}, "outside the work directory"},
		{"box_sandbox_create", map[string]any{"image": "alpine", "extensions": map[string]any{"corral.dev/secrets": "all"}}, "extensions are not allowed"},
		{"box_sandbox_create", map[string]any{"image": "alpine", "network_policy": map[string]any{"egress": []any{map[string]any{"action": "allow", "target": "evil.test"}}}}, "no network"},
		{"box_sandbox_create", map[string]any{"image": "alpine", "timeout_seconds": 999999}, "exceeds the policy"},
		{"box_sandbox_create", map[string]any{"image": "alpine", "resource": map[string]any{"memory": "64Gi"}}, "more than the policy allows"},
		{"box_sandbox_get_endpoint", map[string]any{"port": 18080, "sandbox_id": "x"}, "not created by this session"},
	} {
		res, out := callTool(t, cs, tc.tool, tc.args)
		e, _ := out["error"].(map[string]any)
		if !res.IsError || e["class"] != ClassBadArguments || !strings.Contains(e["message"].(string), tc.want) || len(out) != 1 {
			t.Errorf("%s %v: %v %v", tc.tool, tc.args, res.IsError, out)
		}
	}
	// Schema errors: a wrong type and an unknown argument.
	for _, args := range []map[string]any{{"command": 5}, {"command": "ls", "sudo": true}} {
		res, err := cs.CallTool(t.Context(), &sdkmcp.CallToolParams{Name: "box_command_run", Arguments: args})
		if err == nil && !res.IsError {
			t.Errorf("args %v accepted", args)
		}
	}
	if got := n.Load(); got != 0 {
		t.Fatalf("%d requests reached the corral server", got)
	}
	if !strings.Contains(trace.String(), `"tool":"command_run"`) || !strings.Contains(trace.String(), `"error_class":"bad_arguments"`) ||
		!strings.Contains(trace.String(), `"args_sha256":"`) || strings.Contains(trace.String(), "etc/shadow") {
		t.Fatalf("trace:\n%s", trace.String())
	}
}

// TestTemplateIsolationIsEveryCreates: the template's isolation tier is
// asked for by every create (a call cannot ask for extensions at all).
func TestTemplateIsolationIsEveryCreates(t *testing.T) {
	bodies := make(chan api.CreateSandboxRequest, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req api.CreateSandboxRequest
		if r.Method == http.MethodPost && json.NewDecoder(r.Body).Decode(&req) == nil {
			select {
			case bodies <- req:
			default:
			}
		}
		http.Error(w, `{"code":"SANDBOX::ISOLATION_NOT_ALLOWED","message":"no"}`, http.StatusBadRequest)
	}))
	t.Cleanup(srv.Close)
	c, err := sdk.New(sdk.WithBaseURL(srv.URL), sdk.WithAPIKey("k"))
	if err != nil {
		t.Fatal(err)
	}
	pol, err := ParsePolicy([]byte("tools = [\"sandbox_create\"]\n[template]\nimage = \"img\"\nisolation = \"runsc\"\n"), "p.toml")
	if err != nil {
		t.Fatal(err)
	}
	cs := connect(t, NewSession(Config{Client: c, Policy: pol}))
	if res, _ := callTool(t, cs, "sandbox_create", map[string]any{}); !res.IsError {
		t.Fatal("the create succeeded against a server that refuses it")
	}
	select {
	case req := <-bodies:
		if req.Extensions[api.ExtensionIsolation] != api.IsolationRunsc {
			t.Errorf("the create's extensions = %v, want %s=%s", req.Extensions, api.ExtensionIsolation, api.IsolationRunsc)
		}
	default:
		t.Fatal("no create reached the server")
	}
}

func TestBudgetsStopTheSession(t *testing.T) {
	c, _ := unreachable(t)
	pol := DefaultPolicy()
	pol.Budget.ToolCalls = 2
	cs := connect(t, NewSession(Config{Client: c, Policy: pol}))
	for i := range 3 {
		res, out := callTool(t, cs, "sandbox_list", map[string]any{})
		e, _ := out["error"].(map[string]any)
		if i < 2 && res.IsError || i == 2 && (e["class"] != ClassBudget || e["code"] != "BUDGET::TOOL_CALLS" || e["retryable"] != false) {
			t.Fatalf("call %d: %v", i, out)
		}
	}
	pol = DefaultPolicy()
	pol.Budget.WallTime.Duration = time.Nanosecond
	cs = connect(t, NewSession(Config{Client: c, Policy: pol}))
	if _, out := callTool(t, cs, "sandbox_list", map[string]any{}); out["error"].(map[string]any)["code"] != "BUDGET::WALL_TIME" {
		t.Fatalf("wall time: %v", out)
	}
}

func TestHTTPNeedsTheKeyAndAnAllowedOrigin(t *testing.T) {
	c, _ := unreachable(t)
	hub := NewHub(HTTPConfig{Config: Config{Client: c, Policy: DefaultPolicy()}, APIKey: "k-0123456789abcdef", AllowedOrigins: []string{"http://ok.localhost"}})
	defer hub.Close()
	srv := httptest.NewServer(hub)
	defer srv.Close()
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	post := func(h map[string]string) int {
		req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(init))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		for k, v := range h {
			req.Header.Set(k, v)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	for _, tc := range []struct {
		h    map[string]string
		want int
	}{
		{nil, http.StatusUnauthorized},
		{map[string]string{"Authorization": "Bearer wrong"}, http.StatusUnauthorized},
		{map[string]string{"Authorization": "Bearer k-0123456789abcdef", "Origin": "http://evil.test"}, http.StatusForbidden},
		{map[string]string{"Authorization": "Bearer k-0123456789abcdef"}, http.StatusOK},
		{map[string]string{"X-API-Key": "k-0123456789abcdef", "Origin": "http://ok.localhost"}, http.StatusOK},
	} {
		if got := post(tc.h); got != tc.want {
			t.Errorf("headers %v: status %d, want %d", tc.h, got, tc.want)
		}
	}
}

// TestPinnedSessionKeepsToItsSandbox: a pinned session (corral agent's)
// uses its sandbox only, whatever foreign_sandboxes says, and cannot
// create, fork or kill; none of the refusals reaches the server.
func TestPinnedSessionKeepsToItsSandbox(t *testing.T) {
	c, n := unreachable(t)
	pol := DefaultPolicy()
	pol.ForeignSandboxes = true
	s := NewSession(Config{Client: c, Policy: pol})
	s.own("mine")
	s.Pin("mine")
	cs := connect(t, s)
	for _, tc := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{"command_run", map[string]any{"command": "ls", "sandbox_id": "someone-elses"}, "only its sandbox mine"},
		{"file_read", map[string]any{"path": "a", "sandbox_id": "someone-elses"}, "only its sandbox mine"},
		{"sandbox_create", map[string]any{"image": "alpine"}, "cannot create others"},
		{"sandbox_fork", map[string]any{}, "cannot create others"},
		{"sandbox_kill", map[string]any{}, "not by a tool"},
	} {
		res, out := callTool(t, cs, tc.tool, tc.args)
		e, _ := out["error"].(map[string]any)
		if !res.IsError || e["class"] != ClassBadArguments || !strings.Contains(e["message"].(string), tc.want) {
			t.Errorf("%s %v: %v", tc.tool, tc.args, out)
		}
	}
	if got := n.Load(); got != 0 {
		t.Fatalf("%d requests reached the corral server", got)
	}
}

// TestDigestIsCanonical: the same arguments, however spelled, have one
// digest; different ones do not.
func TestDigestIsCanonical(t *testing.T) {
	same := []any{`{"b":1,"a":"x y"}`, "{ \"a\" : \"x y\",\n \"b\" : 1 }", json.RawMessage(`{"a":"x y","b":1}`), map[string]any{"b": 1, "a": "x y"}}
	want := Digest(same[0])
	for _, v := range same[1:] {
		if got := Digest(v); got != want {
			t.Errorf("Digest(%#v) = %s, want %s", v, got, want)
		}
	}
	for _, v := range []any{`{"a":"x y","b":2}`, `{"a":"x  y","b":1}`, `{"a":"x y","b":1.0}`} {
		if Digest(v) == want {
			t.Errorf("Digest(%#v) matches different arguments", v)
		}
	}
	if Digest("") != Digest(nil) || Digest(nil) != Digest("{}") || Digest("not json") == Digest("{}") {
		t.Error("empty arguments are {}, and text that is not JSON is hashed as it is")
	}
}
