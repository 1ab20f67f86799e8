// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

// Package mcp is corral's agent-facing tool layer and its MCP server
// (`corral mcp`), usable as a library: OpenSandbox's MCP tool names and
// parameters plus corral's own (code_run, artifacts, snapshots, forks),
// each with an input and an output schema and a structured, capped result,
// all under a Policy the model cannot widen (tools, limits, budgets, the
// one template a session may create, an explicit network policy always).
// A Session is one client's use of the tools; Session.Server serves them
// over any MCP transport. It talks to the platform only through package
// sdk; package agent drives the same tools in process. The MCP protocol
// is the official Go SDK's (github.com/modelcontextprotocol/go-sdk).
package mcp

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	sdkmcp "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/sdk"
)

// Config is what a session needs.
type Config struct {
	// Client reaches the corral server, with the session's API key.
	Client *sdk.Client
	Policy Policy
	// Trace receives one structured line per tool call; nil discards.
	Trace *slog.Logger
	// Sandbox pins the session to one sandbox of its caller's: tools act
	// on it when the call names none and refuse any other, and the session
	// does not delete it. (Pin does the same for a sandbox the session
	// created.)
	Sandbox string
	// Version is the server version MCP clients are told.
	Version string
	// CredentialProxy makes the session's creates (those with a network)
	// ask for a credential proxy, so that the caller (not a tool) can
	// then fill the sandbox's vault: `corral agent --credential`.
	CredentialProxy bool
}

// Session is one client's use of the tools: its budget, the sandboxes it
// created and its trace. Safe for concurrent calls.
type Session struct {
	cfg   Config
	pol   *Policy
	id    string
	start time.Time
	trace *slog.Logger

	mu      sync.Mutex
	pinned  string // the one sandbox the tools may use ("" = any the policy allows)
	calls   int
	created int
	owned   []string // sandboxes the session created, in order
	snaps   []string // snapshots the session took, in order
	conns   map[string]*sdk.Sandbox
	// retries are the idempotency keys of creates that failed, by their
	// arguments' digest: a retry with the same arguments reuses the key.
	retries map[string]string
}

// NewSession starts a session; its wall-time budget runs from now.
func NewSession(cfg Config) *Session {
	pol := cfg.Policy
	trace := cfg.Trace
	if trace == nil {
		trace = slog.New(slog.DiscardHandler)
	}
	s := &Session{cfg: cfg, pol: &pol, id: randomID(), start: time.Now(), trace: trace, conns: map[string]*sdk.Sandbox{},
		retries: map[string]string{}}
	if cfg.Sandbox != "" {
		s.owned, s.pinned = []string{cfg.Sandbox}, cfg.Sandbox
	}
	return s
}

// Pin confines the session to one sandbox it created (`corral agent` pins
// its setup sandbox before the model's first call): tools act on it when a
// call names none, refuse every other sandbox whatever the policy's
// foreign_sandboxes says, and cannot create, fork or kill.
func (s *Session) Pin(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pinned = id
}

// pinnedID is the sandbox the session is pinned to, or "".
func (s *Session) pinnedID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pinned
}

// ID is the session's id, in every trace line.
func (s *Session) ID() string { return s.id }

// Policy is the session's policy.
func (s *Session) Policy() Policy { return *s.pol }

// Stats is what a session has used.
type Stats struct {
	ToolCalls int
	Sandboxes int
	Elapsed   time.Duration
}

// Stats reports the session's use of its budget.
func (s *Session) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Stats{ToolCalls: s.calls, Sandboxes: s.created, Elapsed: time.Since(s.start)}
}

// Owned lists the sandboxes the session created (or was pinned to).
func (s *Session) Owned() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.owned)
}

