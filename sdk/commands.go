// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package sdk

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/sse"
)

// headerEventCursors asks execd for a cursor on every output event, which
// lets a dropped stream resume exactly (a corral extension).
const headerEventCursors = "Corral-Event-Cursors"

// headerOutput set to "raw" asks execd for output chunks exactly as
// written instead of one event per line (a corral extension).
const headerOutput = "Corral-Output"

// CommandOptions tune a command.
type CommandOptions struct {
	Cwd string
	Env map[string]string
	// Timeout kills the command after this long; 0 means none.
	Timeout time.Duration
	// UID and GID run the command as another user.
	UID, GID *int
}

// CommandResult is how a command ended.
type CommandResult struct {
	ID            string
	ExitCode      int
	Error         *api.ExecError
	ExecutionTime time.Duration
}

// Event is one event of a command's stream.
type Event = api.ServerStreamEvent

func (o CommandOptions) request(command string, background bool) api.RunCommandRequest {
	req := api.RunCommandRequest{Command: command, Cwd: o.Cwd, Envs: o.Env, Background: background}
	if o.Timeout > 0 {
		ms := max(o.Timeout.Milliseconds(), 1)
		req.Timeout = &ms
	}
	if o.UID != nil {
		u := int64(*o.UID)
		req.UID = &u
	}
	if o.GID != nil {
		g := int64(*o.GID)
		req.GID = &g
	}
	return req
}

// RunStream runs a command and calls fn with each of its events (ping
// events excluded) as they arrive. If the connection drops, it resumes the
// stream where it broke, so fn sees every event exactly once. It returns
// once the command has ended; a non-zero exit is not an error (see
// CommandResult.ExitCode). Cancelling ctx interrupts the command.
func (s *Sandbox) RunStream(ctx context.Context, command string, opts CommandOptions, fn func(Event) error) (*CommandResult, error) {
	return s.runStream(ctx, command, opts, false, fn)
}

// runStream is RunStream; raw asks for output chunks as written rather
// than lines, for callers that copy output to a byte stream.
func (s *Sandbox) runStream(ctx context.Context, command string, opts CommandOptions, raw bool, fn func(Event) error) (*CommandResult, error) {
	hdr := []string{headerEventCursors, "1"}
	if raw {
		hdr = append(hdr, headerOutput, "raw")
	}
	b, _ := json.Marshal(opts.request(command, false))
	res, err := s.do(ctx, http.MethodPost, "/command", nil, bytes.NewReader(b), "application/json", hdr...)
	if err != nil {
		return nil, err
	}
	if res.StatusCode != http.StatusOK {
		defer res.Body.Close()
		return nil, decodeError(res)
	}
	st := &streamState{raw: raw}
	st.lines = raw && res.Header.Get(headerOutput) != "raw"
	err = st.read(res.Body, fn)
	res.Body.Close()
	for attempt := 0; err != nil && st.result == nil && st.id != "" && ctx.Err() == nil; attempt++ {
		if attempt >= 5 {
			break
		}
		// The stream broke before its end: resume from the cursors.
		time.Sleep(time.Duration(attempt) * 100 * time.Millisecond)
		q := url.Values{"stdout": {strconv.FormatInt(st.stdout, 10)}, "stderr": {strconv.FormatInt(st.stderr, 10)}}
		res, rerr := s.do(ctx, http.MethodGet, "/command/"+url.PathEscape(st.id)+"/stream", q, nil, "", hdr...)
		if rerr != nil {
			err = rerr
			continue
		}
		if res.StatusCode != http.StatusOK {
			err = decodeError(res)
			res.Body.Close()
			break
		}
		st.resumed = true
		err = st.read(res.Body, fn)
		res.Body.Close()
	}
	if st.result != nil {
		return st.result, nil
	}
	if err == nil {
		err = errors.New("the stream ended without a final event")
	}
	if ctx.Err() != nil {
		if st.id != "" {
			// The caller gave up on the command: stop it too.
			ictx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			_ = s.Interrupt(ictx, st.id)
			cancel()
		}
		return nil, ctx.Err()
	}
	return nil, fmt.Errorf("sandbox %s: command %s: %w", s.ID, st.id, err)
}

