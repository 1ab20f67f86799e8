// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package code

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/errdefs"
	"github.com/corral-dev/corral/internal/execd/code/jupyter"
)

// Limits that keep every event line under the 4 MiB a line that
// OpenSandbox's Go SDK reads.
const (
	// maxTextChunk is the most text one stdout/stderr event carries; JSON
	// escaping can grow text six times. Small events are cheaper for
	// clients that read the stream a line at a time: Python's urllib
	// gathers a line 8 KiB at a time, and read 200 MB of events 15%
	// faster in 32 KiB events than in 256 KiB ones (docs/benchmarks.md).
	maxTextChunk = 32 << 10
	// maxInlineResults is the most a result event's values may take
	// encoded; larger values go to files.
	maxInlineResults = 3 << 20
	// maxTraceback is the most traceback text an error event carries.
	maxTraceback = 1 << 20
	// MaxCode is the largest code accepted.
	MaxCode = 4 << 20
)

// Turn is a place in a context's queue of executions.
type Turn struct {
	c    *Context
	held bool
	done bool
	// seq numbers the turn once it has come (Context.turn).
	seq uint64
}

// Queue takes a place behind the context's running execution. It fails
// if the context was deleted, its kernel is dead, or QueueLimit
// executions wait already.
func (c *Context) Queue() (*Turn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.deleted {
		return nil, contextNotFound(c.ID)
	}
	if err := c.deadLocked(); err != nil {
		return nil, errdefs.Newf(errdefs.ErrFailedPrecondition, api.CodeExecdContextDead,
			"context %s is dead: %v; restart it (POST /code/contexts/%s/restart) or delete it", c.ID, err, c.ID)
	}
	if c.waiting >= c.m.cfg.QueueLimit {
		return nil, errdefs.Newf(errdefs.ErrResourceExhausted, api.CodeExecdContextBusy,
			"context %s has %d executions waiting behind the running one (the limit); wait for them, or use another context", c.ID, c.waiting)
	}
	c.waiting++
	return &Turn{c: c}, nil
}

// Wait waits up to d for the turn to come. It answers false when d
// passed first (call it again), and an error when ctx ended or the
// context was deleted.
func (t *Turn) Wait(ctx context.Context, d time.Duration) (bool, error) {
	if t.held {
		return true, nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case t.c.slot <- struct{}{}:
		t.c.mu.Lock()
		t.held, t.c.waiting, t.c.running = true, t.c.waiting-1, true
		t.c.started, t.c.ending, t.c.pendingInterrupt = false, false, false
		t.c.turn++
		t.seq = t.c.turn
		t.c.mu.Unlock()
		return true, nil
	case <-t.c.closed:
		return false, contextNotFound(t.c.ID)
	case <-ctx.Done():
		return false, ctx.Err()
	case <-timer.C:
		return false, nil
	}
}

// Done gives the turn up, after its execution or without one.
func (t *Turn) Done() {
	if t.done {
		return
	}
	t.done = true
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	t.c.lastUsed = time.Now()
	if !t.held {
		t.c.waiting--
		return
	}
	t.c.running = false
	<-t.c.slot
}

