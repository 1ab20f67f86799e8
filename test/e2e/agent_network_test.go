// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdkmcp "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/corral-dev/corral/agent"
	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/internal/testutil"
	"github.com/corral-dev/corral/internal/testutil/netlab"
	"github.com/corral-dev/corral/mcp"
	"github.com/corral-dev/corral/sdk"
)

// TestAgentNoNetworkMeansNone: on a server whose default network policy
// allows everything, a sandbox created with no policy reaches the test's
// host (the control), while `corral agent` with no --allow-domain, and a
// `corral mcp` session whose template has no egress, reach nothing: the
// host hears no request from them.
func TestAgentNoNetworkMeansNone(t *testing.T) {
	requireOCI(t)
	t.Parallel()
	w := netlab.NewWorld(t)
	var heard atomic.Int64
	netlab.ServeHTTPIn(t, w.World, netlab.WorldOther+":80", http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		heard.Add(1)
		_, _ = io.WriteString(rw, "reached\n")
	}))
	s := startServer(t, t.TempDir(), "--runtime", "oci", "--network-default-policy", `{"defaultAction":"allow"}`,
		"--egress-uplink-netns", netlab.NetnsPath(w.Uplink), "--egress-subnet", "10.222.0.0/24", "--egress-upstream", netlab.WorldDNS+":53")
	c := s.client(t)
	probe := `python3 -c 'import urllib.request; print(urllib.request.urlopen("http://` + netlab.WorldOther + `/", timeout=5).read().decode())'`

	// The control: the server's default really is open.
	sb, err := c.CreateSandbox(ctx(t), ociCreate("host"), sdk.CreateOptions{Wait: true})
	if err != nil {
		t.Fatal(err)
	}
	x, err := c.Sandbox(ctx(t), sb.ID, sdk.SandboxOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if out, errOut, code, err := x.Run(ctx(t), probe, sdk.CommandOptions{}); err != nil || code != 0 || !strings.Contains(out, "reached") {
		t.Fatalf("the control sandbox did not reach the host: %d %q %q %v", code, out, errOut, err)
	}
	if err := c.DeleteSandbox(ctx(t), sb.ID); err != nil {
		t.Fatal(err)
	}
	control := heard.Load()
	if control != 1 {
		t.Fatalf("the host heard %d requests from the control, want 1", control)
	}

	// The agent, without --allow-domain.
	m := newScriptedModel(t, callTool("command_run", map[string]any{"command": probe}), finalText("no network"))
	a := runAgentOnce(t, s.url, m, strings.Replace(agentPolicy, `egress = ["pypi.org", "*.pythonhosted.org"]`, "", 1), "--task", "fetch it")
	expectStop(t, s, a, agent.StopDone, 0)
	if len(a.rep.Commands) != 1 || a.rep.Commands[0].ExitCode == nil || *a.rep.Commands[0].ExitCode == 0 || len(a.rep.Network) != 0 {
		t.Fatalf("the agent's probe: %+v", a.rep)
	}

	// corral mcp, its template without egress.
	pol := mcp.DefaultPolicy()
	pol.Template.Image = "host"
	sess := mcp.NewSession(mcp.Config{Client: c, Policy: pol})
	ct, st := sdkmcp.NewInMemoryTransports()
	if _, err := sess.Server().Connect(ctx(t), st, nil); err != nil {
		t.Fatal(err)
	}
	cs, err := sdkmcp.NewClient(&sdkmcp.Implementation{Name: "test"}, nil).Connect(ctx(t), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	defer sess.Close(ctx(t))
	for _, call := range []struct {
		tool string
		args map[string]any
	}{{"sandbox_create", map[string]any{}}, {"command_run", map[string]any{"command": probe}}} {
		res, err := cs.CallTool(ctx(t), &sdkmcp.CallToolParams{Name: call.tool, Arguments: call.args})
		if err != nil || res.IsError {
			t.Fatalf("%s: %v %+v", call.tool, err, res)
		}
		out := fmt.Sprint(res.StructuredContent)
		if call.tool == "command_run" && (strings.Contains(out, "reached") || strings.Contains(out, "exit_code:0")) {
			t.Fatalf("the MCP session's probe: %s", out)
		}
	}
	if n := heard.Load() - control; n != 0 {
		t.Fatalf("the host heard %d requests from sandboxes that were to have no network", n)
	}
}

// TestAgentCreateFailsLate puts a proxy in front of a real server that
// passes the agent's create but fails the sandbox's first reads (the
// create's readiness wait): the agent's retry reuses the create's
// idempotency key and gets the sandbox the first attempt made, and when
// every attempt fails, the sandbox that was made is deleted and listed in
// the report. No run leaves a sandbox behind.
func TestAgentCreateFailsLate(t *testing.T) {
	requireOCI(t)
	t.Parallel()
	s := startServer(t, t.TempDir(), "--runtime", "oci")
	c := s.client(t)
	target, _ := url.Parse(s.url)
	proxy := httputil.NewSingleHostReverseProxy(target)
	for _, tc := range []struct {
		name     string
		failGETs int64
		stop     string
	}{
		{"a retry gets the same sandbox", 4, agent.StopDone},
		{"every attempt fails", 1 << 30, agent.StopSandboxError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			keys := map[string]int{}
			var failed atomic.Int64
			front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method == http.MethodPost && r.URL.Path == "/v1/sandboxes" {
					mu.Lock()
					keys[r.Header.Get(api.HeaderIdempotencyKey)]++
					mu.Unlock()
				}
				if r.Method == http.MethodGet && strings.Count(r.URL.Path, "/") == 3 && strings.HasPrefix(r.URL.Path, "/v1/sandboxes/") &&
					failed.Add(1) <= tc.failGETs {
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(http.StatusServiceUnavailable)
					fmt.Fprint(w, `{"code":"GENERAL::UNAVAILABLE","message":"a proxy in the way"}`)
					return
				}
				proxy.ServeHTTP(w, r)
			}))
			defer front.Close()
			m := newScriptedModel(t, callTool("command_run", map[string]any{"command": "echo hi"}), finalText("ok"))
			a := runAgentOnce(t, front.URL, m, agentPolicy, "--task", "x")
			expectStop(t, s, a, tc.stop, map[bool]int{true: 0, false: 1}[tc.stop == agent.StopDone])
			mu.Lock()
			posts, distinct := 0, len(keys)
			for _, n := range keys {
				posts += n
			}
			mu.Unlock()
			if posts < 2 || distinct != 1 {
				t.Fatalf("%d creates with %d idempotency keys; want retries with one key", posts, distinct)
			}
			if len(a.rep.Sandboxes) != 1 || !a.rep.Sandboxes[0].Deleted {
				t.Fatalf("the report's sandboxes: %+v", a.rep.Sandboxes)
			}
			if tc.stop == agent.StopDone && a.rep.Sandboxes[0].ID != a.rep.SandboxID {
				t.Fatalf("the run's sandbox %s is not the one the first create made (%s)", a.rep.SandboxID, a.rep.Sandboxes[0].ID)
			}
			list, err := c.ListSandboxes(ctx(t), sdk.ListOptions{})
			if err != nil || len(list.Items) != 0 {
				t.Fatalf("sandboxes left: %+v %v", list, err)
			}
		})
	}
}

