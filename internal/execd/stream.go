// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package execd

import (
	"bufio"
	"context"
	"net/http"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/internal/execd/process"
	"github.com/corral-dev/corral/sse"
)

// HeaderEventCursors asks a command stream to put a cursor on every output
// event (a corral extension; OpenSandbox clients never send it).
const HeaderEventCursors = "Corral-Event-Cursors"

// HeaderOutput set to "raw" makes a command stream send output as it was
// written, in chunks, instead of one event per line: concatenating the
// texts gives the exact output (as long as it is valid UTF-8). A corral
// extension for clients that copy output to a byte stream.
const HeaderOutput = "Corral-Output"

// streamMode is how a client asked for output events.
type streamMode struct {
	cursors bool // a cursor on every output event
	raw     bool // chunks, not lines
}

// modeOf reads the mode a request asks for and, before any event is
// written, confirms raw output in the response so clients can tell a
// server that honours it from one that sends lines anyway.
func modeOf(w http.ResponseWriter, r *http.Request) streamMode {
	m := streamMode{cursors: r.Header.Get(HeaderEventCursors) != "", raw: r.Header.Get(HeaderOutput) == "raw"}
	if m.raw {
		w.Header().Set(HeaderOutput, "raw")
	}
	return m
}

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
	// mu serialises writeLocked and quietFor, for streams that two
	// goroutines write.
	mu sync.Mutex
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

// writeLocked is write for a stream that two goroutines write.
func (s *eventStream) writeLocked(evs ...api.ServerStreamEvent) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.write(evs...)
}

// quietFor is how long ago writeLocked last wrote.
func (s *eventStream) quietFor() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return time.Since(s.last)
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
func (s *Server) streamOutput(ctx context.Context, es *eventStream, c *process.Command, cur cursors, mode streamMode) error {
	batches := make(chan []byte, 1)
	// Written batches come back for reuse: a fast command's records are
	// up to a MiB each, and allocating (and zeroing) a buffer per record
	// costs more than encoding it.
	free := make(chan []byte, 2)
	followErr := make(chan error, 1)
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		followErr <- followOutput(fctx, c, cur, mode, batches, free)
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
			select {
			case free <- batch[:0]:
			default:
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

// followOutput turns c's retained output into encoded events (lines, or
// raw chunks), one batch per record, until the output of c's main process
// has all been read. A stream resumed from cur skips what each stream
// already delivered.
func followOutput(ctx context.Context, c *process.Command, cur cursors, mode streamMode, out chan<- []byte, free <-chan []byte) error {
	var lines [3]process.Lines
	var chunks [3]rawChunks
	var last [3]int64
	last[process.Stdout], last[process.Stderr] = cur.stdout, cur.stderr
	var batch []byte
	var ts int64
	emitter := func(typ string) func([]byte, int64) error {
		return func(text []byte, end int64) error {
			batch = appendOutputEvent(batch, typ, text, ts, end, mode.cursors)
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
			select {
			case batch = <-free:
			default:
				batch = make([]byte, 0, len(data)+len(data)/4+256)
			}
		}
		if mode.raw {
			chunks[rec.Stream].feed(data, off, emit[rec.Stream])
		} else if err := lines[rec.Stream].Feed(data, off, emit[rec.Stream]); err != nil {
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
		if mode.raw {
			chunks[st].flush(last[st], emit[st])
		} else if err := lines[st].Flush(last[st], emit[st]); err != nil {
			return err
		}
	}
	return send()
}

// rawChunks passes output through as it comes, holding back an incomplete
// UTF-8 sequence at the end of a chunk until the rest of it arrives, so a
// character split between two writes is not mangled by JSON encoding.
type rawChunks struct{ held []byte }

func (r *rawChunks) feed(data []byte, off int64, emit func([]byte, int64) error) {
	end := off + int64(len(data))
	if len(r.held) > 0 {
		data = append(r.held, data...)
		r.held = nil
	}
	cut := incompleteTail(data)
	if cut < len(data) {
		r.held = append([]byte(nil), data[cut:]...)
		data = data[:cut]
	}
	end -= int64(len(r.held))
	for len(data) > maxRawChunk {
		cut := maxRawChunk
		for cut > maxRawChunk-utf8.UTFMax && !utf8.RuneStart(data[cut]) {
			cut--
		}
		_ = emit(data[:cut], end-int64(len(data)-cut))
		data = data[cut:]
	}
	if len(data) > 0 {
		_ = emit(data, end)
	}
}

// maxRawChunk is the most output one raw event carries. A pipe's read can
// be a megabyte (execd asks for pipes that large), and JSON writes a
// control byte as six ("\u0000"), so a megabyte of binary output in one
// event would pass the size readers accept (sse.MaxEventSize); cut at a
// character boundary, a chunk stays under it however it is escaped.
const maxRawChunk = 256 << 10

func (r *rawChunks) flush(end int64, emit func([]byte, int64) error) {
	if len(r.held) > 0 {
		_ = emit(r.held, end)
		r.held = nil
	}
}

// incompleteTail returns where a trailing, unfinished UTF-8 sequence of b
// starts, or len(b) if b ends on a character boundary.
func incompleteTail(b []byte) int {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return i
			}
			return len(b)
		}
	}
	return len(b)
}