// Run executes code in the turn's kernel (the turn must have come) and
// sends the contract's events to emit, init excepted: stdout and stderr
// as the kernel prints, execution_count and result for execute_result,
// result for display_data, then error or execution_complete. If ctx
// ends or emit fails (the client went away), the execution is
// interrupted and Run still waits for the kernel to finish it, so the
// next turn finds the kernel idle.
//
// Events are handed to emit in runs: those of the kernel messages that
// arrived together go in one call (one flush of the stream).
func (t *Turn) Run(ctx context.Context, code string, emit func(...api.ServerStreamEvent) error) {
	c := t.c
	c.mu.Lock()
	k := c.kernel
	c.mu.Unlock()
	start := time.Now()
	// An execution still running InterruptTimeout after an interrupt is
	// ended by stopping the kernel: code that ignores interrupts, or a
	// kernel an interrupt has wedged, must not hold the context forever.
	execCtx, abort := context.WithCancel(context.Background())
	defer abort()
	var escalation *time.Timer
	c.mu.Lock()
	c.escalate = func() {
		if escalation == nil {
			escalation = time.AfterFunc(c.m.cfg.InterruptTimeout, abort)
		}
	}
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.escalate = nil
		if escalation != nil {
			escalation.Stop()
		}
		c.mu.Unlock()
	}()
	var gone atomic.Bool
	var once sync.Once
	interrupt := func() {
		gone.Store(true)
		once.Do(func() {
			c.m.log.InfoContext(ctx, "code client went away: interrupting", "context_id", c.ID)
			_ = c.interrupt(context.Background(), k, t.seq)
		})
	}
	defer context.AfterFunc(ctx, interrupt)()
	var batch []api.ServerStreamEvent
	flush := func() error {
		evs := batch
		batch = nil
		if len(evs) == 0 || gone.Load() {
			return nil
		}
		if err := emit(evs...); err != nil {
			go interrupt()
		}
		return nil
	}
	send := func(ev api.ServerStreamEvent) {
		batch = append(batch, ev)
		_ = flush()
	}
	sawError := false
	rep, err := k.ExecuteBatched(execCtx, code, func(m jupyter.Message) error {
		switch m.Type() {
		case "execute_input":
			// The kernel runs the code now, its interrupt handler set: an
			// interrupt asked for before goes out.
			c.mu.Lock()
			c.started = true
			pending := c.pendingInterrupt && !c.ending
			c.pendingInterrupt = false
			c.mu.Unlock()
			if pending {
				_ = k.Interrupt(context.Background())
			}
		case "error", "execute_result":
			// The code has ended: an interrupt now could only hit the
			// kernel's own bookkeeping (see interrupt).
			c.mu.Lock()
			c.ending = true
			c.mu.Unlock()
		}
		for _, ev := range c.events(m) {
			sawError = sawError || ev.Type == api.EventError
			batch = append(batch, ev)
		}
		return nil
	}, flush)
	_ = flush()
	c.mu.Lock()
	c.ending = true
	c.mu.Unlock()
	if rep.Dropped > 0 {
		send(api.ServerStreamEvent{Type: api.EventStderr, Text: fmt.Sprintf("\n[corral: %d bytes of output were dropped: the client read them too slowly]\n", rep.Dropped)})
	}
	switch {
	case errors.Is(err, context.Canceled):
		c.m.log.WarnContext(ctx, "execution did not stop after an interrupt: kernel stopped", "context_id", c.ID, "timeout", c.m.cfg.InterruptTimeout)
		_ = k.Shutdown(0)
		send(errorEvent("KernelUnresponsive", fmt.Sprintf("the execution did not stop within %v of an interrupt, so its kernel was stopped; context %s is dead: restart it (POST /code/contexts/%s/restart) or delete it", c.m.cfg.InterruptTimeout, c.ID, c.ID), nil))
	case errors.Is(err, jupyter.ErrUnresponsive):
		c.m.log.WarnContext(ctx, "kernel unresponsive: killed", "context_id", c.ID)
		_ = k.Shutdown(0)
		send(errorEvent("KernelUnresponsive", fmt.Sprintf("the kernel did not take the execution within %v and was stopped; context %s is dead: restart it (POST /code/contexts/%s/restart) or delete it", jupyter.AckTimeout, c.ID, c.ID), nil))
	case errors.Is(err, jupyter.ErrDied):
		c.mu.Lock()
		deleted := c.deleted
		c.mu.Unlock()
		if deleted {
			send(errorEvent("ContextDeleted", fmt.Sprintf("context %s was deleted while the code ran", c.ID), nil))
		} else {
			send(errorEvent("KernelDied", fmt.Sprintf("the kernel exited (%v) while the code ran; context %s is dead: restart it (POST /code/contexts/%s/restart) or delete it", k.ExitError(), c.ID, c.ID), nil))
		}
	case err != nil:
		send(errorEvent("RuntimeError", err.Error(), nil))
	case sawError:
	case rep.Status == "error":
		send(errorEvent(rep.EName, rep.EValue, rep.Traceback))
	case rep.Status == jupyter.StatusAbandoned:
		// ipykernel drops a request an interrupt reaches just before its
		// code runs; the code did not run, the kernel takes the next.
		send(errorEvent("KeyboardInterrupt", "the execution was interrupted before its code ran", nil))
	case rep.Status == "aborted":
		send(errorEvent("ExecutionAborted", "the kernel aborted the execution", nil))
	default:
		send(api.ServerStreamEvent{Type: api.EventExecutionComplete, ExecutionTime: max(time.Since(start).Milliseconds(), 1)})
	}
}

