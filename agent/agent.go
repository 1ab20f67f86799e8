// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

// Package agent is corral's restricted-execution agent as a library;
// `corral agent` is its command line. Run creates one sandbox from the
// tool policy's template, with an explicit network policy (deny-all
// unless the task allows domains), runs an OpenAI-compatible model's tool
// loop through the same tool layer as `corral mcp` (package mcp, in
// process, pinned to that sandbox), stops for an explicit reason (budgets
// of turns, tool calls, wall time and tokens included), deletes every
// sandbox it made on every path, and returns a Report whose figures come
// from tool results: command records keyed by call and request ids,
// artifacts marked as inputs or by the call that made them, and each
// number of the model's summary cited to the call whose result holds it
// or marked unverified. A trajectory (JSON lines), the tool layer's trace
// and an opt-in content log share the run id and the calls' request ids
// with the server's access log.
//
// The model's wire types are written here (a dozen fields) rather than
// taken from a client library that would pull in far more than the loop
// uses.
package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	sdkmcp "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/mcp"
	"github.com/corral-dev/corral/sdk"
)

// Stop reasons.
const (
	StopDone         = "done"
	StopTurnBudget   = "turn_budget"
	StopToolBudget   = "tool_budget"
	StopTimeBudget   = "time_budget"
	StopModelError   = "model_error"
	StopSandboxError = "sandbox_error"
	StopCancelled    = "cancelled"
	// StopTokenBudget: the model's reported tokens reached budget.tokens.
	StopTokenBudget = "token_budget"
	// StopTruncated: the model's reply was cut off (finish_reason length
	// or content_filter), so it is not a finished answer.
	StopTruncated = "truncated"
)

// Config is one run of the agent.
type Config struct {
	// Client reaches corral.
	Client *sdk.Client
	Policy mcp.Policy
	// Task is what the model is asked to do.
	Task string
	// Inputs are local files copied into the work directory first.
	Inputs []string
	// Domains are the task's network: the sandbox may reach these and
	// nothing else (each must be within the policy's template).
	Domains []string
	// ModelURL is the endpoint's base URL (".../v1"); the loop posts to
	// ModelURL + "/chat/completions".
	ModelURL string
	Model    string
	// ModelKey is sent to the model only, never into the sandbox.
	ModelKey string
	// Credentials are API keys the sandbox's HTTPS requests to a host get
	// from the credential vault: the sandbox uses them, never holds them.
	// Their hosts join Domains.
	Credentials []Credential
	// HTTPClient talks to the model (default: http.DefaultClient).
	HTTPClient *http.Client
	// ModelAttempts bounds the tries of one model request (default 5).
	ModelAttempts int
	// OutDir receives the work directory's files at the end ("" = none).
	OutDir string
	// Trajectory receives one JSON line per event (nil: discarded).
	Trajectory io.Writer
	// Trace receives the tool layer's lines (nil: discarded).
	Trace *slog.Logger
	// Version is told to the tool layer.
	Version string
	// RunID names the run in the trajectory, the report, the sandbox's
	// metadata and every trace line (default: a random one).
	RunID string
	// ContentLog, when set, receives what each call carried and answered
	// and what the model replied, one JSON line each, keyed by call id,
	// with the model key and the credentials redacted (opt-in: it holds
	// the task's data).
	ContentLog io.Writer
}

// Credential is one vault entry: requests to Host over HTTPS get
// "Authorization: Bearer Value".
type Credential struct {
	Host  string
	Value string
}

// modelTools are the tools the model may call; the sandbox's lifecycle
// is the agent's, not the model's.
var modelTools = []string{"command_run", "command_interrupt", "code_run", "file_read", "file_write", "file_delete", "file_search",
	"file_create_directories", "file_delete_directories", "file_move", "file_replace_contents", "artifact_list", "artifact_get", "sandbox_get_metrics"}

// run is the state of one run.
type run struct {
	cfg     Config
	rep     *Report
	model   *model
	cs      *sdkmcp.ClientSession
	sess    *mcp.Session
	traj    *trajectory
	content *contentLog
	start   time.Time
	reqSeq  int
	callSeq int
	// evidence are the tool results the model saw, in order.
	evidence []evidence
	// inputs are the inputs' sha256 by their path in the sandbox.
	inputs map[string]string
}