// streamState follows one command across reconnects.
type streamState struct {
	id             string
	stdout, stderr int64
	resumed        bool
	result         *CommandResult
	// raw is set when the caller wants output as written; lines when the
	// server sends lines anyway (it does not know the corral extension),
	// which are then given back their newlines.
	raw, lines bool
}

func (st *streamState) read(body io.Reader, fn func(Event) error) error {
	rd := sse.NewReader(body)
	for {
		raw, err := rd.Next()
		if errors.Is(err, io.EOF) {
			return io.ErrUnexpectedEOF
		}
		if err != nil {
			return err
		}
		var ev Event
		if err := json.Unmarshal(raw, &ev); err != nil {
			return fmt.Errorf("bad event %.80q: %w", raw, err)
		}
		switch ev.Type {
		case api.EventPing:
			continue
		case api.EventInit:
			st.id = ev.Text
			if st.resumed {
				continue // the resumed stream repeats init
			}
		case api.EventStdout, api.EventStderr:
			if ev.Cursor != nil {
				if ev.Type == api.EventStdout {
					st.stdout = *ev.Cursor
				} else {
					st.stderr = *ev.Cursor
				}
			}
			if st.lines && ev.Text != "\n" {
				ev.Text += "\n"
			}
		case api.EventExecutionComplete:
			st.result = &CommandResult{ID: st.id, ExecutionTime: time.Duration(ev.ExecutionTime) * time.Millisecond}
		case api.EventError:
			st.result = &CommandResult{ID: st.id, ExitCode: 1, Error: ev.Error}
			if ev.Error != nil {
				if n, err := strconv.Atoi(ev.Error.EValue); err == nil {
					st.result.ExitCode = n
				}
			}
		}
		ev.Cursor = nil
		if fn != nil {
			if err := fn(ev); err != nil {
				return err
			}
		}
		if st.result != nil {
			return nil
		}
	}
}

// Exec runs a command and copies its output, as it comes, to stdout and
// stderr (either may be nil). It returns the exit code. Against corral the
// copy is exact for text output; against servers that only send lines,
// every line ends with a newline.
func (s *Sandbox) Exec(ctx context.Context, command string, opts CommandOptions, stdout, stderr io.Writer) (int, error) {
	res, err := s.ExecResult(ctx, command, opts, stdout, stderr)
	if err != nil {
		return -1, err
	}
	return res.ExitCode, nil
}

// ExecResult is Exec returning the whole CommandResult: the command's id,
// its exit code and, when it did not exit by itself (a timeout, say),
// the error event that says why.
func (s *Sandbox) ExecResult(ctx context.Context, command string, opts CommandOptions, stdout, stderr io.Writer) (*CommandResult, error) {
	return s.runStream(ctx, command, opts, true, func(ev Event) error {
		return copyEvent(ev, stdout, stderr)
	})
}

// copyEvent writes an output event of a raw stream to its writer.
func copyEvent(ev Event, stdout, stderr io.Writer) error {
	var w io.Writer
	switch ev.Type {
	case api.EventStdout:
		w = stdout
	case api.EventStderr:
		w = stderr
	}
	if w == nil {
		return nil
	}
	_, err := io.WriteString(w, ev.Text)
	return err
}

// Run runs a command and returns its output. Use Exec or RunStream for
// output that does not fit in memory.
func (s *Sandbox) Run(ctx context.Context, command string, opts CommandOptions) (stdout, stderr string, exitCode int, err error) {
	var out, errOut strings.Builder
	exitCode, err = s.Exec(ctx, command, opts, &out, &errOut)
	return out.String(), errOut.String(), exitCode, err
}

// Command is a running command whose output is read from io.Readers, like
// os/exec's pipes: read both (or the stream stalls), then call Wait.
type Command struct {
	stdout, stderr *io.PipeReader
	done           chan struct{}
	result         *CommandResult
	err            error
}

// Stdout returns the command's standard output.
func (c *Command) Stdout() io.Reader { return c.stdout }

// Stderr returns the command's standard error.
func (c *Command) Stderr() io.Reader { return c.stderr }