// Close deletes the snapshots the session took and the sandboxes it
// created (a pinned sandbox is its caller's), unless the policy keeps
// them, and returns those it could not delete.
func (s *Session) Close(ctx context.Context) []string {
	if s.pol.KeepSandboxes {
		return nil
	}
	var left []string
	s.mu.Lock()
	snaps := slices.Clone(s.snaps)
	s.mu.Unlock()
	for _, id := range snaps {
		if err := s.cfg.Client.DeleteSnapshot(ctx, id); err != nil && !errors.Is(err, sdk.ErrNotFound) {
			left = append(left, id)
			s.trace.WarnContext(ctx, "session end: snapshot not deleted", "session", s.id, "snapshot_id", id, "err", err)
		}
	}
	for _, id := range s.Owned() {
		if id == s.cfg.Sandbox {
			continue // the caller's
		}
		if err := s.cfg.Client.DeleteSandbox(ctx, id); err != nil && !errors.Is(err, sdk.ErrNotFound) {
			left = append(left, id)
			s.trace.WarnContext(ctx, "session end: sandbox not deleted", "session", s.id, "sandbox_id", id, "err", err)
		}
	}
	return left
}

// Server returns an MCP server offering the session's tools, all acting
// for this session (stdio: one client, one session).
func (s *Session) Server() *sdkmcp.Server {
	return newServer(s.pol, s.cfg.Version, func(*sdkmcp.CallToolRequest) *Session { return s })
}

// newServer is an MCP server offering the policy's tools; pick says which
// session a call belongs to.
func newServer(pol *Policy, version string, pick func(*sdkmcp.CallToolRequest) *Session) *sdkmcp.Server {
	if version == "" {
		version = "dev"
	}
	srv := sdkmcp.NewServer(&sdkmcp.Implementation{Name: "corral", Title: "corral sandboxes", Version: version}, &sdkmcp.ServerOptions{
		Instructions: "Tools to run commands, code and files in isolated corral sandboxes. Paths are relative to the work directory " +
			pol.Template.Workdir + ". Every result is structured; a failed call has only an `error` with a class " +
			"(bad_arguments, sandbox, platform, budget) and whether it is retryable.",
	})
	prefix := ""
	if pol.ToolPrefix != "" {
		prefix = pol.ToolPrefix + "_"
	}
	for _, t := range allTools() {
		if pol.Offers(t.name) {
			t.add(srv, prefix, pick)
		}
	}
	return srv
}

// tool is one tool: its name and how to add it to a server.
type tool struct {
	name string
	add  func(srv *sdkmcp.Server, prefix string, pick func(*sdkmcp.CallToolRequest) *Session)
}

// call is one tool call in progress: what the handler learns for the trace
// and any content beyond the structured result (images).
type call struct {
	sandboxID string
	exitCode  *int
	content   []sdkmcp.Content
}

// def declares a tool whose handler takes In and returns *Out.
func def[In, Out any](name, desc string, readOnly bool, h func(context.Context, *Session, *call, In) (*Out, error)) tool {
	return tool{name: name, add: func(srv *sdkmcp.Server, prefix string, pick func(*sdkmcp.CallToolRequest) *Session) {
		in, err := jsonschema.For[In](nil)
		if err != nil {
			panic(fmt.Sprintf("tool %s: input schema: %v", name, err)) // a programming error, caught by the tests
		}
		out, err := jsonschema.For[Out](nil)
		if err != nil {
			panic(fmt.Sprintf("tool %s: output schema: %v", name, err))
		}
		// A failed call's output has only its error, so nothing at the top
		// is required.
		out.Required = nil
		t := &sdkmcp.Tool{Name: prefix + name, Description: desc, InputSchema: in, OutputSchema: out,
			Annotations: &sdkmcp.ToolAnnotations{ReadOnlyHint: readOnly}}
		// The output is marshalled here, not by the MCP SDK, so that a
		// failed call's has its error alone.
		sdkmcp.AddTool(srv, t, func(ctx context.Context, req *sdkmcp.CallToolRequest, args In) (*sdkmcp.CallToolResult, json.RawMessage, error) {
			s := pick(req)
			reqID, _ := req.Params.Meta[MetaRequestID].(string)
			res, raw := invoke(s, ctx, name, reqID, req.Params.Arguments, func(ctx context.Context, c *call) (*Out, error) { return h(ctx, s, c, args) })
			return res, raw, nil
		})
	}}
}