// Run runs the agent until it stops and returns its report. The error is
// for a run that could not start at all (bad configuration); every stop
// after that, failures included, is a Report with its StopReason.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg, err := checkConfig(cfg)
	if err != nil {
		return nil, err
	}
	pol := cfg.Policy
	secrets := []string{cfg.ModelKey}
	for _, c := range cfg.Credentials {
		secrets = append(secrets, c.Value)
	}
	r := &run{cfg: cfg, start: time.Now(), traj: &trajectory{w: cfg.Trajectory}, content: newContentLog(cfg.ContentLog, secrets),
		rep: &Report{RunID: cfg.RunID, Model: cfg.Model, Network: []string{}, Commands: []CommandRecord{}, Artifacts: []Artifact{},
			Sandboxes: []SandboxFate{}, SummaryFigures: []Citation{}},
		model: &model{url: strings.TrimSuffix(cfg.ModelURL, "/") + "/chat/completions", name: cfg.Model, key: cfg.ModelKey,
			hc: cfg.HTTPClient, attempts: cfg.ModelAttempts, backoff: time.Second},
		inputs: map[string]string{}}
	trace := cfg.Trace
	if trace == nil {
		trace = slog.New(slog.DiscardHandler)
	}
	r.sess = mcp.NewSession(mcp.Config{Client: cfg.Client, Policy: pol, Trace: trace.With("run_id", cfg.RunID), Version: cfg.Version,
		CredentialProxy: len(cfg.Credentials) > 0})
	ct, st := sdkmcp.NewInMemoryTransports()
	if _, err := r.sess.Server().Connect(ctx, st, nil); err != nil {
		return nil, err
	}
	cs, err := sdkmcp.NewClient(&sdkmcp.Implementation{Name: "corral-agent", Version: cfg.Version}, nil).Connect(ctx, ct, nil)
	if err != nil {
		return nil, err
	}
	r.cs = cs
	defer cs.Close()

	r.traj.write(map[string]any{"type": "start", "run_id": cfg.RunID, "model": cfg.Model, "task_sha256": sha(cfg.Task), "inputs": len(cfg.Inputs),
		"budget": map[string]any{"turns": pol.Budget.Turns, "tool_calls": pol.Budget.ToolCalls, "wall_time": pol.Budget.WallTime.String(),
			"tokens": pol.Budget.Tokens}})
	r.content.write(map[string]any{"type": "task", "run_id": cfg.RunID, "task": cfg.Task})
	wctx, cancel := context.WithTimeout(ctx, pol.Budget.WallTime.Duration)
	defer cancel()
	r.stop(r.loop(ctx, wctx))
	r.finish(ctx)
	return r.rep, nil
}

// checkConfig refuses a configuration a run cannot start with and fills
// in the defaults: the credentials' hosts join the domains, and the tool
// policy allows the model's tools only, plus sandbox_create for setup.
func checkConfig(cfg Config) (Config, error) {
	if strings.TrimSpace(cfg.Task) == "" {
		return cfg, errors.New("the task is empty")
	}
	if cfg.ModelURL == "" || cfg.Model == "" {
		return cfg, errors.New("a model endpoint (--model-url) and a model name (--model) are needed")
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = http.DefaultClient
	}
	if cfg.ModelAttempts == 0 {
		cfg.ModelAttempts = 5
	}
	if cfg.RunID == "" {
		cfg.RunID = sdk.NewIdempotencyKey()
	} else if !api.ValidRequestID(cfg.RunID) || len(cfg.RunID) > 63 || strings.ContainsFunc(cfg.RunID, func(c rune) bool {
		return !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.')
	}) {
		return cfg, fmt.Errorf("run id %q: use up to 63 letters, digits, '-', '_' and '.'", cfg.RunID)
	}
	cfg.Domains = slices.Clone(cfg.Domains)
	for _, c := range cfg.Credentials {
		if c.Host == "" || strings.ContainsAny(c.Host, "/:@* ") {
			return cfg, fmt.Errorf("credential host %q: give a host name, such as api.example.com", c.Host)
		}
		if c.Value == "" {
			return cfg, fmt.Errorf("credential for %s: the value is empty", c.Host)
		}
		if !slices.Contains(cfg.Domains, c.Host) {
			cfg.Domains = append(cfg.Domains, c.Host)
		}
	}
	for _, in := range cfg.Inputs {
		if fi, err := os.Stat(in); err != nil || !fi.Mode().IsRegular() {
			return cfg, fmt.Errorf("input %s: not a readable file", in)
		}
	}
	pol := cfg.Policy
	pol.Tools = slices.DeleteFunc(slices.Clone(pol.Tools), func(t string) bool { return !slices.Contains(modelTools, t) && t != "sandbox_create" })
	if !slices.Contains(pol.Tools, "sandbox_create") {
		pol.Tools = append(pol.Tools, "sandbox_create")
	}
	pol.ToolPrefix = ""
	// The run's sandbox is the only one its tools touch (the session is
	// pinned to it once made), whatever a shared policy file allows.
	pol.ForeignSandboxes = false
	cfg.Policy = pol
	return cfg, nil
}

