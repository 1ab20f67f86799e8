// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package mcp

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	sdkmcp "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/corral-dev/corral/sdk"
)

type commandIn struct {
	SandboxID        string            `json:"sandbox_id,omitempty" jsonschema:"the sandbox (default: the session's only one)"`
	Command          string            `json:"command" jsonschema:"a shell command line (run by /bin/sh -c)"`
	Background       bool              `json:"background,omitempty" jsonschema:"start it and return its execution_id at once"`
	WorkingDirectory string            `json:"working_directory,omitempty" jsonschema:"where it runs (default: the work directory)"`
	TimeoutSeconds   int64             `json:"timeout_seconds,omitempty" jsonschema:"kill it after this long (default and maximum: the policy's)"`
	Env              map[string]string `json:"env,omitempty" jsonschema:"extra environment variables"`
	ConnectIfMissing bool              `json:"connect_if_missing,omitempty" jsonschema:"accepted for compatibility"`
}

// CommandOut is command_run's result.
type CommandOut struct {
	Failure
	SandboxID   string `json:"sandbox_id,omitempty"`
	ExecutionID string `json:"execution_id,omitempty"`
	// ExitCode is absent for a background command.
	ExitCode   *int   `json:"exit_code,omitempty"`
	Stdout     Output `json:"stdout"`
	Stderr     Output `json:"stderr"`
	DurationMS int64  `json:"duration_ms"`
	TimedOut   bool   `json:"timed_out"`
	Truncated  bool   `json:"truncated" jsonschema:"whether either stream was elided"`
	Background bool   `json:"background,omitempty"`
}

// timeoutOf is a call's timeout within the policy.
func (s *Session) timeoutOf(secs int64) (time.Duration, error) {
	limit := s.pol.Limits.CommandTimeout.Duration
	if secs < 0 {
		return 0, badArgs("timeout_seconds %d: want a positive number", secs)
	}
	if secs == 0 {
		return limit, nil
	}
	d := time.Duration(secs) * time.Second
	if d > limit {
		return 0, badArgs("timeout_seconds %d exceeds the policy's limit of %d", secs, int64(limit.Seconds()))
	}
	return d, nil
}

func runCommand(ctx context.Context, s *Session, c *call, in commandIn) (*CommandOut, error) {
	if strings.TrimSpace(in.Command) == "" {
		return nil, badArgs("command is empty")
	}
	cwd, err := s.pol.confine(in.WorkingDirectory, "working_directory")
	if err != nil {
		return nil, err
	}
	timeout, err := s.timeoutOf(in.TimeoutSeconds)
	if err != nil {
		return nil, err
	}
	sb, err := s.sandbox(ctx, c, in.SandboxID)
	if err != nil {
		return nil, err
	}
	opts := sdk.CommandOptions{Cwd: cwd, Env: in.Env, Timeout: timeout}
	if in.Background {
		id, err := sb.StartBackground(ctx, in.Command, opts)
		if err != nil {
			return nil, err
		}
		return &CommandOut{SandboxID: sb.ID, ExecutionID: id, Background: true, Stdout: Output{}, Stderr: Output{}}, nil
	}
	stdout, stderr := newCapture(s.pol.Limits.OutputBytes), newCapture(s.pol.Limits.OutputBytes)
	start := time.Now()
	res, err := sb.ExecResult(ctx, in.Command, opts, stdout, stderr)
	if err != nil {
		return nil, err
	}
	out := &CommandOut{SandboxID: sb.ID, ExecutionID: res.ID, DurationMS: time.Since(start).Milliseconds()}
	code := res.ExitCode
	out.ExitCode, c.exitCode = &code, &code
	var t1, t2 bool
	out.Stdout, t1 = stdout.output()
	out.Stderr, t2 = stderr.output()
	out.Truncated = t1 || t2
	// execd reports its own kill at the timeout in the error event.
	out.TimedOut = res.Error != nil && slices.ContainsFunc(res.Error.Traceback, func(l string) bool { return strings.HasPrefix(l, "timed out after") })
	return out, nil
}

type interruptIn struct {
	SandboxID   string `json:"sandbox_id,omitempty" jsonschema:"the sandbox (default: the session's only one)"`
	ExecutionID string `json:"execution_id" jsonschema:"the execution_id command_run returned"`
	// ConnectIfMissing is OpenSandbox's.
	ConnectIfMissing bool `json:"connect_if_missing,omitempty" jsonschema:"accepted for compatibility"`
}

// InterruptOut is command_interrupt's result.
type InterruptOut struct {
	Failure
	SandboxID   string `json:"sandbox_id"`
	ExecutionID string `json:"execution_id"`
	Interrupted bool   `json:"interrupted"`
}

func interruptCommand(ctx context.Context, s *Session, c *call, in interruptIn) (*InterruptOut, error) {
	if in.ExecutionID == "" {
		return nil, badArgs("execution_id is required")
	}
	sb, err := s.sandbox(ctx, c, in.SandboxID)
	if err != nil {
		return nil, err
	}
	if err := sb.Interrupt(ctx, in.ExecutionID); err != nil {
		return nil, err
	}
	return &InterruptOut{SandboxID: sb.ID, ExecutionID: in.ExecutionID, Interrupted: true}, nil
}

