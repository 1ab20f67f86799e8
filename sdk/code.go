// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package sdk

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/sse"
)

// CreateCodeContext starts a code context: a Jupyter kernel for language
// whose state persists between runs. cwd ("" for the default) is created
// if missing.
func (s *Sandbox) CreateCodeContext(ctx context.Context, language, cwd string) (*api.CodeContext, error) {
	var out api.CodeContext
	if err := s.call(ctx, http.MethodPost, "/code/context", nil, api.CodeContextRequest{Language: language, Cwd: cwd}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// CodeContext describes a code context.
func (s *Sandbox) CodeContext(ctx context.Context, id string) (*api.CodeContext, error) {
	var out api.CodeContext
	if err := s.call(ctx, http.MethodGet, "/code/contexts/"+url.PathEscape(id), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// CodeContexts lists the code contexts of language ("" for all).
func (s *Sandbox) CodeContexts(ctx context.Context, language string) ([]api.CodeContext, error) {
	var out []api.CodeContext
	if err := s.call(ctx, http.MethodGet, "/code/contexts", url.Values{"language": {language}}, nil, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// DeleteCodeContext shuts a code context's kernel down.
func (s *Sandbox) DeleteCodeContext(ctx context.Context, id string) error {
	return s.call(ctx, http.MethodDelete, "/code/contexts/"+url.PathEscape(id), nil, nil, nil)
}

// DeleteCodeContexts deletes every code context of language, its default
// context included.
func (s *Sandbox) DeleteCodeContexts(ctx context.Context, language string) error {
	return s.call(ctx, http.MethodDelete, "/code/contexts", url.Values{"language": {language}}, nil, nil)
}

// RestartCodeContext gives a context a fresh kernel (its state is lost):
// the way back from a context whose kernel died.
func (s *Sandbox) RestartCodeContext(ctx context.Context, id string) (*api.CodeContext, error) {
	var out api.CodeContext
	if err := s.call(ctx, http.MethodPost, "/code/contexts/"+url.PathEscape(id)+"/restart", nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// InterruptCode interrupts the execution running in a code context.
func (s *Sandbox) InterruptCode(ctx context.Context, contextID string) error {
	return s.call(ctx, http.MethodDelete, "/code", url.Values{"id": {contextID}}, nil, nil)
}

// CodeOptions say where code runs: in Context, or in the default context
// of Language ("python" when both are empty).
type CodeOptions struct {
	Context  string
	Language string
}

// CodeResult is one result of an execution: the value of the last
// expression, or something displayed (a plot, a table).
type CodeResult struct {
	// Data maps MIME types to values: text/plain (also as "text"),
	// text/html, image/png (base64), application/json (JSON text), ...
	Data map[string]string
	// Files are values too large to send, written to files in the sandbox
	// (download them with Download).
	Files []api.CodeFile
}

// Text is the result's plain-text form.
func (r CodeResult) Text() string {
	if t, ok := r.Data["text/plain"]; ok {
		return t
	}
	return r.Data["text"]
}

// Image returns the decoded image of MIME type mime (image/png,
// image/jpeg, ...) if the result has one inline.
func (r CodeResult) Image(mime string) ([]byte, bool) {
	v, ok := r.Data[mime]
	if !ok {
		return nil, false
	}
	b, err := base64.StdEncoding.DecodeString(v)
	return b, err == nil
}

// CodeHandlers receive an execution's events as they arrive; any may be
// nil. An error returned by one ends RunCode with that error (and the
// execution is interrupted).
type CodeHandlers struct {
	Stdout func(text string) error
	Stderr func(text string) error
	Result func(CodeResult) error
}

// Execution is what running code produced.
type Execution struct {
	// ContextID is the context the code ran in.
	ContextID      string
	Stdout, Stderr string
	Results        []CodeResult
	ExecutionCount int
	// Error is set when the code raised (or the kernel died: EName
	// KernelDied); it is not a Go error.
	Error         *api.ExecError
	ExecutionTime time.Duration
}

// Text is the plain text of the execution's last result ("" if none).
func (x *Execution) Text() string {
	for i := len(x.Results) - 1; i >= 0; i-- {
		if t := x.Results[i].Text(); t != "" {
			return t
		}
	}
	return ""
}

// RunCode runs code in a code context and returns what it produced,
// calling h (if not nil) as events arrive. An exception in the code is
// Execution.Error, not an error. Cancelling ctx interrupts the execution.
func (s *Sandbox) RunCode(ctx context.Context, code string, opts CodeOptions, h *CodeHandlers) (*Execution, error) {
	if h == nil {
		h = &CodeHandlers{}
	}
	cc := &api.CodeContext{ID: opts.Context, Language: opts.Language}
	if cc.ID == "" && cc.Language == "" {
		cc.Language = "python"
	}
	b, _ := json.Marshal(api.RunCodeRequest{Code: code, Context: cc})
	res, err := s.do(ctx, http.MethodPost, "/code", nil, bytes.NewReader(b), "application/json", "Accept", "text/event-stream")
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return nil, decodeError(res)
	}
	x := &Execution{}
	err = readCode(res.Body, x, h)
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if err != nil {
		return nil, fmt.Errorf("sandbox %s: code: %w", s.ID, err)
	}
	return x, nil
}

// errCodeDone ends the read of a code stream at its final event.
var errCodeDone = errors.New("done")

func readCode(body io.Reader, x *Execution, h *CodeHandlers) error {
	rd := sse.NewReader(body)
	call := func(f func(string) error, text string) error {
		if f == nil {
			return nil
		}
		return f(text)
	}
	for {
		raw, err := rd.Next()
		if errors.Is(err, io.EOF) {
			return errors.New("the stream ended without a final event")
		}
		if err != nil {
			return err
		}
		var ev struct {
			api.ServerStreamEvent
			Results map[string]string `json:"results,omitempty"`
		}
		if err := json.Unmarshal(raw, &ev); err != nil {
			return fmt.Errorf("bad event %.80q: %w", raw, err)
		}
		switch ev.Type {
		case api.EventInit:
			x.ContextID = ev.Text
		case api.EventStdout:
			x.Stdout += ev.Text
			err = call(h.Stdout, ev.Text)
		case api.EventStderr:
			x.Stderr += ev.Text
			err = call(h.Stderr, ev.Text)
		case api.EventExecutionCount:
			x.ExecutionCount = ev.ExecutionCount
		case api.EventResult:
			r := CodeResult{Data: ev.Results}
			if f, ok := r.Data[api.CodeFilesKey]; ok {
				_ = json.Unmarshal([]byte(f), &r.Files)
				delete(r.Data, api.CodeFilesKey)
			}
			x.Results = append(x.Results, r)
			if h.Result != nil {
				err = h.Result(r)
			}
		case api.EventError:
			x.Error = ev.Error
			if x.Error == nil {
				x.Error = &api.ExecError{EName: "Error", EValue: ev.Text}
			}
			err = errCodeDone
		case api.EventExecutionComplete:
			x.ExecutionTime = time.Duration(ev.ExecutionTime) * time.Millisecond
			err = errCodeDone
		}
		if errors.Is(err, errCodeDone) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}