// stopErr carries a stop reason out of the loop.
type stopErr struct{ reason, msg string }

func (e *stopErr) Error() string { return e.reason + ": " + e.msg }

func stopf(reason, format string, args ...any) error {
	return &stopErr{reason: reason, msg: fmt.Sprintf(format, args...)}
}

// stop records why the loop ended.
func (r *run) stop(err error) {
	var se *stopErr
	if !errors.As(err, &se) {
		se = &stopErr{reason: StopSandboxError, msg: err.Error()}
	}
	r.rep.StopReason, r.rep.StopMessage = se.reason, se.msg
}

// ctxStop maps a context's end onto its stop reason.
func ctxStop(parent, wctx context.Context) error {
	if parent.Err() != nil {
		return stopf(StopCancelled, "cancelled")
	}
	if wctx.Err() != nil {
		return stopf(StopTimeBudget, "the wall-time budget is spent")
	}
	return nil
}

func (r *run) loop(parent, ctx context.Context) error {
	if err := r.setup(ctx); err != nil {
		if se := ctxStop(parent, ctx); se != nil {
			return se
		}
		return err
	}
	tools, err := r.toolDefs(ctx)
	if err != nil {
		return stopf(StopSandboxError, "list the tools: %v", err)
	}
	msgs := []message{
		{Role: "system", Content: text(r.systemPrompt())},
		{Role: "user", Content: text(r.cfg.Task)},
	}
	for turn := 1; ; turn++ {
		if turn > r.cfg.Policy.Budget.Turns {
			return stopf(StopTurnBudget, "the budget of %d model turns is spent", r.cfg.Policy.Budget.Turns)
		}
		if se := ctxStop(parent, ctx); se != nil {
			return se
		}
		r.rep.Turns = turn
		res, err := r.ask(ctx, turn, chatRequest{Model: r.cfg.Model, Messages: msgs, Tools: tools})
		if err != nil {
			if se := ctxStop(parent, ctx); se != nil {
				return se
			}
			return stopf(StopModelError, "%v", err)
		}
		reply := res.Choices[0].Message
		reply.Role = "assistant"
		msgs = append(msgs, reply)
		if err := r.judge(reply, res.Choices[0].FinishReason); err != nil {
			return err
		}
		for _, tc := range reply.ToolCalls {
			content, stop := r.callTool(ctx, turn, tc)
			msgs = append(msgs, message{Role: "tool", ToolCallID: tc.ID, Content: text(content)})
			if stop != nil {
				if se := ctxStop(parent, ctx); se != nil {
					return se
				}
				return stop
			}
		}
	}
}

// judge decides whether a reply ends the run (its usage already counted):
// a reply cut off is truncated, tool calls or not; one without tool calls
// is the model's answer; tool calls run unless the tokens are spent.
func (r *run) judge(reply message, finish string) error {
	if finish == "length" || finish == "content_filter" {
		if reply.Content != nil {
			r.rep.ModelSummary = *reply.Content
		}
		return stopf(StopTruncated, "the model's reply was cut off (finish_reason %s), so it is not a finished answer", finish)
	}
	if len(reply.ToolCalls) == 0 {
		if reply.Content != nil {
			r.rep.ModelSummary = *reply.Content
		}
		return stopf(StopDone, "the model finished")
	}
	if used, budget := r.rep.PromptTokens+r.rep.CompletionTokens, r.cfg.Policy.Budget.Tokens; used >= budget {
		return stopf(StopTokenBudget, "the model has used %d tokens, the budget is %d", used, budget)
	}
	return nil
}