// Wait returns the exit code once the command has ended.
func (c *Command) Wait() (int, error) {
	<-c.done
	if c.err != nil {
		return -1, c.err
	}
	return c.result.ExitCode, nil
}

// Start runs a command whose output is read from Stdout and Stderr.
func (s *Sandbox) Start(ctx context.Context, command string, opts CommandOptions) *Command {
	outR, outW := io.Pipe()
	errR, errW := io.Pipe()
	c := &Command{stdout: outR, stderr: errR, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		c.result, c.err = s.runStream(ctx, command, opts, true, func(ev Event) error {
			return copyEvent(ev, outW, errW)
		})
		outW.CloseWithError(c.err)
		errW.CloseWithError(c.err)
	}()
	return c
}

// StartBackground starts a command that outlives the request and returns
// its id; read its output with CommandLogs.
func (s *Sandbox) StartBackground(ctx context.Context, command string, opts CommandOptions) (string, error) {
	b, _ := json.Marshal(opts.request(command, true))
	res, err := s.do(ctx, http.MethodPost, "/command", nil, bytes.NewReader(b), "application/json")
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return "", decodeError(res)
	}
	st := &streamState{}
	if err := st.read(res.Body, nil); err != nil && st.id == "" {
		return "", err
	}
	return st.id, nil
}

// CommandStatus reports whether a command runs, and how it ended.
func (s *Sandbox) CommandStatus(ctx context.Context, id string) (*api.CommandStatusResponse, error) {
	var out api.CommandStatusResponse
	if err := s.call(ctx, http.MethodGet, "/command/status/"+url.PathEscape(id), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// CommandLogs returns a command's combined output from byte offset cursor
// and the cursor to read from next.
func (s *Sandbox) CommandLogs(ctx context.Context, id string, cursor int64) ([]byte, int64, error) {
	q := url.Values{"cursor": {strconv.FormatInt(cursor, 10)}}
	res, err := s.do(ctx, http.MethodGet, "/command/"+url.PathEscape(id)+"/logs", q, nil, "")
	if err != nil {
		return nil, cursor, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return nil, cursor, decodeError(res)
	}
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return nil, cursor, err
	}
	next, err := strconv.ParseInt(res.Header.Get(api.HeaderCommandsTailCursor), 10, 64)
	if err != nil {
		next = cursor + int64(len(b))
	}
	return b, next, nil
}

// Interrupt stops a command: SIGTERM, then SIGKILL after a grace period.
func (s *Sandbox) Interrupt(ctx context.Context, id string) error {
	return s.call(ctx, http.MethodDelete, "/command", url.Values{"id": {id}}, nil, nil)
}

// Session is a bash session: exported variables and the working
// directory persist between its runs.
type Session struct {
	ID string
	s  *Sandbox
}

// CreateSession starts a session in cwd ("" for the default).
func (s *Sandbox) CreateSession(ctx context.Context, cwd string) (*Session, error) {
	var out api.CreateSessionResponse
	if err := s.call(ctx, http.MethodPost, "/session", nil, api.CreateSessionRequest{Cwd: cwd}, &out); err != nil {
		return nil, err
	}
	return &Session{ID: out.SessionID, s: s}, nil
}

// Run runs a command in the session, calling fn with its events.
func (se *Session) Run(ctx context.Context, command string, timeout time.Duration, fn func(Event) error) (*CommandResult, error) {
	req := api.RunInSessionRequest{Command: command}
	if timeout > 0 {
		ms := timeout.Milliseconds()
		req.Timeout = &ms
	}
	b, _ := json.Marshal(req)
	res, err := se.s.do(ctx, http.MethodPost, "/session/"+url.PathEscape(se.ID)+"/run", nil, bytes.NewReader(b), "application/json")
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return nil, decodeError(res)
	}
	st := &streamState{}
	if err := st.read(res.Body, fn); err != nil && st.result == nil {
		return nil, err
	}
	st.result.ID = se.ID
	return st.result, nil
}

// Close deletes the session and kills what it runs.
func (se *Session) Close(ctx context.Context) error {
	return se.s.call(ctx, http.MethodDelete, "/session/"+url.PathEscape(se.ID), nil, nil, nil)
}