// TestAgentLogsJoin: the trajectory, the tool layer's trace and the
// server's access log of one run join by its run id and each call's
// request id, and the argument digests of the trajectory and the trace
// agree although the model writes its arguments unsorted and spaced.
func TestAgentLogsJoin(t *testing.T) {
	requireOCI(t)
	t.Parallel()
	// Through the server's proxy, execd calls are in its access log too.
	s := startServer(t, t.TempDir(), "--runtime", "oci", "--endpoints", "proxy", "--log-level", "debug")
	c := s.client(t)
	var byLabel int
	m := newScriptedModel(t,
		reply{calls: []scriptedCall{{name: "command_run", raw: `{"timeout_seconds": 10,   "command": "echo joined"}`}}},
		reply{calls: []scriptedCall{{name: "file_write", raw: "{ \"path\" : \"a.txt\",\n \"content\" : \"x\" }"}}, before: func(*modelRequest) {
			list, err := c.ListSandboxes(ctx(t), sdk.ListOptions{})
			if err != nil {
				t.Error(err)
			}
			for _, sb := range list.Items {
				if sb.Metadata["corral-agent-run"] != "" {
					byLabel++
				}
			}
		}},
		finalText("done"))
	a := runAgentOnce(t, s.url, m, agentPolicy, "--task", "x")
	expectStop(t, s, a, agent.StopDone, 0)
	start := a.events("start")
	runID, _ := start[0]["run_id"].(string)
	if runID == "" || a.rep.RunID != runID || byLabel != 1 {
		t.Fatalf("run id %q, report's %q, sandboxes labelled with a run id: %d", runID, a.rep.RunID, byLabel)
	}

	// The trace: every line has the run id; by request id, its digest.
	traceDigest := map[string]string{}
	for _, l := range bytes.Split(readFile(t, filepath.Join(a.outDir, "..", "trace.jsonl")), []byte("\n")) {
		var line map[string]any
		if json.Unmarshal(l, &line) != nil || line["msg"] != "tool call" {
			continue
		}
		if line["run_id"] != runID {
			t.Errorf("a trace line without the run id: %v", line)
		}
		traceDigest[fmt.Sprint(line["request_id"])] = fmt.Sprint(line["args_sha256"])
	}
	calls := a.events("tool_call")
	if len(calls) != 3 { // the setup's create, then the model's two
		t.Fatalf("tool calls in the trajectory: %v", calls)
	}
	// The server logs a request once its handler returns, which for a
	// command's stream can be just after the client has read its end.
	logged := map[string]bool{}
	testutil.WaitFor(t, 10*time.Second, "every call's requests in the server's access log", func() bool {
		for _, l := range strings.Split(s.stderr.String(), "\n") {
			var line map[string]any
			if json.Unmarshal([]byte(l), &line) == nil && line["msg"] == "request" {
				logged[fmt.Sprint(line["request_id"])] = true
			}
		}
		for _, ev := range calls {
			if !logged[fmt.Sprint(ev["request_id"])] {
				return false
			}
		}
		return true
	})
	for _, ev := range calls {
		id, _ := ev["request_id"].(string)
		if !strings.HasPrefix(id, runID+".") {
			t.Errorf("tool call %v: request id %q is not the run's", ev["id"], id)
		}
		if d, ok := traceDigest[id]; !ok || d != ev["args_sha256"] {
			t.Errorf("tool call %v (%s): the trace's digest %q, the trajectory's %v", ev["id"], id, d, ev["args_sha256"])
		}
		if !logged[id] {
			t.Errorf("tool call %v (%s) is not in the server's access log", ev["id"], id)
		}
	}
}

func readFile(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
