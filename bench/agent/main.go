// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

// Command agent breaks a `corral agent` run down into where its time goes:
// the model, corral's create, the tools, and the rest (the input copy,
// the artifact pull, the delete), with its tokens and the seconds its
// sandbox lived, on each isolation tier of the native runtime, in the same
// run. The model is a scripted chat-completions server on loopback that
// answers after a fixed latency, so the figures are corral's, not a real
// model's; the task is the report agent's shape (read a CSV, compute, write
// a report, check it) with the host image's python3. As root, runc on PATH:
//
//	go run ./bench/agent [-n 5] [-model-latency 300ms] [-runsc PATH]
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/corral-dev/corral/agent"
	"github.com/corral-dev/corral/bench/internal/benchsrv"
	"github.com/corral-dev/corral/mcp"
)

func main() {
	n := flag.Int("n", 5, "runs per tier")
	latency := flag.Duration("model-latency", 300*time.Millisecond, "how long the scripted model takes to answer")
	runsc := flag.String("runsc", "runsc", "the runsc binary of the gVisor tier (\"\" leaves the tier out)")
	flag.Parse()
	if err := run(*n, *latency, *runsc); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// script is the model's side of a run: what it calls, turn by turn.
var script = []map[string]any{
	{"name": "command_run", "arguments": map[string]any{"command": "head -3 sales.csv; wc -l < sales.csv"}},
	{"name": "command_run", "arguments": map[string]any{"command": `python3 -c 'import csv; r=list(csv.DictReader(open("sales.csv"))); t=sum(int(x["units"]) for x in r); b=max(r, key=lambda x: int(x["units"])); print("total", t, "best", b["month"])'`}},
	{"name": "file_write", "arguments": map[string]any{"path": "report.md", "content": "# Sales\n\n- Total units: 847\n- Best month: jun\n"}},
	{"name": "file_read", "arguments": map[string]any{"path": "report.md"}},
}

// scriptedModel answers each request after latency: the script's next
// call, then a final answer.
func scriptedModel(latency time.Duration) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Messages []json.RawMessage `json:"messages"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		time.Sleep(latency)
		// Each run starts with two messages (system, task).
		n := (len(req.Messages) - 2) / 2
		msg := map[string]any{"role": "assistant", "content": "847 units in all; jun was the best month."}
		finish := "stop"
		if n < len(script) {
			args, _ := json.Marshal(script[n]["arguments"])
			msg = map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{"id": fmt.Sprintf("call_%d", n+1),
				"type": "function", "function": map[string]any{"name": script[n]["name"], "arguments": string(args)}}}}
			finish = "tool_calls"
		}
		body, _ := json.Marshal(req.Messages)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"choices": []any{map[string]any{"message": msg, "finish_reason": finish}},
			"usage": map[string]any{"prompt_tokens": len(body) / 4, "completion_tokens": 40}})
	}))
}

// breakdown is one run's time, split.
type breakdown struct {
	total, model, create, tools, rest time.Duration
	sandboxSeconds                    float64
	prompt, completion                int
	stop                              string
}

func run(n int, latency time.Duration, runsc string) error {
	args := []string{"--runtime", "oci"}
	tiers := []string{"runc"}
	if runsc != "" {
		args = append(args, "--isolation", "runc,runsc", "--oci-runsc", runsc)
		tiers = append(tiers, "runsc")
	}
	srv, err := benchsrv.Start(args...)
	if err != nil {
		return err
	}
	defer srv.Close()
	model := scriptedModel(latency)
	defer model.Close()
	dir, err := os.MkdirTemp("", "corral-bench-agent-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	csv := filepath.Join(dir, "sales.csv")
	if err := os.WriteFile(csv, []byte("month,units\njan,120\nfeb,95\nmar,143\napr,160\nmay,151\njun,178\n"), 0o644); err != nil {
		return err
	}
	fmt.Printf("corral agent, %d runs per tier, a scripted model answering in %v, %d tool calls and %d model turns a run\n\n",
		n, latency, len(script), len(script)+1)
	fmt.Println("| tier | run (median) | model | create | tools | rest | sandbox-seconds | prompt / completion tokens |")
	fmt.Println("|---|---|---|---|---|---|---|---|")
	for _, tier := range tiers {
		var runs []breakdown
		for i := range n + 1 { // the first run warms the image and the caches; it is not counted
			b, err := once(srv, model.URL, csv, filepath.Join(dir, fmt.Sprintf("%s-%d", tier, i)), tier)
			if err != nil {
				return fmt.Errorf("%s: %w", tier, err)
			}
			if b.stop != agent.StopDone {
				return fmt.Errorf("%s: the run stopped with %s", tier, b.stop)
			}
			if i > 0 {
				runs = append(runs, b)
			}
		}
		m := median(runs)
		fmt.Printf("| %s | %s | %s | %s | %s | %s | %.2f | %d / %d |\n", tier, ms(m.total), ms(m.model), ms(m.create), ms(m.tools), ms(m.rest),
			m.sandboxSeconds, m.prompt, m.completion)
	}
	return nil
}

// once runs the agent in process, as a product embedding it would, and
// splits its time from the trajectory.
func once(srv *benchsrv.Server, modelURL, csv, out, tier string) (breakdown, error) {
	pol := mcp.DefaultPolicy()
	pol.Template.Image = "host"
	pol.Template.Isolation = tier
	var traj bytes.Buffer
	start := time.Now()
	rep, err := agent.Run(context.Background(), agent.Config{Client: srv.Admin, Policy: pol, Task: "Total units and the best month of sales.csv, in report.md.",
		Inputs: []string{csv}, ModelURL: modelURL + "/v1", Model: "scripted", OutDir: out, Trajectory: &traj})
	if err != nil {
		return breakdown{}, err
	}
	b := breakdown{total: time.Since(start), prompt: rep.PromptTokens, completion: rep.CompletionTokens, stop: rep.StopReason}
	var created, deleted time.Time
	for _, line := range bytes.Split(bytes.TrimSpace(traj.Bytes()), []byte("\n")) {
		var ev struct {
			Type       string `json:"type"`
			ID         string `json:"id"`
			DurationMS int64  `json:"duration_ms"`
			Time       time.Time
		}
		if err := json.Unmarshal(line, &ev); err != nil {
			return b, err
		}
		d := time.Duration(ev.DurationMS) * time.Millisecond
		switch {
		case ev.Type == "model_request":
			b.model += d
		case ev.Type == "tool_call" && ev.ID == "setup-create":
			b.create += d
		case ev.Type == "tool_call":
			b.tools += d
		case ev.Type == "sandbox":
			created = ev.Time
		case ev.Type == "cleanup":
			deleted = ev.Time
		}
	}
	b.rest = b.total - b.model - b.create - b.tools
	// From the create's answer to the delete's; the create itself is
	// counted in create.
	b.sandboxSeconds = (deleted.Sub(created) + b.create).Seconds()
	return b, nil
}

// median is the run with the median total time.
func median(runs []breakdown) breakdown {
	slices.SortFunc(runs, func(a, b breakdown) int { return int(a.total - b.total) })
	return runs[len(runs)/2]
}

func ms(d time.Duration) string {
	return strings.TrimSuffix(fmt.Sprintf("%.0f ms", float64(d.Microseconds())/1000), ".0")
}