// MetaRequestID is the _meta key of a tool call's request id: a caller
// may choose it (in the call's _meta; it must be a valid X-Request-ID),
// else the session picks one; either way it is on the call's trace line,
// sent as X-Request-ID with every request the call makes to corral (so the
// server's log has it), and in the result's _meta.
const MetaRequestID = "corral.dev/request_id"

// invoke runs one call under the budget and the call timeout, classifies
// its error and writes its trace line.
func invoke[Out any](s *Session, ctx context.Context, name, reqID string, rawArgs any, h func(context.Context, *call) (*Out, error)) (*sdkmcp.CallToolResult, json.RawMessage) {
	start := time.Now()
	if !api.ValidRequestID(reqID) {
		reqID = randomID()
	}
	ctx = sdk.WithRequestID(ctx, reqID)
	c := &call{}
	var out *Out
	terr := s.charge()
	if terr == nil {
		cctx, cancel := context.WithTimeout(ctx, s.pol.Limits.CallTimeout.Duration)
		var err error
		out, err = h(cctx, c)
		cancel()
		if err != nil {
			terr = classify(err)
			if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
				terr.Message = fmt.Sprintf("the call took longer than the policy's call timeout (%v)", s.pol.Limits.CallTimeout)
			}
		}
	}
	res := &sdkmcp.CallToolResult{Meta: sdkmcp.Meta{MetaRequestID: reqID}}
	var raw []byte
	if terr != nil {
		raw, _ = json.Marshal(Failure{Error: terr})
		res.IsError = true
	} else {
		raw, _ = json.Marshal(out)
	}
	if len(c.content) > 0 {
		res.Content = append([]sdkmcp.Content{&sdkmcp.TextContent{Text: string(raw)}}, c.content...)
	}
	attrs := []any{"request_id", reqID, "session", s.id, "tool", name, "args_sha256", Digest(rawArgs),
		"duration_ms", time.Since(start).Milliseconds()}
	if c.sandboxID != "" {
		attrs = append(attrs, "sandbox_id", c.sandboxID)
	}
	if c.exitCode != nil {
		attrs = append(attrs, "exit_code", *c.exitCode)
	}
	if terr != nil {
		attrs = append(attrs, "error_class", terr.Class, "retryable", terr.Retryable)
		if terr.Code != "" {
			attrs = append(attrs, "error_code", terr.Code)
		}
	}
	s.trace.InfoContext(ctx, "tool call", attrs...)
	return res, raw
}

// charge counts one call against the budget.
func (s *Session) charge() *ToolError {
	s.mu.Lock()
	defer s.mu.Unlock()
	if el := time.Since(s.start); el > s.pol.Budget.WallTime.Duration {
		return budgetSpent(api.CodeBudgetWallTime, "the session's wall-time budget (%v) is spent", s.pol.Budget.WallTime)
	}
	if s.calls >= s.pol.Budget.ToolCalls {
		return budgetSpent(api.CodeBudgetToolCalls, "the session's budget of %d tool calls is spent", s.pol.Budget.ToolCalls)
	}
	s.calls++
	return nil
}

// chargeSandbox counts one sandbox against the budget.
func (s *Session) chargeSandbox() *ToolError { return s.chargeSandboxes(1) }

// chargeSandboxes counts n sandboxes against the budget, all or none.
func (s *Session) chargeSandboxes(n int) *ToolError {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.created+n > s.pol.Budget.Sandboxes {
		if s.created >= s.pol.Budget.Sandboxes {
			return budgetSpent(api.CodeBudgetSandboxes, "the session's budget of %d sandboxes is spent", s.pol.Budget.Sandboxes)
		}
		return budgetSpent(api.CodeBudgetSandboxes, "the session's budget of %d sandboxes has %d left, not %d", s.pol.Budget.Sandboxes, s.pol.Budget.Sandboxes-s.created, n)
	}
	s.created += n
	return nil
}

// chargeSnapshot counts one snapshot against the budget; the session
// deletes it when it ends (ownSnapshot).
func (s *Session) chargeSnapshot() *ToolError {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.snaps) >= s.pol.Budget.Snapshots {
		return budgetSpent(api.CodeBudgetSnapshots, "the session's budget of %d snapshots is spent", s.pol.Budget.Snapshots)
	}
	s.snaps = append(s.snaps, "")
	return nil
}

