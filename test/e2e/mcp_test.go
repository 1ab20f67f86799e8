// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"image"
	"image/color"
	"image/png"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	sdkmcp "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/internal/testutil"
	"github.com/corral-dev/corral/mcp"
	"github.com/corral-dev/corral/sdk"
)

// writePolicy writes a tool policy file for a test.
func writePolicy(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "policy.toml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

const mcpPolicy = `
[limits]
command_timeout = "20s"
output_bytes = 1000
file_bytes = 200000
[template]
image = "host"
max_timeout = "10m"
egress = ["pypi.org"]
[template.env]
CORRAL_TEMPLATE_MARK = "set-by-policy"
`

// mcpClient is a client of `corral mcp` over stdio.
func mcpStdio(t *testing.T, s *server, policy, trace string) *sdkmcp.ClientSession {
	t.Helper()
	cmd := exec.Command(binary, "mcp", "--server", s.url, "--api-key", testKey, "--policy", policy, "--trace", trace)
	cmd.Stderr = &testutil.LockedBuffer{}
	cs, err := sdkmcp.NewClient(&sdkmcp.Implementation{Name: "e2e", Version: "1"}, nil).Connect(ctx(t), &sdkmcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect to corral mcp: %v\n%s", err, cmd.Stderr)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// tool calls a tool and returns its structured result.
func tool(t *testing.T, cs *sdkmcp.ClientSession, name string, args map[string]any) (*sdkmcp.CallToolResult, map[string]any) {
	t.Helper()
	res, err := cs.CallTool(ctx(t), &sdkmcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var out map[string]any
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("%s: structured content %s: %v", name, b, err)
	}
	return res, out
}

// ok calls a tool that must succeed.
func ok(t *testing.T, cs *sdkmcp.ClientSession, name string, args map[string]any) map[string]any {
	t.Helper()
	res, out := tool(t, cs, name, args)
	if res.IsError {
		t.Fatalf("%s(%v) failed: %v", name, args, out)
	}
	return out
}

// toolErr calls a tool that must fail and returns its error.
func toolErr(t *testing.T, cs *sdkmcp.ClientSession, name string, args map[string]any) map[string]any {
	t.Helper()
	res, out := tool(t, cs, name, args)
	e, _ := out["error"].(map[string]any)
	if !res.IsError || e == nil || len(out) != 1 {
		t.Fatalf("%s(%v) = %v, want an error alone", name, args, out)
	}
	return e
}

func num(v any) int { f, _ := v.(float64); return int(f) }

// TestMCPToolsOverStdio drives every tool of `corral mcp` over stdio with
// the Go MCP SDK's own client against a native-runtime server.
func TestMCPToolsOverStdio(t *testing.T) {
	requireOCI(t)
	requireHostKernel(t)
	t.Parallel()
	s := startServer(t, t.TempDir(), "--runtime", "oci")
	trace := filepath.Join(t.TempDir(), "trace.jsonl")
	cs := mcpStdio(t, s, writePolicy(t, mcpPolicy), trace)

	tools, err := cs.ListTools(ctx(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(tools.Tools) != len(mcp.ToolNames()) {
		t.Fatalf("%d tools, want %d", len(tools.Tools), len(mcp.ToolNames()))
	}
	for _, tl := range tools.Tools {
		if tl.OutputSchema == nil || tl.InputSchema == nil {
			t.Errorf("%s has no schemas", tl.Name)
		}
	}

	// A network wider than the policy's is refused; the default is it.
	e := toolErr(t, cs, "sandbox_create", map[string]any{"network_policy": map[string]any{"egress": []any{map[string]any{"action": "allow", "target": "*.evil.test"}}}})
	if e["class"] != "bad_arguments" || !strings.Contains(e["message"].(string), "pypi.org") {
		t.Fatalf("wider network: %v", e)
	}
	sb := ok(t, cs, "sandbox_create", map[string]any{"timeout_seconds": 300})
	id, _ := sb["sandbox_id"].(string)
	if sb["state"] != "Running" || sb["workdir"] != "/workspace" || len(sb["network"].([]any)) != 1 {
		t.Fatalf("created %v", sb)
	}

	// Commands: exit code, both streams, the work directory.
	out := ok(t, cs, "command_run", map[string]any{"command": "pwd; echo err >&2; exit 3"})
	if num(out["exit_code"]) != 3 || out["stdout"].(map[string]any)["text"] != "/workspace\n" || out["stderr"].(map[string]any)["text"] != "err\n" || out["timed_out"] != false {
		t.Fatalf("command: %v", out)
	}
	// Long output keeps its head and tail with the count of what went.
	out = ok(t, cs, "command_run", map[string]any{"command": "echo START; head -c 100000 /dev/zero | tr '\\0' x; echo; echo END"})
	so := out["stdout"].(map[string]any)
	if out["truncated"] != true || num(so["bytes"]) != 100011 || num(so["dropped_bytes"]) != 100011-1000 ||
		!strings.HasPrefix(so["text"].(string), "START\nxxx") || !strings.HasSuffix(so["text"].(string), "xxx\nEND\n") {
		t.Fatalf("long output: truncated %v bytes %v dropped %v", out["truncated"], so["bytes"], so["dropped_bytes"])
	}
	start := time.Now()
	out = ok(t, cs, "command_run", map[string]any{"command": "echo before; sleep 60", "timeout_seconds": 1})
	if out["timed_out"] != true || !strings.Contains(out["stdout"].(map[string]any)["text"].(string), "before") || time.Since(start) > 20*time.Second {
		t.Fatalf("timeout: %v", out)
	}
	if e := toolErr(t, cs, "command_run", map[string]any{"command": "ls", "timeout_seconds": 3600}); !strings.Contains(e["message"].(string), "limit of 20") {
		t.Fatalf("long timeout: %v", e)
	}
	if e := toolErr(t, cs, "command_run", map[string]any{"command": "ls", "working_directory": "/etc"}); e["class"] != "bad_arguments" {
		t.Fatalf("cwd outside: %v", e)
	}
	bg := ok(t, cs, "command_run", map[string]any{"command": "sleep 300", "background": true})
	if bg["execution_id"] == "" || bg["exit_code"] != nil {
		t.Fatalf("background: %v", bg)
	}
	ok(t, cs, "command_interrupt", map[string]any{"execution_id": bg["execution_id"]})

	// Files.
	ok(t, cs, "file_write", map[string]any{"path": "src/a.txt", "content": "hello corral\n", "mode": 644})
	if got := ok(t, cs, "file_read", map[string]any{"path": "src/a.txt"}); got["content"] != "hello corral\n" || got["path"] != "/workspace/src/a.txt" {
		t.Fatalf("read: %v", got)
	}
	if got := ok(t, cs, "file_read", map[string]any{"path": "/workspace/src/a.txt", "range_header": "bytes=6-11"}); got["content"] != "corral" {
		t.Fatalf("range: %v", got)
	}
	if got := ok(t, cs, "file_read", map[string]any{"path": "src/a.txt", "range_header": "bytes=-7", "encoding": "base64"}); got["content"] != base64.StdEncoding.EncodeToString([]byte("corral\n")) {
		t.Fatalf("suffix range: %v", got)
	}
	ok(t, cs, "command_run", map[string]any{"command": "head -c 300000 /dev/zero > big.bin"})
	if got := ok(t, cs, "file_read", map[string]any{"path": "big.bin", "encoding": "base64"}); got["truncated"] != true || num(got["bytes"]) != 200000 {
		t.Fatalf("big read: truncated %v bytes %v", got["truncated"], got["bytes"])
	}
	if e := toolErr(t, cs, "file_write", map[string]any{"path": "huge", "content": strings.Repeat("x", 200001)}); e["class"] != "bad_arguments" {
		t.Fatalf("huge write: %v", e)
	}
	for _, p := range []string{"../etc/passwd", "/etc/passwd", "/workspace/../root/.bashrc"} {
		if e := toolErr(t, cs, "file_read", map[string]any{"path": p}); e["class"] != "bad_arguments" {
			t.Fatalf("read %s: %v", p, e)
		}
	}
	if got := ok(t, cs, "file_replace_contents", map[string]any{"entries": []any{map[string]any{"path": "src/a.txt", "old_content": "corral", "new_content": "world"}}}); num(got["replaced"].(map[string]any)["/workspace/src/a.txt"]) != 1 {
		t.Fatalf("replace: %v", got)
	}
	ok(t, cs, "file_create_directories", map[string]any{"entries": []any{map[string]any{"path": "out/plots"}}})
	ok(t, cs, "file_move", map[string]any{"entries": []any{map[string]any{"src": "src/a.txt", "dest": "out/a.txt"}}})
	if got := ok(t, cs, "file_search", map[string]any{"pattern": "*.txt"}); len(got["files"].([]any)) != 1 || got["files"].([]any)[0].(map[string]any)["path"] != "/workspace/out/a.txt" {
		t.Fatalf("search: %v", got)
	}
	ok(t, cs, "file_delete", map[string]any{"paths": []any{"big.bin"}})
	if e := toolErr(t, cs, "file_delete_directories", map[string]any{"paths": []any{"."}}); e["class"] != "bad_arguments" {
		t.Fatalf("delete the workdir: %v", e)
	}
	ok(t, cs, "file_delete_directories", map[string]any{"paths": []any{"out/plots"}})

	// Artifacts: a PNG comes back as image content.
	var pngBuf bytes.Buffer
	img := image.NewRGBA(image.Rect(0, 0, 4, 4))
	img.Set(1, 1, color.RGBA{R: 255, A: 255})
	_ = png.Encode(&pngBuf, img)
	ok(t, cs, "file_write", map[string]any{"path": "out/chart.png", "content": base64.StdEncoding.EncodeToString(pngBuf.Bytes()), "encoding": "base64"})
	list := ok(t, cs, "artifact_list", map[string]any{})
	var names []string
	for _, f := range list["files"].([]any) {
		names = append(names, f.(map[string]any)["path"].(string))
	}
	if strings.Join(names, ",") != "/workspace/out/a.txt,/workspace/out/chart.png" {
		t.Fatalf("artifacts: %v", names)
	}
	res, art := tool(t, cs, "artifact_get", map[string]any{"path": "out/chart.png"})
	if res.IsError || art["encoding"] != "image" || len(res.Content) != 2 {
		t.Fatalf("artifact_get: %v", art)
	}
	if ic, ok := res.Content[1].(*sdkmcp.ImageContent); !ok || ic.MIMEType != "image/png" || !bytes.Equal(ic.Data, pngBuf.Bytes()) {
		t.Fatalf("image content: %#v", res.Content[1])
	}

	// Code: state kept, an error is a result, images attached.
	ok(t, cs, "code_run", map[string]any{"code": "x = 41"})
	if got := ok(t, cs, "code_run", map[string]any{"code": "print('side'); x + 1"}); got["results"].([]any)[0].(map[string]any)["text"] != "42" ||
		got["stdout"].(map[string]any)["text"] != "side\n" {
		t.Fatalf("code: %v", got)
	}
	if got := ok(t, cs, "code_run", map[string]any{"code": "1/0"}); got["error"].(map[string]any)["name"] != "ZeroDivisionError" {
		t.Fatalf("code error: %v", got)
	}
	if got := ok(t, cs, "code_run", map[string]any{"code": "import time\ntime.sleep(60)", "timeout_seconds": 2}); got["timed_out"] != true {
		t.Fatalf("code timeout: %v", got)
	}
	if got := ok(t, cs, "code_run", map[string]any{"code": "x"}); got["results"].([]any)[0].(map[string]any)["text"] != "41" {
		t.Fatalf("state after an interrupt: %v", got)
	}

	// The sandbox's own ports are not handed out.
	for _, port := range []int{44772, 18080} {
		if e := toolErr(t, cs, "sandbox_get_endpoint", map[string]any{"port": port}); e["class"] != "bad_arguments" {
			t.Fatalf("endpoint %d: %v", port, e)
		}
	}
	ok(t, cs, "sandbox_get_endpoint", map[string]any{"port": 8000})
	if got := ok(t, cs, "sandbox_healthcheck", map[string]any{}); got["healthy"] != true {
		t.Fatalf("health: %v", got)
	}
	ok(t, cs, "sandbox_get_metrics", map[string]any{})
	ok(t, cs, "sandbox_renew", map[string]any{"timeout_seconds": 600})
	if e := toolErr(t, cs, "sandbox_renew", map[string]any{"timeout_seconds": 7200}); e["class"] != "bad_arguments" {
		t.Fatalf("renew past the policy: %v", e)
	}
	if got := ok(t, cs, "sandbox_list", map[string]any{}); len(got["sandboxes"].([]any)) != 1 {
		t.Fatalf("list: %v", got)
	}
	if got := ok(t, cs, "sandbox_get_info", map[string]any{"sandbox_id": id}); got["state"] != "Running" {
		t.Fatalf("info: %v", got)
	}
	var snaps []string
	for range 4 { // the default budget of snapshots
		got := ok(t, cs, "sandbox_snapshot", map[string]any{})
		if got["state"] != "Ready" || got["snapshot_id"] == "" {
			t.Fatalf("snapshot on the native runtime: %v", got)
		}
		snaps = append(snaps, got["snapshot_id"].(string))
	}
	if e := toolErr(t, cs, "sandbox_snapshot", map[string]any{}); e["class"] != "budget" || e["code"] != "BUDGET::SNAPSHOTS" {
		t.Fatalf("a fifth snapshot: %v", e)
	}
	// Another tenant's sandbox (here: one made outside the session) is off limits.
	other := createHost(t, s)
	if e := toolErr(t, cs, "command_run", map[string]any{"sandbox_id": other, "command": "id"}); !strings.Contains(e["message"].(string), "not created by this session") {
		t.Fatalf("foreign sandbox: %v", e)
	}

	// A second sandbox, a fork of the first (two would pass the budget);
	// then the session ends and takes both with it.
	ok(t, cs, "command_run", map[string]any{"command": "echo forked-state > carried.txt"})
	if e := toolErr(t, cs, "sandbox_fork", map[string]any{"count": 2}); e["class"] != "budget" || e["code"] != "BUDGET::SANDBOXES" {
		t.Fatalf("fork past the budget: %v", e)
	}
	fork := ok(t, cs, "sandbox_fork", map[string]any{})
	forks, _ := fork["forks"].([]any)
	if len(forks) != 1 {
		t.Fatalf("fork: %v", fork)
	}
	second := map[string]any{"sandbox_id": forks[0]}
	if out := ok(t, cs, "command_run", map[string]any{"sandbox_id": forks[0], "command": "cat carried.txt; echo $CORRAL_TEMPLATE_MARK"}); out["stdout"].(map[string]any)["text"] != "forked-state\nset-by-policy\n" {
		t.Fatalf("the fork's files and the template's environment: %v", out)
	}
	// The fork lives what a create lives (600 s here), not the source's
	// age plus its renewal.
	if sb, err := s.client(t).GetSandbox(ctx(t), forks[0].(string)); err != nil || sb.ExpiresAt == nil || sb.ExpiresAt.After(time.Now().Add(601*time.Second)) {
		t.Fatalf("the fork's expiry: %+v %v", sb, err)
	}
	if e := toolErr(t, cs, "command_run", map[string]any{"command": "id"}); !strings.Contains(e["message"].(string), "2 sandboxes") {
		t.Fatalf("ambiguous sandbox: %v", e)
	}
	if e := toolErr(t, cs, "sandbox_create", map[string]any{}); e["class"] != "budget" || e["code"] != "BUDGET::SANDBOXES" {
		t.Fatalf("third sandbox: %v", e)
	}
	ok(t, cs, "sandbox_kill", map[string]any{"sandbox_id": second["sandbox_id"]})
	cs.Close()
	c := s.client(t)
	testutil.WaitFor(t, 30*time.Second, "the session's sandbox to be deleted", func() bool {
		_, err := c.GetSandbox(ctx(t), id)
		return errors.Is(err, sdk.ErrNotFound)
	})
	if _, err := c.GetSandbox(ctx(t), other); err != nil {
		t.Fatalf("the session deleted a sandbox it did not create: %v", err)
	}
	// Its snapshots went with it.
	for _, sn := range snaps {
		if _, err := c.GetSnapshot(ctx(t), sn); !errors.Is(err, sdk.ErrNotFound) {
			t.Errorf("the session's snapshot %s after it ended: %v, want not found", sn, err)
		}
	}

	// The trace: one line per call, with ids and digests, no arguments.
	b, err := os.ReadFile(trace)
	if err != nil {
		t.Fatal(err)
	}
	lines := 0
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		var l map[string]any
		if json.Unmarshal(sc.Bytes(), &l) != nil || l["msg"] != "tool call" {
			continue
		}
		lines++
		if id, _ := l["request_id"].(string); id == "" || len(l["args_sha256"].(string)) != 64 || l["tool"] == nil || l["tool"] == "" {
			t.Fatalf("trace line %s", sc.Bytes())
		}
	}
	if lines < 40 || bytes.Contains(b, []byte("hello corral")) {
		t.Fatalf("%d trace lines:\n%s", lines, b)
	}
}

// createHost creates a host-image sandbox outside any MCP session.
func createHost(t *testing.T, s *server) string {
	t.Helper()
	sb, err := s.client(t).CreateSandbox(ctx(t), api.CreateSandboxRequest{Image: &api.ImageSpec{URI: "host"}}, sdk.CreateOptions{Wait: true})
	if err != nil {
		t.Fatal(err)
	}
	return sb.ID
}

// TestMCPOverStreamableHTTP serves the tools over HTTP: the key and the
// origin are checked, each session has its own sandboxes, and they are
// deleted when the session ends.
func TestMCPOverStreamableHTTP(t *testing.T) {
	requireOCI(t)
	t.Parallel()
	s := startServer(t, t.TempDir(), "--runtime", "oci")
	const key = "mcp-e2e-key-0123456789"
	cmd := exec.Command(binary, "mcp", "--transport", "streamable-http", "--listen", "127.0.0.1:0", "--server", s.url, "--api-key", testKey,
		"--policy", writePolicy(t, mcpPolicy), "--mcp-key", key, "--allow-origin", "http://localhost:6274")
	pr, pw := io.Pipe()
	cmd.Stderr = pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); pw.Close(); close(done) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-done })
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			var l map[string]any
			if json.Unmarshal(sc.Bytes(), &l) == nil && l["msg"] == "serving" {
				addr <- l["listen"].(string)
			}
		}
	}()
	var url string
	select {
	case url = <-addr:
	case <-time.After(30 * time.Second):
		t.Fatal("corral mcp did not start")
	}

	raw := func(hdr map[string]string) int {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		if h := hdr["Host"]; h != "" {
			req.Host = h
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	if got := raw(nil); got != http.StatusUnauthorized {
		t.Fatalf("no key: %d", got)
	}
	if got := raw(map[string]string{"Authorization": "Bearer " + key, "Origin": "http://evil.test"}); got != http.StatusForbidden {
		t.Fatalf("foreign origin: %d", got)
	}
	if got := raw(map[string]string{"Authorization": "Bearer " + key, "Host": "evil.test"}); got != http.StatusForbidden {
		t.Fatalf("rebound host: %d", got)
	}

	connect := func() *sdkmcp.ClientSession {
		hc := &http.Client{Transport: headerRT{"Authorization": "Bearer " + key}}
		cs, err := sdkmcp.NewClient(&sdkmcp.Implementation{Name: "e2e-http", Version: "1"}, nil).Connect(ctx(t),
			&sdkmcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return cs
	}
	a, b := connect(), connect()
	var wg sync.WaitGroup
	ids := make([]string, 2)
	for i, cs := range []*sdkmcp.ClientSession{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, out := tool(t, cs, "sandbox_create", map[string]any{})
			if res.IsError {
				t.Errorf("create: %v", out)
				return
			}
			ids[i] = out["sandbox_id"].(string)
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	if got := ok(t, a, "command_run", map[string]any{"command": "echo $((6*7))"}); got["stdout"].(map[string]any)["text"] != "42\n" {
		t.Fatalf("command over http: %v", got)
	}
	// Each session sees only its own sandbox.
	if e := toolErr(t, a, "command_run", map[string]any{"sandbox_id": ids[1], "command": "id"}); e["class"] != "bad_arguments" {
		t.Fatalf("other session's sandbox: %v", e)
	}
	if got := ok(t, b, "sandbox_list", map[string]any{}); len(got["sandboxes"].([]any)) != 1 || got["sandboxes"].([]any)[0].(map[string]any)["sandbox_id"] != ids[1] {
		t.Fatalf("b's list: %v", got)
	}
	a.Close()
	c := s.client(t)
	testutil.WaitFor(t, 30*time.Second, "session a's sandbox to be deleted", func() bool {
		_, err := c.GetSandbox(ctx(t), ids[0])
		return err != nil
	})
	if _, err := c.GetSandbox(ctx(t), ids[1]); err != nil {
		t.Fatalf("b's sandbox went with a's session: %v", err)
	}
	b.Close()
}

// headerRT adds headers to every request.
type headerRT map[string]string

func (h headerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h {
		r.Header.Set(k, v)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// TestMCPWithTheTypeScriptSDKClient drives `corral mcp` with a client
// nobody here wrote: the MCP TypeScript SDK's, from npm.
func TestMCPWithTheTypeScriptSDKClient(t *testing.T) {
	requireOCI(t)
	t.Parallel()
	dir := nodeDir(t, "mcpjs")
	s := startServer(t, t.TempDir(), "--runtime", "oci")
	node := exec.CommandContext(ctx(t), "node", "scenario.mjs")
	node.Dir = dir
	node.Env = append(os.Environ(), "CORRAL_BIN="+binary, "CORRAL_SERVER="+s.url, "CORRAL_API_KEY="+testKey, "CORRAL_POLICY="+writePolicy(t, mcpPolicy))
	var stderr bytes.Buffer
	node.Stderr = &stderr
	out, err := node.Output()
	if err != nil {
		t.Fatalf("the TypeScript scenario failed: %v\n%s%s", err, out, stderr.Bytes())
	}
	var f map[string]any
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &f); err != nil {
		t.Fatalf("findings %s: %v", out, err)
	}
	want := len(mcp.ToolNames())
	if num(f["tools"]) != want || num(f["withOutputSchema"]) != want || f["state"] != "Running" || f["stdout"] != "from-js\n" ||
		num(f["exitCode"]) != 7 || f["read"] != "written by js" || f["outsideClass"] != "bad_arguments" || f["badArgs"] == "accepted" || f["killed"] != true {
		t.Fatalf("findings: %v", f)
	}
	t.Logf("TypeScript SDK client: %s", lines[len(lines)-1])
}