type codeIn struct {
	SandboxID      string `json:"sandbox_id,omitempty" jsonschema:"the sandbox (default: the session's only one)"`
	Code           string `json:"code" jsonschema:"the code to run"`
	Language       string `json:"language,omitempty" jsonschema:"python (default), or another language the sandbox has a kernel for"`
	ContextID      string `json:"context_id,omitempty" jsonschema:"run in this code context instead of the language's default one"`
	TimeoutSeconds int64  `json:"timeout_seconds,omitempty" jsonschema:"interrupt it after this long (default and maximum: the policy's)"`
}

// CodeValue is one result of code: the last expression's value or
// something displayed.
type CodeValue struct {
	Text      string   `json:"text,omitempty" jsonschema:"its plain-text form (capped)"`
	MIMETypes []string `json:"mime_types" jsonschema:"every form it has; images are attached as image content"`
	Files     []string `json:"files,omitempty" jsonschema:"values too large to send, written to these files of the sandbox"`
}

// CodeError is what code raised.
type CodeError struct {
	Name      string `json:"name"`
	Value     string `json:"value"`
	Traceback Output `json:"traceback"`
}

// CodeOut is code_run's result.
type CodeOut struct {
	Failure
	SandboxID      string      `json:"sandbox_id,omitempty"`
	ContextID      string      `json:"context_id,omitempty"`
	Stdout         Output      `json:"stdout"`
	Stderr         Output      `json:"stderr"`
	Results        []CodeValue `json:"results"`
	Error          *CodeError  `json:"error,omitempty" jsonschema:"what the code raised (the call itself succeeded)"`
	ExecutionCount int         `json:"execution_count,omitempty"`
	DurationMS     int64       `json:"duration_ms"`
	TimedOut       bool        `json:"timed_out"`
	Truncated      bool        `json:"truncated"`
	Images         int         `json:"images" jsonschema:"how many images are attached as image content"`
}

func runCode(ctx context.Context, s *Session, c *call, in codeIn) (*CodeOut, error) {
	if strings.TrimSpace(in.Code) == "" {
		return nil, badArgs("code is empty")
	}
	timeout, err := s.timeoutOf(in.TimeoutSeconds)
	if err != nil {
		return nil, err
	}
	sb, err := s.sandbox(ctx, c, in.SandboxID)
	if err != nil {
		return nil, err
	}
	limit := s.pol.Limits.OutputBytes
	stdout, stderr := newCapture(limit), newCapture(limit)
	var results []sdk.CodeResult
	h := &sdk.CodeHandlers{
		Stdout: func(t string) error { stdout.WriteString(t); return nil },
		Stderr: func(t string) error { stderr.WriteString(t); return nil },
		Result: func(r sdk.CodeResult) error { results = append(results, r); return nil },
	}
	start := time.Now()
	rctx, cancel := context.WithTimeout(ctx, timeout)
	x, err := sb.RunCode(rctx, in.Code, sdk.CodeOptions{Context: in.ContextID, Language: in.Language}, h)
	cancel()
	out := &CodeOut{SandboxID: sb.ID, Results: []CodeValue{}}
	switch {
	case err == nil:
		out.ContextID, out.ExecutionCount = x.ContextID, x.ExecutionCount
		if x.Error != nil {
			tb := x.Error.TracebackText
			if tb == "" {
				tb = strings.Join(x.Error.Traceback, "\n")
			}
			tbo, _ := capText(tb, limit)
			out.Error = &CodeError{Name: x.Error.EName, Value: x.Error.EValue, Traceback: tbo}
		}
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
		out.TimedOut = true // RunCode interrupted it
	default:
		return nil, err
	}
	out.DurationMS = time.Since(start).Milliseconds()
	var t1, t2 bool
	out.Stdout, t1 = stdout.output()
	out.Stderr, t2 = stderr.output()
	out.Truncated = t1 || t2
	budget := s.pol.Limits.FileBytes
	for _, r := range results {
		v := CodeValue{MIMETypes: []string{}}
		for m := range r.Data {
			if m != "text" {
				v.MIMETypes = append(v.MIMETypes, m)
			}
		}
		sort.Strings(v.MIMETypes)
		if t := r.Text(); t != "" {
			o, tr := capText(t, limit)
			v.Text, out.Truncated = o.Text, out.Truncated || tr
		}
		for _, f := range r.Files {
			v.Files = append(v.Files, fmt.Sprintf("%s (%s, %d bytes)", f.Path, f.MIME, f.Size))
		}
		for _, m := range v.MIMETypes {
			if !strings.HasPrefix(m, "image/") || m == "image/svg+xml" {
				continue
			}
			img, ok := r.Image(m)
			if !ok {
				continue
			}
			if len(img) > budget {
				out.Truncated = true
				continue
			}
			budget -= len(img)
			c.content = append(c.content, &sdkmcp.ImageContent{MIMEType: m, Data: img})
			out.Images++
		}
		out.Results = append(out.Results, v)
	}
	return out, nil
}