// setup creates the sandbox through the tool layer (so the policy's
// template, network rules and budget apply) and copies the inputs in.
func (r *run) setup(ctx context.Context) error {
	args := map[string]any{}
	ttl := int64(r.cfg.Policy.Budget.WallTime.Seconds()) + 300 // outlives the run a little: the backstop if this process dies
	ttl = min(max(ttl, 60), int64(r.cfg.Policy.Template.MaxTimeout.Seconds()))
	args["timeout_seconds"] = ttl
	rules := []any{}
	for _, d := range r.cfg.Domains {
		rules = append(rules, map[string]any{"action": "allow", "target": d})
	}
	args["network_policy"] = map[string]any{"defaultAction": "deny", "egress": rules}
	args["metadata"] = map[string]any{"corral-agent-run": r.cfg.RunID}
	var out map[string]any
	var terr map[string]any
	// Every attempt has the same arguments, so the tool layer sends the
	// same idempotency key: a retry after a create that failed late gets
	// the sandbox that create made, not a second one.
	for attempt := 1; ; attempt++ {
		start := time.Now()
		reqID := r.requestID()
		res, err := r.cs.CallTool(ctx, &sdkmcp.CallToolParams{Name: "sandbox_create", Arguments: args, Meta: sdkmcp.Meta{mcp.MetaRequestID: reqID}})
		out, terr = structured(res, err)
		r.traj.write(map[string]any{"type": "tool_call", "id": "setup-create", "attempt": attempt, "tool": "sandbox_create", "request_id": reqID,
			"args_sha256": mcp.Digest(args), "duration_ms": time.Since(start).Milliseconds(), "sandbox_id": out["sandbox_id"], "error": terr})
		if terr == nil || terr["retryable"] != true || attempt >= 4 || ctx.Err() != nil {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(attempt) * 2 * time.Second):
		}
	}
	if terr != nil {
		return stopf(StopSandboxError, "the sandbox could not be created: %v", terr["message"])
	}
	id, _ := out["sandbox_id"].(string)
	r.rep.SandboxID = id
	r.sess.Pin(id)
	if net, ok := out["network"].([]any); ok {
		for _, n := range net {
			r.rep.Network = append(r.rep.Network, fmt.Sprint(n))
		}
	}
	if sb, err := r.cfg.Client.GetSandbox(ctx, id); err == nil {
		r.rep.SandboxExpiresAt = sb.ExpiresAt
	}
	r.traj.write(map[string]any{"type": "sandbox", "sandbox_id": id, "expires_at": r.rep.SandboxExpiresAt, "network": r.rep.Network})
	if err := r.fillVault(ctx, id); err != nil {
		return err
	}
	return r.copyInputs(ctx, id)
}

// copyInputs uploads the inputs into the work directory.
func (r *run) copyInputs(ctx context.Context, id string) error {
	if len(r.cfg.Inputs) == 0 {
		return nil
	}
	sb, err := r.cfg.Client.Sandbox(ctx, id, sdk.SandboxOptions{})
	if err != nil {
		return stopf(StopSandboxError, "connect to the sandbox: %v", err)
	}
	var files []sdk.UploadFile
	sums := map[string]hash.Hash{}
	for _, in := range r.cfg.Inputs {
		f, err := os.Open(in)
		if err != nil {
			return stopf(StopSandboxError, "input %s: %v", in, err)
		}
		defer f.Close()
		// Hashed as it is sent: an input is never held in memory whole.
		p := path.Join(r.cfg.Policy.Template.Workdir, filepath.Base(in))
		sums[p] = sha256.New()
		files = append(files, sdk.UploadFile{Path: p, Content: io.TeeReader(f, sums[p]), Mode: 0o644})
	}
	if err := sb.UploadFiles(ctx, files); err != nil {
		return stopf(StopSandboxError, "copy the inputs in: %v", err)
	}
	for p, h := range sums {
		r.inputs[p] = hex.EncodeToString(h.Sum(nil))
	}
	r.traj.write(map[string]any{"type": "inputs", "files": len(files)})
	return nil
}

