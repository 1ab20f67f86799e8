// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package execd

import (
	"bufio"
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
	w  http.ResponseWriter
	rc *http.ResponseController
	// bw batches events into large socket writes; it is flushed with
	// every batch.
	bw      *bufio.Writer
	sw      *sse.Writer
	started bool
	last    time.Time
}

func newEventStream(w http.ResponseWriter) *eventStream {
	bw := bufio.NewWriterSize(w, 64<<10)
	return &eventStream{w: w, rc: http.NewResponseController(w), bw: bw, sw: sse.NewWriter(bw)}
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

// writeRaw sends pre-encoded events and flushes once.
func (s *eventStream) writeRaw(b []byte) error {
	s.start()
	if _, err := s.bw.Write(b); err != nil {
		return err
	}
	s.last = time.Now()
	return s.flush()
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
	return s.flush()
}

func (s *eventStream) flush() error {
	if err := s.bw.Flush(); err != nil {
		return err
	}
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
	batches := make(chan []byte, 1)
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
			if err := es.writeRaw(batch); err != nil {
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

// appendOutputEvent encodes one stdout or stderr event as an SSE frame,
// exactly as api.ServerStreamEvent would encode, without building one.
func appendOutputEvent(b []byte, typ string, text []byte, ts int64, cursor int64, withCursor bool) []byte {
	b = append(b, `data: {"type":"`...)
	b = append(b, typ...)
	b = append(b, `","text":`...)
	b = api.AppendJSONString(b, text)
	b = append(b, `,"timestamp":`...)
	b = strconv.AppendInt(b, ts, 10)
	if withCursor {
		b = append(b, `,"cursor":`...)
		b = strconv.AppendInt(b, cursor, 10)
	}
	return append(b, "}\n\n"...)
}

// followLines turns c's retained output into encoded line events, one
// batch per record, until the output of c's main process has all been
// read. A stream resumed from cur skips what each stream already delivered.
func followLines(ctx context.Context, c *process.Command, cur cursors, withCursors bool, out chan<- []byte) error {
	var lines [3]process.Lines
	var last [3]int64
	last[process.Stdout], last[process.Stderr] = cur.stdout, cur.stderr
	var batch []byte
	var ts int64
	emitter := func(typ string) func([]byte, int64) error {
		return func(text []byte, end int64) error {
			batch = appendOutputEvent(batch, typ, text, ts, end, withCursors)
			return nil
		}
	}
	emit := [3]func([]byte, int64) error{process.Stdout: emitter(api.EventStdout), process.Stderr: emitter(api.EventStderr)}
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
		ts = time.Now().UnixMilli()
		if batch == nil {
			batch = make([]byte, 0, len(data)+len(data)/4+256)
		}
		if err := lines[rec.Stream].Feed(data, off, emit[rec.Stream]); err != nil {
			return err
		}
		last[rec.Stream] = off + int64(len(data))
		return send()
	})
	if err != nil {
		return err
	}
	ts = time.Now().UnixMilli()
	for _, st := range []process.Stream{process.Stdout, process.Stderr} {
		if err := lines[st].Flush(last[st], emit[st]); err != nil {
			return err
		}
	}
	return send()
}
