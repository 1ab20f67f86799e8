// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package execd

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/coder/websocket"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/errdefs"
	"github.com/corral-dev/corral/internal/execd/process"
)

// PTY frame channels, the first byte of a binary frame.
const (
	chanStdin  = 0x00
	chanStdout = 0x01
	chanStderr = 0x02
	chanReplay = 0x03
)

// Limits and timings of the PTY WebSocket.
const (
	// ptyChunk is the most output one replay frame carries.
	ptyChunk        = 32 << 10
	ptyWriteTimeout = 10 * time.Second
	ptyCloseTakenOv = 4001
)

func (s *Server) createPTY(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Cwd     string `json:"cwd,omitempty"`
		Command string `json:"command,omitempty"`
	}
	if err := decode(r, &req, true); err != nil {
		writeError(w, err)
		return
	}
	dir, err := s.resolveWorkdir(req.Cwd)
	if err != nil {
		writeError(w, err)
		return
	}
	env := append(s.env(nil, os.Geteuid()), "TERM=xterm-256color")
	sess := s.ptys.Create(dir, req.Command, env)
	writeJSON(w, http.StatusCreated, map[string]string{"session_id": sess.ID})
}

func ptyNotFound(id string) error {
	return errdefs.Newf(errdefs.ErrNotFound, api.CodeExecdSessionNotFound, "pty session %s not found", id)
}

func (s *Server) ptyStatus(w http.ResponseWriter, r *http.Request) {
	sess, ok := s.ptys.Get(r.PathValue("id"))
	if !ok {
		writeError(w, ptyNotFound(r.PathValue("id")))
		return
	}
	running, offset := sess.Status()
	writeJSON(w, http.StatusOK, map[string]any{"session_id": sess.ID, "running": running, "output_offset": offset})
}

func (s *Server) deletePTY(w http.ResponseWriter, r *http.Request) {
	if !s.ptys.Delete(r.PathValue("id")) {
		writeError(w, ptyNotFound(r.PathValue("id")))
		return
	}
	w.WriteHeader(http.StatusOK)
}

// attachPTY serves the WebSocket of a PTY session: a replay from ?since=,
// then live output, with stdin, resize and signals from the client. One
// client at a time; ?takeover=1 replaces the current one (closed 4001).
// ?pty=0 starts the shell on pipes instead of a terminal.
func (s *Server) attachPTY(w http.ResponseWriter, r *http.Request) {
	sess, ok := s.ptys.Get(r.PathValue("id"))
	if !ok {
		writeError(w, ptyNotFound(r.PathValue("id")))
		return
	}
	q := r.URL.Query()
	var since int64 = -1
	if v := q.Get("since"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			writeError(w, badRequest("since %q: must be a byte offset", v))
			return
		}
		since = n
	}
	takeover := q.Get("takeover") == "1" || q.Get("takeover") == "true"
	if sess.HasViewer() && !takeover {
		writeJSON(w, http.StatusConflict, api.ErrorResponse{Code: api.CodeExecdAlreadyConnected,
			Message: "another client is attached; reconnect with takeover=1 to replace it"})
		return
	}
	mode := process.ModePTY
	if q.Get("pty") == "0" {
		mode = process.ModePipe
	}

	conn, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
	if err != nil {
		return
	}
	conn.SetReadLimit(1 << 20)
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	v := process.NewViewer()
	defer v.Close()
	a, err := sess.Attach(v, mode, since)
	if err != nil {
		writeWSError(ctx, conn, "START_FAILED", err.Error())
		_ = conn.Close(websocket.StatusInternalError, "start failed")
		return
	}
	defer sess.Detach(v)

	if !replayPTY(ctx, conn, v, a.Replay, a.ReplayOffset) {
		return
	}
	hello, _ := json.Marshal(map[string]string{"type": "connected", "session_id": sess.ID, "mode": a.Mode.String()})
	if err := writeWS(ctx, conn, websocket.MessageText, hello); err != nil {
		return
	}
	if a.Exited {
		_ = writeWS(ctx, conn, websocket.MessageText, exitFrame(a.ExitCode))
		_ = conn.Close(websocket.StatusNormalClosure, "process exited")
		return
	}
	go func() {
		defer cancel()
		ptyInput(ctx, sess, conn, v)
	}()
	streamPTY(ctx, conn, v)
}

// replayPTY sends the replay in frames of at most ptyChunk bytes, each
// with its offset. It reports whether the connection is still usable.
func replayPTY(ctx context.Context, conn *websocket.Conn, v *process.Viewer, replay []byte, off int64) bool {
	for len(replay) > 0 {
		if isEnded(v) {
			closeEnded(conn, v)
			return false
		}
		n := min(len(replay), ptyChunk)
		frame := make([]byte, 9+n)
		frame[0] = chanReplay
		binary.BigEndian.PutUint64(frame[1:9], uint64(off))
		copy(frame[9:], replay[:n])
		if err := writeWS(ctx, conn, websocket.MessageBinary, frame); err != nil {
			return false
		}
		replay, off = replay[n:], off+int64(n)
	}
	return true
}