// interrupt interrupts the running execution. The signal must reach
// ipykernel while it runs the code: before that it ignores SIGINT (the
// interrupt would be lost), and one that lands while it finishes a
// request (restoring its handler) escapes its catch and stops it taking
// requests for good. So an interrupt asked for before the code started
// waits for execute_input, and one after the code's result or error, or
// with nothing running, does nothing.
//
// seq names the turn to interrupt (0: whichever runs): an interrupt a
// turn asked for must never reach the next one.
func (c *Context) interrupt(ctx context.Context, k *jupyter.Kernel, seq uint64) error {
	c.mu.Lock()
	if !c.running || c.ending || seq != 0 && seq != c.turn {
		c.mu.Unlock()
		return nil
	}
	if c.escalate != nil {
		c.escalate()
	}
	if !c.started {
		c.pendingInterrupt = true
		c.mu.Unlock()
		return nil
	}
	c.mu.Unlock()
	return k.Interrupt(ctx)
}

var ansi = regexp.MustCompile(`\x1b\[[0-9;?]*[A-Za-z]`)

func errorEvent(ename, evalue string, tb []string) api.ServerStreamEvent {
	tb = capTraceback(tb)
	if tb == nil {
		tb = []string{}
	}
	return api.ServerStreamEvent{Type: api.EventError, Error: &api.ExecError{
		EName: ename, EValue: evalue, Traceback: tb, TracebackText: ansi.ReplaceAllString(strings.Join(tb, "\n"), ""),
	}}
}

// capTraceback keeps the first and last lines of a traceback too large
// for one event.
func capTraceback(tb []string) []string {
	n := 0
	for _, l := range tb {
		n += len(l)
	}
	if n <= maxTraceback {
		return tb
	}
	var head, tail []string
	budget := maxTraceback / 2
	for _, l := range tb {
		if budget -= len(l); budget < 0 {
			break
		}
		head = append(head, l)
	}
	budget = maxTraceback / 2
	for i := len(tb) - 1; i >= len(head); i-- {
		if budget -= len(tb[i]); budget < 0 {
			break
		}
		tail = append([]string{tb[i]}, tail...)
	}
	if len(head) == 0 && len(tail) == 0 {
		return []string{truncateUTF8(tb[0], maxTraceback)}
	}
	omitted := len(tb) - len(head) - len(tail)
	return slices.Concat(head, []string{fmt.Sprintf("[corral: %d traceback lines omitted]", omitted)}, tail)
}

// events turns one iopub message into stream events.
func (c *Context) events(m jupyter.Message) []api.ServerStreamEvent {
	switch m.Type() {
	case "stream":
		name, text, ok := decodeStream(m.Content)
		if !ok || text == "" {
			return nil
		}
		typ := api.EventStdout
		if name == "stderr" {
			typ = api.EventStderr
		}
		var evs []api.ServerStreamEvent
		for _, chunk := range splitUTF8(text, maxTextChunk) {
			evs = append(evs, api.ServerStreamEvent{Type: typ, Text: chunk})
		}
		return evs
	case "execute_result", "display_data":
		var r struct {
			ExecutionCount int                        `json:"execution_count"`
			Data           map[string]json.RawMessage `json:"data"`
		}
		if json.Unmarshal(m.Content, &r) != nil || len(r.Data) == 0 {
			return nil
		}
		var evs []api.ServerStreamEvent
		if m.Type() == "execute_result" && r.ExecutionCount > 0 {
			evs = append(evs, api.ServerStreamEvent{Type: api.EventExecutionCount, ExecutionCount: r.ExecutionCount})
		}
		res := c.results(r.Data, m.Header.MsgID)
		return append(evs, api.ServerStreamEvent{Type: api.EventResult, Results: res, MainResult: m.Type() == "execute_result"})
	case "error":
		var e struct {
			EName     string   `json:"ename"`
			EValue    string   `json:"evalue"`
			Traceback []string `json:"traceback"`
		}
		if json.Unmarshal(m.Content, &e) != nil {
			return nil
		}
		return []api.ServerStreamEvent{errorEvent(e.EName, e.EValue, e.Traceback)}
	}
	return nil
}