// structured reads a tool result's structured content and its error.
func structured(res *sdkmcp.CallToolResult, err error) (map[string]any, map[string]any) {
	if err != nil {
		return map[string]any{}, map[string]any{"class": mcp.ClassPlatform, "message": err.Error(), "retryable": false}
	}
	var out map[string]any
	b, _ := json.Marshal(res.StructuredContent)
	_ = json.Unmarshal(b, &out)
	if out == nil {
		out = map[string]any{}
	}
	if res.IsError {
		e, _ := out["error"].(map[string]any)
		if e == nil {
			// A schema error from the MCP layer: its text is the message.
			msg := ""
			for _, c := range res.Content {
				if tc, ok := c.(*sdkmcp.TextContent); ok {
					msg += tc.Text
				}
			}
			e = map[string]any{"class": mcp.ClassBadArguments, "message": msg, "retryable": false}
			out = map[string]any{"error": e}
		}
		return out, e
	}
	return out, nil
}

// toolDefs are the model's tools as chat-completions functions.
func (r *run) toolDefs(ctx context.Context) ([]toolDef, error) {
	res, err := r.cs.ListTools(ctx, nil)
	if err != nil {
		return nil, err
	}
	var defs []toolDef
	for _, t := range res.Tools {
		if !slices.Contains(modelTools, t.Name) {
			continue
		}
		var d toolDef
		d.Type = "function"
		d.Function.Name, d.Function.Description, d.Function.Parameters = t.Name, t.Description, t.InputSchema
		defs = append(defs, d)
	}
	return defs, nil
}

// fillVault gives the sandbox's credential proxy the run's credentials,
// through corral's egress API (which no tool reaches): the sandbox's
// requests get them on the way out, and nothing in it can read them.
func (r *run) fillVault(ctx context.Context, id string) error {
	if len(r.cfg.Credentials) == 0 {
		return nil
	}
	eg, err := r.cfg.Client.Egress(ctx, id, sdk.SandboxOptions{})
	if err != nil {
		return stopf(StopSandboxError, "reach the sandbox's egress API: %v", err)
	}
	var req api.CredentialVaultCreateRequest
	for i, c := range r.cfg.Credentials {
		name := fmt.Sprintf("credential-%d", i+1)
		req.Credentials = append(req.Credentials, api.Credential{Name: name, Source: api.CredentialSource{Type: "inline", Value: c.Value}})
		req.Bindings = append(req.Bindings, api.CredentialBinding{Name: name, Match: api.CredentialMatch{Hosts: []string{c.Host}},
			Auth: api.CredentialAuth{Type: "bearer", Credential: name}})
		r.rep.Credentials = append(r.rep.Credentials, c.Host)
	}
	if _, err := eg.CreateVault(ctx, req); err != nil {
		return stopf(StopSandboxError, "fill the sandbox's credential vault: %v", err)
	}
	r.traj.write(map[string]any{"type": "credentials", "hosts": r.rep.Credentials})
	return nil
}

func (r *run) systemPrompt() string {
	net := "no network"
	if len(r.rep.Network) > 0 {
		net = "network access only to " + strings.Join(r.rep.Network, ", ")
	}
	if len(r.rep.Credentials) > 0 {
		net += "; HTTPS requests to " + strings.Join(r.rep.Credentials, ", ") +
			" are given their API key on the way out (you do not have it and need not send one)"
	}
	inputs := ""
	if len(r.cfg.Inputs) > 0 {
		var names []string
		for _, in := range r.cfg.Inputs {
			names = append(names, filepath.Base(in))
		}
		inputs = " The task's input files are there: " + strings.Join(names, ", ") + "."
	}
	return "You work in an isolated Linux sandbox through tools; every result is structured JSON. Your work directory is " +
		r.cfg.Policy.Template.Workdir + " (relative paths are resolved there); the sandbox has " + net + "." + inputs +
		" Write what you produce (reports, charts) into the work directory. When the task is done, answer without calling a tool, " +
		"with a short summary of what you did and found."
}

