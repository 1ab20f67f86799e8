// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package execd

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/internal/execd/process"
	"github.com/corral-dev/corral/sse"
)

// HeaderEventCursors asks a command stream to put a cursor on every output
// event (a corral extension; OpenSandbox clients never send it).
const HeaderEventCursors = "Corral-Event-Cursors"

// eventStream writes events. Headers are committed with the first event,
// so a handler can still answer an early failure with a JSON error.
type eventStream struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	sw      *sse.Writer
	started bool
	last    time.Time
}

func newEventStream(w http.ResponseWriter) *eventStream {
	return &eventStream{w: w, rc: http.NewResponseController(w), sw: sse.NewWriter(w)}
}

func (s *eventStream) start() {
	if s.started {
		return
	}
	h := s.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	h.Set("X-Accel-Buffering", "no")
	s.w.WriteHeader(http.StatusOK)
	s.started = true
}

// write sends events and flushes once.
func (s *eventStream) write(evs ...api.ServerStreamEvent) error {
	s.start()
	now := time.Now()
	for i := range evs {
		if evs[i].Timestamp == 0 {
			evs[i].Timestamp = now.UnixMilli()
		}
		if err := s.sw.Write(&evs[i]); err != nil {
			return err
		}
	}
	s.last = now
	return s.rc.Flush()
}

func pingEvent() api.ServerStreamEvent {
	return api.ServerStreamEvent{Type: api.EventPing, Text: "pong"}
}

// terminal is the last event for a finished command: execution_complete for
// exit 0, error with the exit code otherwise.
func terminal(c *process.Command) api.ServerStreamEvent {
	ex, _ := c.Exit()
	if ex.Code == 0 {
		ms := max(ex.FinishedAt.Sub(c.StartedAt).Milliseconds(), 1)
		return api.ServerStreamEvent{Type: api.EventExecutionComplete, ExecutionTime: ms}
	}
	msg := ex.Err
	if msg == "" {
		msg = "exit status " + strconv.Itoa(ex.Code)
	}
	return api.ServerStreamEvent{Type: api.EventError, Error: &api.ExecError{
		EName: api.ErrCommandExec, EValue: strconv.Itoa(ex.Code), Traceback: []string{msg}}}
}

// cursors are resume points: the combined-output offset up to which each
// stream's events were delivered.
type cursors struct{ stdout, stderr int64 }

// streamOutput sends c's output from cur as line events, pings while idle,
// and the terminal event once c is done. It returns early, leaving c
// running, if the client goes away.
func (s *Server) streamOutput(ctx context.Context, es *eventStream, c *process.Command, cur cursors, withCursors bool) error {
	batches := make(chan []api.ServerStreamEvent, 1)
	followErr := make(chan error, 1)
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		followErr <- followLines(fctx, c, cur, withCursors, batches)
		close(batches)
	}()
	ping := time.NewTicker(s.cfg.PingInterval)
	defer ping.Stop()
	for {
		select {
		case batch, ok := <-batches:
			if !ok {
				if err := <-followErr; err != nil {
					return err
				}
				return es.write(terminal(c))
			}
			if err := es.write(batch...); err != nil {
				return err
			}
		case <-ping.C:
			if time.Since(es.last) >= s.cfg.PingInterval {
				if err := es.write(pingEvent()); err != nil {
					return err
				}
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// followLines turns c's retained output into line events, in batches of
// at most one record, until the output of c's main process has all been
// read. A stream resumed from cur skips what each stream already delivered.
func followLines(ctx context.Context, c *process.Command, cur cursors, withCursors bool, out chan<- []api.ServerStreamEvent) error {
	var lines [3]process.Lines
	var last [3]int64
	last[process.Stdout], last[process.Stderr] = cur.stdout, cur.stderr
	var batch []api.ServerStreamEvent
	emitter := func(typ string) func(string, int64) error {
		return func(text string, end int64) error {
			ev := api.ServerStreamEvent{Type: typ, Text: text}
			if withCursors {
				e := end
				ev.Cursor = &e
			}
			batch = append(batch, ev)
			return nil
		}
	}
	send := func() error {
		if len(batch) == 0 {
			return nil
		}
		select {
		case out <- batch:
			batch = nil
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	from := min(cur.stdout, cur.stderr)
	err := c.Log.Follow(ctx, from, c.Done(), func(rec process.Record) error {
		skip := last[rec.Stream] - rec.Offset
		if skip >= int64(len(rec.Data)) {
			return nil
		}
		data, off := rec.Data, rec.Offset
		if skip > 0 {
			data, off = data[skip:], off+skip
		}
		typ := api.EventStdout
		if rec.Stream == process.Stderr {
			typ = api.EventStderr
		}
		if err := lines[rec.Stream].Feed(data, off, emitter(typ)); err != nil {
			return err
		}
		last[rec.Stream] = off + int64(len(data))
		return send()
	})
	if err != nil {
		return err
	}
	for _, st := range []process.Stream{process.Stdout, process.Stderr} {
		typ := api.EventStdout
		if st == process.Stderr {
			typ = api.EventStderr
		}
		if err := lines[st].Flush(last[st], emitter(typ)); err != nil {
			return err
		}
	}
	return send()
}