// results makes a MIME bundle string-only (JSON values encoded as JSON
// text), adds text beside text/plain, and moves values to files in the
// sandbox when together they would make the event too large.
func (c *Context) results(data map[string]json.RawMessage, msgID string) map[string]any {
	vals := make(map[string]string, len(data)+1)
	for mime, raw := range data {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			var b bytes.Buffer
			if json.Compact(&b, raw) == nil {
				s = b.String()
			} else {
				s = string(raw)
			}
		}
		vals[mime] = s
	}
	size := func() int {
		n := 0
		for k, v := range vals {
			n += len(k) + len(v) + 8
			if k == "text/plain" {
				n += len(v) + 8
			}
		}
		return n
	}
	var files []api.CodeFile
	for size() > maxInlineResults {
		// Move the largest value out.
		var big string
		for k, v := range vals {
			if big == "" || len(v) > len(vals[big]) {
				big = k
			}
		}
		f, err := c.writeResult(big, vals[big], msgID, len(files))
		if err != nil {
			c.m.log.Warn("write a large result", "context_id", c.ID, "mime", big, "err", err)
			f = api.CodeFile{MIME: big, Size: -1}
		}
		files = append(files, f)
		delete(vals, big)
	}
	out := make(map[string]any, len(vals)+2)
	for k, v := range vals {
		out[k] = v
	}
	if v, ok := vals["text/plain"]; ok {
		out["text"] = v
	}
	if len(files) > 0 {
		b, _ := json.Marshal(files)
		out[api.CodeFilesKey] = string(b)
	}
	return out
}

// writeResult writes one MIME value to a file of the context's (binary
// types decoded from base64).
func (c *Context) writeResult(mime, v, msgID string, i int) (api.CodeFile, error) {
	dir := c.resultDir()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return api.CodeFile{}, err
	}
	b := []byte(v)
	if binaryMIME(mime) {
		if d, err := base64.StdEncoding.DecodeString(strings.TrimSpace(v)); err == nil {
			b = d
		}
	}
	safeID := strings.Map(func(r rune) rune {
		if r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' {
			return r
		}
		return '_'
	}, msgID)
	path := filepath.Join(dir, fmt.Sprintf("%s-%d%s", safeID, i, extension(mime)))
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return api.CodeFile{}, err
	}
	return api.CodeFile{MIME: mime, Path: path, Size: int64(len(b))}, nil
}

func (c *Context) resultDir() string { return filepath.Join(c.m.cfg.StateDir, "results", c.ID) }

// binaryMIME tells the types Jupyter sends base64-encoded.
func binaryMIME(mime string) bool {
	switch {
	case strings.HasPrefix(mime, "text/"), mime == "application/json", strings.HasSuffix(mime, "+json"),
		mime == "image/svg+xml", mime == "application/javascript":
		return false
	}
	return true
}

func extension(mime string) string {
	switch mime {
	case "image/png":
		return ".png"
	case "image/jpeg":
		return ".jpg"
	case "image/gif":
		return ".gif"
	case "image/svg+xml":
		return ".svg"
	case "text/html":
		return ".html"
	case "text/plain":
		return ".txt"
	case "text/markdown":
		return ".md"
	case "text/latex":
		return ".tex"
	case "application/pdf":
		return ".pdf"
	case "application/json":
		return ".json"
	}
	if strings.HasSuffix(mime, "+json") {
		return ".json"
	}
	return ".bin"
}

// splitUTF8 cuts s into pieces of at most n bytes, never inside a rune.
func splitUTF8(s string, n int) []string {
	var out []string
	for len(s) > n {
		i := n
		for i > 0 && !utf8.RuneStart(s[i]) {
			i--
		}
		if i == 0 {
			i = n
		}
		out = append(out, s[:i])
		s = s[i:]
	}
	return append(out, s)
}

func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return splitUTF8(s, n)[0]
}