// ask sends one model request and records each attempt.
func (r *run) ask(ctx context.Context, turn int, req chatRequest) (*chatResponse, error) {
	r.reqSeq++
	id := fmt.Sprintf("m%d", r.reqSeq)
	n := 0
	res, err := r.model.complete(ctx, req, func(a attempt) {
		n++
		ev := map[string]any{"type": "model_request", "id": id, "turn": turn, "attempt": n, "status": a.Status,
			"duration_ms": a.Duration.Milliseconds(), "messages": len(req.Messages)}
		if a.RetryAfter > 0 {
			ev["retry_after_ms"] = a.RetryAfter.Milliseconds()
		}
		if a.Err != "" {
			ev["error"] = a.Err
		}
		r.traj.write(ev)
	})
	if err != nil {
		return nil, err
	}
	r.rep.PromptTokens += res.Usage.PromptTokens
	r.rep.CompletionTokens += res.Usage.CompletionTokens
	var names []string
	for _, tc := range res.Choices[0].Message.ToolCalls {
		names = append(names, tc.Function.Name)
	}
	ce := map[string]any{"type": "model_reply", "id": id, "turn": turn, "finish_reason": res.Choices[0].FinishReason}
	if c := res.Choices[0].Message.Content; c != nil {
		ce["content"] = *c
	}
	if tcs := res.Choices[0].Message.ToolCalls; len(tcs) > 0 {
		ce["tool_calls"] = tcs
	}
	r.content.write(ce)
	r.traj.write(map[string]any{"type": "model_response", "id": id, "turn": turn, "finish_reason": res.Choices[0].FinishReason,
		"prompt_tokens": res.Usage.PromptTokens, "completion_tokens": res.Usage.CompletionTokens, "tool_calls": names})
	return res, nil
}

// callTool runs one of the model's tool calls and returns what the model
// is told; a non-nil error stops the loop.
func (r *run) callTool(ctx context.Context, turn int, tc toolCall) (string, error) {
	name := tc.Function.Name
	reqID := r.requestID()
	ev := map[string]any{"type": "tool_call", "id": tc.ID, "turn": turn, "tool": name, "request_id": reqID, "args_sha256": mcp.Digest(tc.Function.Arguments)}
	defer r.traj.write(ev)
	var args map[string]any
	if !slices.Contains(modelTools, name) {
		e := map[string]any{"class": mcp.ClassBadArguments, "message": fmt.Sprintf("there is no tool %q", name), "retryable": false}
		ev["error"] = e
		r.rep.ToolErrors++
		return toJSON(map[string]any{"error": e}), nil
	}
	if err := json.Unmarshal([]byte(orEmpty(tc.Function.Arguments)), &args); err != nil {
		e := map[string]any{"class": mcp.ClassBadArguments, "message": "the arguments are not a JSON object: " + err.Error(), "retryable": false}
		ev["error"] = e
		r.rep.ToolErrors++
		return toJSON(map[string]any{"error": e}), nil
	}
	r.rep.ToolCalls++
	start := time.Now()
	res, err := r.cs.CallTool(ctx, &sdkmcp.CallToolParams{Name: name, Arguments: args, Meta: sdkmcp.Meta{mcp.MetaRequestID: reqID}})
	out, terr := structured(res, err)
	end := time.Now()
	ev["duration_ms"] = end.Sub(start).Milliseconds()
	ev["sandbox_id"] = r.rep.SandboxID
	if terr == nil && (name == "command_run" || name == "code_run") {
		rec := commandRecord(name, out, ev)
		rec.CallID, rec.RequestID = tc.ID, reqID
		r.rep.Commands = append(r.rep.Commands, rec)
	}
	if terr == nil && res != nil && len(res.Content) > 1 {
		out["note"] = fmt.Sprintf("%d image(s) were produced; they are not shown to you, but they are in the results", len(res.Content)-1)
	}
	// What the model is sent: at most the policy's context_bytes.
	saw, content, cut := capForModel(out, r.cfg.Policy.Limits.ContextBytes)
	if cut > 0 {
		ev["context_cut_bytes"] = cut
	}
	r.evidence = append(r.evidence, evidence{callID: tc.ID, tool: name, start: start, end: end, out: saw})
	r.content.write(map[string]any{"type": "tool_call", "call_id": tc.ID, "request_id": reqID, "turn": turn, "tool": name,
		"arguments": args, "result": json.RawMessage(content)})
	if terr != nil {
		ev["error"] = terr
		r.rep.ToolErrors++
		switch {
		case terr["class"] == mcp.ClassBudget && terr["code"] == api.CodeBudgetWallTime:
			return content, stopf(StopTimeBudget, "%v", terr["message"])
		case terr["class"] == mcp.ClassBudget:
			return content, stopf(StopToolBudget, "%v", terr["message"])
		case ctx.Err() != nil:
			return content, stopf(StopTimeBudget, "the wall-time budget ran out during %s", name)
		case terr["class"] == mcp.ClassPlatform || terr["code"] == api.CodeSandboxNotFound || terr["code"] == api.CodeSandboxNotRunning:
			if !r.sandboxAlive(ctx) {
				return content, stopf(StopSandboxError, "the sandbox or corral stopped answering: %v", terr["message"])
			}
		}
	}
	return content, nil
}

