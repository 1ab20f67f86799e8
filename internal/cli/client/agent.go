// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/corral-dev/corral/agent"
)

// runAgent is `corral agent`: a restricted-execution agent on one sandbox.
func runAgent(ctx context.Context, e *env, args []string) int {
	fs := newFlagSet(e, "agent", "agent [flags] --model-url URL --model NAME --task TEXT")
	var f mcpFlags
	f.register(fs)
	task := fs.String("task", "", "what the model is asked to do")
	taskFile := fs.String("task-file", "", "read the task from this file")
	var inputs, domains listFlag
	fs.Var(&inputs, "input", "a local file copied into the sandbox's work directory first (repeatable)")
	var creds listFlag
	fs.Var(&creds, "credential", "HOST=ENV: HTTPS requests to HOST get \"Authorization: Bearer $ENV\" from the sandbox's credential vault; the sandbox never holds the value (repeatable; HOST joins --allow-domain)")
	fs.Var(&domains, "allow-domain", "a domain the sandbox may reach, within the policy's template.egress (repeatable; default: none, no network)")
	modelURL := fs.String("model-url", "", "OpenAI-compatible endpoint, such as http://localhost:11434/v1 (default: $CORRAL_MODEL_URL)")
	modelName := fs.String("model", "", "the model's name (default: $CORRAL_MODEL)")
	keyEnv := fs.String("model-key-env", "OPENAI_API_KEY", "environment variable holding the model's API key (sent to the model only, never into the sandbox)")
	outDir := fs.String("out-dir", "corral-agent-out", "where the artifacts, trajectory.jsonl, report.json and report.md go")
	contentLog := fs.Bool("content-log", false, "also write content.jsonl: each call's arguments and result and each model reply, by call id (secrets redacted; it holds the task's data)")
	runID := fs.String("run-id", "", "the run's id, in the trajectory, the trace, the report and the sandbox's metadata (default: a random one)")
	if ok, code := parseFlags(fs, e, args); !ok {
		return code
	}
	if fs.NArg() > 0 {
		return fail(e, "agent: unexpected argument %q (quote the task: --task '...')", fs.Arg(0))
	}
	if *taskFile != "" {
		if *task != "" {
			return fail(e, "agent: give --task or --task-file, not both")
		}
		b, err := os.ReadFile(*taskFile)
		if err != nil {
			return fail(e, "agent: %v", err)
		}
		*task = string(b)
	}
	if strings.TrimSpace(*task) == "" {
		return fail(e, "agent: give the task with --task TEXT or --task-file FILE")
	}
	if *modelURL == "" {
		*modelURL = e.Getenv("CORRAL_MODEL_URL")
	}
	if *modelName == "" {
		*modelName = e.Getenv("CORRAL_MODEL")
	}
	var credentials []agent.Credential
	for _, c := range creds {
		host, name, ok := strings.Cut(c, "=")
		if !ok || host == "" || name == "" {
			return fail(e, "agent: --credential %q: give HOST=ENV, such as api.example.com=EXAMPLE_TOKEN", c)
		}
		v := e.Getenv(name)
		if v == "" {
			return fail(e, "agent: --credential %s: $%s is empty or not set", host, name)
		}
		credentials = append(credentials, agent.Credential{Host: host, Value: v})
	}
	cfg, closeTrace, err := f.setup(e)
	if err != nil {
		return fail(e, "agent: %v", err)
	}
	defer closeTrace()
	if err := os.MkdirAll(*outDir, 0o755); err != nil {
		return fail(e, "agent: %v", err)
	}
	traj, err := os.OpenFile(filepath.Join(*outDir, "trajectory.jsonl"), os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return fail(e, "agent: %v", err)
	}
	defer traj.Close()
	var content io.Writer
	if *contentLog {
		f, err := os.OpenFile(filepath.Join(*outDir, "content.jsonl"), os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
		if err != nil {
			return fail(e, "agent: %v", err)
		}
		defer f.Close()
		content = f
	}
	rep, err := agent.Run(ctx, agent.Config{RunID: *runID, ContentLog: content,
		Client: cfg.Client, Policy: cfg.Policy, Task: *task, Inputs: inputs, Domains: domains,
		Credentials: credentials, ModelURL: *modelURL, Model: *modelName, ModelKey: e.Getenv(*keyEnv),
		OutDir: filepath.Join(*outDir, "artifacts"), Trajectory: traj, Trace: cfg.Trace, Version: cfg.Version,
	})
	if err != nil {
		return fail(e, "agent: %v", err)
	}
	b, _ := json.MarshalIndent(rep, "", "  ")
	if err := os.WriteFile(filepath.Join(*outDir, "report.json"), append(b, '\n'), 0o644); err != nil {
		return fail(e, "agent: %v", err)
	}
	md := rep.Markdown()
	if err := os.WriteFile(filepath.Join(*outDir, "report.md"), []byte(md), 0o644); err != nil {
		return fail(e, "agent: %v", err)
	}
	fmt.Fprint(e.Stdout, md)
	switch rep.StopReason {
	case agent.StopDone:
		return 0
	case agent.StopCancelled:
		return 130
	}
	return 1
}