// ownSnapshot records the snapshot the last charge was for ("" if the
// call made none: the charge is given back).
func (s *Session) ownSnapshot(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i := slices.Index(s.snaps, ""); i >= 0 {
		if id == "" {
			s.snaps = slices.Delete(s.snaps, i, i+1)
		} else {
			s.snaps[i] = id
		}
	}
}

// createKey is the idempotency key of a create with these arguments
// (their digest): a retry of a create that failed, perhaps after the
// server made the sandbox (a readiness timeout, a lost answer), reuses the
// failed attempt's key, so the server answers it with that sandbox rather
// than making a second. retry reports a reused key: the sandbox budget
// was charged by the first attempt.
func (s *Session) createKey(args string) (key string, retry bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if k, ok := s.retries[args]; ok {
		return k, true
	}
	k := sdk.NewIdempotencyKey()
	s.retries[args] = k
	return k, false
}

// createDone forgets a create's key once it succeeded: the same arguments
// again are a new sandbox.
func (s *Session) createDone(args string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.retries, args)
}

func (s *Session) own(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !slices.Contains(s.owned, id) {
		s.owned = append(s.owned, id)
	}
}

func (s *Session) disown(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.owned = slices.DeleteFunc(s.owned, func(o string) bool { return o == id })
	delete(s.conns, id)
}

// sandboxID resolves a call's sandbox_id: the pinned or only sandbox when
// empty; refused when the session may not use it.
func (s *Session) sandboxID(c *call, id string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id = strings.TrimSpace(id)
	if id == "" {
		switch {
		case s.pinned != "":
			id = s.pinned
		case len(s.owned) == 1:
			id = s.owned[0]
		case len(s.owned) == 0:
			return "", badArgs("sandbox_id is required: the session has no sandbox yet (create one with sandbox_create)")
		default:
			return "", badArgs("sandbox_id is required: the session has %d sandboxes (%s)", len(s.owned), strings.Join(s.owned, ", "))
		}
	}
	if s.pinned != "" && id != s.pinned {
		return "", badArgs("sandbox %q: this session may use only its sandbox %s", id, s.pinned)
	}
	if (s.pinned != "" || !s.pol.ForeignSandboxes) && !slices.Contains(s.owned, id) {
		return "", badArgs("sandbox %q was not created by this session, and the policy does not allow others", id)
	}
	c.sandboxID = id
	return id, nil
}

// sandbox is the execd client of a call's sandbox.
func (s *Session) sandbox(ctx context.Context, c *call, id string) (*sdk.Sandbox, error) {
	id, err := s.sandboxID(c, id)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	sb := s.conns[id]
	s.mu.Unlock()
	if sb != nil {
		return sb, nil
	}
	sb, err = s.cfg.Client.Sandbox(ctx, id, sdk.SandboxOptions{})
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.conns[id] = sb
	s.mu.Unlock()
	return sb, nil
}

// Digest is the SHA-256 of a call's arguments in canonical JSON (object
// keys sorted, no spaces, numbers as written), so that a trace can match
// calls without holding what they carried, and so that the trace and
// `corral agent`'s trajectory agree however a model spelled the same
// arguments. v is the arguments as JSON text (json.RawMessage, []byte or
// string; empty means {}) or a value to marshal.
func Digest(v any) string {
	var raw []byte
	switch a := v.(type) {
	case json.RawMessage:
		raw = a
	case []byte:
		raw = a
	case string:
		raw = []byte(a)
	case nil:
	default:
		raw, _ = json.Marshal(a)
	}
	canon := []byte("{}")
	if len(bytes.TrimSpace(raw)) > 0 {
		canon = raw // not JSON: hashed as it is
		d := json.NewDecoder(bytes.NewReader(raw))
		d.UseNumber()
		var x any
		if d.Decode(&x) == nil && !d.More() {
			canon, _ = json.Marshal(x)
		}
	}
	sum := sha256.Sum256(canon)
	return hex.EncodeToString(sum[:])
}

func randomID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