// requestID is the next X-Request-ID of the run's tool calls: the run id
// and a sequence number, so the server's log joins the trajectory.
func (r *run) requestID() string {
	r.callSeq++
	return fmt.Sprintf("%s.%d", r.cfg.RunID, r.callSeq)
}

// commandRecord is what the result out of a command_run or code_run
// reports; the trajectory's event ev gets the exit code, timeout and
// truncation too.
func commandRecord(name string, out, ev map[string]any) CommandRecord {
	rec := CommandRecord{Tool: name, TimedOut: out["timed_out"] == true}
	if ec, ok := out["exit_code"].(float64); ok {
		c := int(ec)
		rec.ExitCode, ev["exit_code"] = &c, c
	}
	if ce, ok := out["error"].(map[string]any); ok {
		rec.CodeError = fmt.Sprint(ce["name"])
	}
	if d, ok := out["duration_ms"].(float64); ok {
		rec.DurationMS = int64(d)
	}
	rec.ExecutionID, _ = out["execution_id"].(string)
	ev["timed_out"], ev["truncated"] = rec.TimedOut, out["truncated"]
	return rec
}

// sandboxAlive asks corral (with its retries) whether the sandbox runs.
func (r *run) sandboxAlive(ctx context.Context) bool {
	sb, err := r.cfg.Client.GetSandbox(ctx, r.rep.SandboxID)
	return err == nil && sb.Status.State == api.StateRunning
}

// finish pulls the artifacts out and deletes the sandbox, whatever the
// stop; a sandbox it cannot delete is left to its TTL, and the report
// says when that ends.
func (r *run) finish(parent context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(parent), 2*time.Minute)
	defer cancel()
	if r.rep.SandboxID != "" && r.cfg.OutDir != "" {
		if err := r.pull(ctx); err != nil {
			r.traj.write(map[string]any{"type": "artifacts", "error": err.Error()})
		}
	}
	// Every sandbox the session made: the run's, and any a create made
	// before it failed.
	for _, id := range r.sess.Owned() {
		err := r.cfg.Client.DeleteSandbox(ctx, id)
		fate := SandboxFate{ID: id, Deleted: err == nil || errors.Is(err, sdk.ErrNotFound)}
		ev := map[string]any{"type": "cleanup", "sandbox_id": id, "deleted": fate.Deleted}
		if !fate.Deleted {
			fate.Error = err.Error()
			ev["error"] = fate.Error
			if id == r.rep.SandboxID {
				ev["ttl_backstop"] = r.rep.SandboxExpiresAt
			}
		}
		if id == r.rep.SandboxID {
			r.rep.SandboxDeleted = fate.Deleted
		}
		r.rep.Sandboxes = append(r.rep.Sandboxes, fate)
		r.traj.write(ev)
	}
	if r.rep.ModelSummary != "" {
		r.rep.SummaryFigures = cite(r.rep.ModelSummary, r.evidence)
		r.rep.Unverified = unverified(r.rep.SummaryFigures)
	}
	r.rep.DurationMS = time.Since(r.start).Milliseconds()
	r.traj.write(map[string]any{"type": "stop", "reason": r.rep.StopReason, "message": r.rep.StopMessage,
		"turns": r.rep.Turns, "tool_calls": r.rep.ToolCalls, "duration_ms": r.rep.DurationMS})
}

func toJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func orEmpty(s string) string {
	if strings.TrimSpace(s) == "" {
		return "{}"
	}
	return s
}