// streamPTY sends live output until the shell exits, the attachment ends
// or the connection goes.
func streamPTY(ctx context.Context, conn *websocket.Conn, v *process.Viewer) {
	for {
		select {
		case <-v.Ended():
			closeEnded(conn, v)
			return
		case <-ctx.Done():
			return
		case ev := <-v.Events():
			if ev.Exited {
				if err := writeWS(ctx, conn, websocket.MessageText, exitFrame(ev.ExitCode)); err != nil {
					return
				}
				_ = conn.Close(websocket.StatusNormalClosure, "process exited")
				return
			}
			ch := byte(chanStdout)
			if ev.Stream == process.Stderr {
				ch = chanStderr
			}
			if err := writeWS(ctx, conn, websocket.MessageBinary, append([]byte{ch}, ev.Data...)); err != nil {
				return
			}
		}
	}
}

func isEnded(v *process.Viewer) bool {
	select {
	case <-v.Ended():
		return true
	default:
		return false
	}
}

// closeEnded closes the connection of a viewer whose attachment ended,
// saying why. The handler does it, not the one ending the attachment: the
// close frame must be written before anything tears the connection down,
// and cancelling a read's context first would drop the connection
// without it.
func closeEnded(conn *websocket.Conn, v *process.Viewer) {
	if v.Reason() == process.EndTakenOver {
		_ = conn.Close(ptyCloseTakenOv, "TAKEN_OVER")
		return
	}
	_ = conn.Close(websocket.StatusNormalClosure, "session deleted")
}

func exitFrame(code int) []byte {
	b, _ := json.Marshal(map[string]any{"type": "exit", "exit_code": code})
	return b
}

func writeWS(ctx context.Context, conn *websocket.Conn, typ websocket.MessageType, b []byte) error {
	wctx, cancel := context.WithTimeout(ctx, ptyWriteTimeout)
	defer cancel()
	return conn.Write(wctx, typ, b)
}

func writeWSError(ctx context.Context, conn *websocket.Conn, code, msg string) {
	b, _ := json.Marshal(map[string]string{"type": "error", "code": code, "error": msg})
	_ = writeWS(ctx, conn, websocket.MessageText, b)
}

// clientFrame is one decoded frame from a PTY client.
type clientFrame struct {
	kind       string // stdin, resize, signal, stdin_eof, ping
	data       []byte // stdin
	cols, rows int    // resize
	signal     string // signal
}

// decodeClientFrame reads a client frame: binary frames are stdin (0x00
// then the bytes), text frames are JSON with a type. The error is what
// the client is told (INVALID_FRAME).
func decodeClientFrame(typ websocket.MessageType, data []byte) (clientFrame, error) {
	if typ == websocket.MessageBinary {
		if len(data) == 0 || data[0] != chanStdin {
			return clientFrame{}, errors.New("binary frames from the client start with 0x00 (stdin)")
		}
		return clientFrame{kind: "stdin", data: data[1:]}, nil
	}
	var f struct {
		Type   string `json:"type"`
		Data   string `json:"data"`
		Cols   int    `json:"cols"`
		Rows   int    `json:"rows"`
		Signal string `json:"signal"`
	}
	if json.Unmarshal(data, &f) != nil {
		return clientFrame{}, errors.New("text frames must be JSON")
	}
	switch f.Type {
	case "stdin":
		return clientFrame{kind: f.Type, data: []byte(f.Data)}, nil
	case "resize":
		return clientFrame{kind: f.Type, cols: f.Cols, rows: f.Rows}, nil
	case "signal":
		return clientFrame{kind: f.Type, signal: f.Signal}, nil
	case "stdin_eof", "ping":
		return clientFrame{kind: f.Type}, nil
	}
	return clientFrame{}, errors.New("unknown frame type " + strconv.Quote(f.Type))
}

// ptyInput reads client frames: binary stdin, and JSON stdin, resize,
// signal, stdin_eof (a corral extension) and ping.
func ptyInput(ctx context.Context, sess *process.PTY, conn *websocket.Conn, v *process.Viewer) {
	for {
		typ, data, err := conn.Read(ctx)
		if err != nil {
			return
		}
		if isEnded(v) {
			// Replaced or deleted: what it still sends is dropped while its
			// handler closes the connection (returning here would cancel
			// the context under that close).
			continue
		}
		f, err := decodeClientFrame(typ, data)
		if err != nil {
			writeWSError(ctx, conn, "INVALID_FRAME", err.Error())
			continue
		}
		switch f.kind {
		case "stdin":
			if err := sess.WriteStdin(f.data); err != nil {
				writeWSError(ctx, conn, "STDIN_WRITE_FAILED", err.Error())
			}
		case "resize":
			if err := sess.Resize(f.cols, f.rows); err != nil {
				writeWSError(ctx, conn, "INVALID_FRAME", err.Error())
			}
		case "signal":
			if err := sess.Signal(f.signal); err != nil {
				writeWSError(ctx, conn, "INVALID_FRAME", err.Error())
			}
		case "stdin_eof":
			if err := sess.CloseStdin(); err != nil {
				writeWSError(ctx, conn, "STDIN_WRITE_FAILED", err.Error())
			}
		case "ping":
			_ = writeWS(ctx, conn, websocket.MessageText, []byte(`{"type":"pong"}`))
		}
	}
}
