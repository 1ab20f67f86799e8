// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package execd

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/coder/websocket"
	"github.com/creack/pty"

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

// Limits and timings of PTY sessions.
const (
	ptyRingSize     = 1 << 20
	ptyChunk        = 32 << 10
	ptyWriteTimeout = 10 * time.Second
	ptyCloseTakenOv = 4001
	resizeRecheck   = 100 * time.Millisecond
)

// ring keeps the last ptyRingSize bytes of output and the total count.
type ring struct {
	buf   []byte
	total int64 // bytes ever written
}

func (r *ring) write(p []byte) {
	r.total += int64(len(p))
	r.buf = append(r.buf, p...)
	if over := len(r.buf) - ptyRingSize; over > 0 {
		r.buf = append(r.buf[:0], r.buf[over:]...)
	}
}

// since returns the bytes from offset off (or the oldest kept) and where
// they start.
func (r *ring) since(off int64) ([]byte, int64) {
	start := r.total - int64(len(r.buf))
	off = max(off, start)
	if off >= r.total {
		return nil, r.total
	}
	return append([]byte(nil), r.buf[off-start:]...), off
}

// ptyClient is the WebSocket attached to a session.
type ptyClient struct {
	conn *websocket.Conn
	out  chan []byte
	done chan struct{}

	// ended is closed when the session replaces or deletes this client;
	// its handler then closes the connection with endCode and endReason.
	// The handler does it, not the one ending it: the close frame must be
	// written before anything tears the connection down, and cancelling a
	// read's context first would drop the connection without it.
	endOnce   sync.Once
	ended     chan struct{}
	endCode   websocket.StatusCode
	endReason string
}

func newPTYClient(conn *websocket.Conn) *ptyClient {
	return &ptyClient{conn: conn, out: make(chan []byte, 64), done: make(chan struct{}), ended: make(chan struct{})}
}

// end asks the client's handler to close its connection with code; the
// first call wins.
func (c *ptyClient) end(code websocket.StatusCode, reason string) {
	c.endOnce.Do(func() {
		c.endCode, c.endReason = code, reason
		close(c.ended)
	})
}

func (c *ptyClient) isEnded() bool {
	select {
	case <-c.ended:
		return true
	default:
		return false
	}
}

type ptySession struct {
	id      string
	cwd     string
	command string
	env     []string

	// mu guards the fields below.
	mu       sync.Mutex
	started  bool
	mode     string
	cmd      *exec.Cmd
	stdin    io.WriteCloser
	master   *os.File
	ring     ring
	client   *ptyClient
	exited   bool
	exitCode int
	exitCh   chan struct{}
	// want is the last size a client asked for; wantGen counts requests
	// so a re-assertion only acts for the newest one.
	want    pty.Winsize
	wantGen uint64
}

type ptyTable struct {
	// mu guards m.
	mu sync.Mutex
	m  map[string]*ptySession
	// wg owns the goroutines that read PTY output and reap shells.
	wg sync.WaitGroup
}

func newPTYTable() *ptyTable { return &ptyTable{m: map[string]*ptySession{}} }

func (t *ptyTable) get(id string) (*ptySession, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s, ok := t.m[id]
	return s, ok
}

func (t *ptyTable) remove(id string) (*ptySession, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s, ok := t.m[id]
	delete(t.m, id)
	return s, ok
}

func (t *ptyTable) closeAll() {
	t.mu.Lock()
	all := make([]*ptySession, 0, len(t.m))
	for id, s := range t.m {
		all = append(all, s)
		delete(t.m, id)
	}
	t.mu.Unlock()
	for _, s := range all {
		s.kill()
	}
	t.wg.Wait()
}

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
	sess := &ptySession{id: newPTYID(), cwd: dir, command: req.Command, env: env, exitCh: make(chan struct{})}
	s.ptys.mu.Lock()
	s.ptys.m[sess.id] = sess
	s.ptys.mu.Unlock()
	writeJSON(w, http.StatusCreated, map[string]string{"session_id": sess.id})
}

func newPTYID() string {
	// Same dashed form as session ids.
	return process.NewSessionID()
}

func ptyNotFound(id string) error {
	return errdefs.Newf(errdefs.ErrNotFound, api.CodeExecdSessionNotFound, "pty session %s not found", id)
}

func (s *Server) ptyStatus(w http.ResponseWriter, r *http.Request) {
	sess, ok := s.ptys.get(r.PathValue("id"))
	if !ok {
		writeError(w, ptyNotFound(r.PathValue("id")))
		return
	}
	sess.mu.Lock()
	out := map[string]any{"session_id": sess.id, "running": sess.started && !sess.exited, "output_offset": sess.ring.total}
	sess.mu.Unlock()
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) deletePTY(w http.ResponseWriter, r *http.Request) {
	sess, ok := s.ptys.remove(r.PathValue("id"))
	if !ok {
		writeError(w, ptyNotFound(r.PathValue("id")))
		return
	}
	sess.kill()
	w.WriteHeader(http.StatusOK)
}

// kill ends the shell and disconnects the client.
func (p *ptySession) kill() {
	p.mu.Lock()
	if p.started && !p.exited && p.cmd.Process != nil {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	}
	c := p.client
	p.client = nil
	started := p.started
	p.mu.Unlock()
	if c != nil {
		c.end(websocket.StatusNormalClosure, "session deleted")
	}
	if started {
		<-p.exitCh
	}
}

// start runs the shell in PTY mode (a terminal) or pipe mode. p.mu held.
func (p *ptySession) start(t *ptyTable, pipeMode bool) error {
	argv := []string{process.Shell()[0], "--norc", "--noprofile"}
	if p.command != "" {
		argv = append(argv, "-c", p.command)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir, cmd.Env = p.cwd, p.env
	var readers []struct {
		r  io.ReadCloser
		ch byte
	}
	if pipeMode {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		stdin, err := cmd.StdinPipe()
		if err != nil {
			return err
		}
		outR, outW, err := os.Pipe()
		if err != nil {
			return err
		}
		errR, errW, err := os.Pipe()
		if err != nil {
			outR.Close()
			outW.Close()
			return err
		}
		cmd.Stdout, cmd.Stderr = outW, errW
		err = cmd.Start()
		outW.Close()
		errW.Close()
		if err != nil {
			outR.Close()
			errR.Close()
			return err
		}
		p.stdin, p.mode = stdin, "pipe"
		readers = append(readers, struct {
			r  io.ReadCloser
			ch byte
		}{outR, chanStdout}, struct {
			r  io.ReadCloser
			ch byte
		}{errR, chanStderr})
	} else {
		master, err := pty.StartWithAttrs(cmd, &pty.Winsize{Cols: 80, Rows: 24}, &syscall.SysProcAttr{Setsid: true, Setctty: true})
		if err != nil {
			return err
		}
		p.master, p.stdin, p.mode = master, master, "pty"
		readers = append(readers, struct {
			r  io.ReadCloser
			ch byte
		}{master, chanStdout})
	}
	p.cmd, p.started = cmd, true
	var rwg sync.WaitGroup
	for _, rd := range readers {
		rwg.Add(1)
		t.wg.Go(func() {
			defer rwg.Done()
			p.pump(rd.r, rd.ch)
		})
	}
	t.wg.Go(func() {
		err := cmd.Wait()
		code, _ := exitCodeOf(cmd.ProcessState, err)
		if p.master != nil {
			// The terminal's output is drained once the shell is gone.
			_ = p.master.Close()
		}
		rwg.Wait()
		p.mu.Lock()
		p.exited, p.exitCode = true, code
		c := p.client
		p.mu.Unlock()
		close(p.exitCh)
		if c != nil {
			b, _ := json.Marshal(map[string]any{"type": "exit", "exit_code": code})
			c.send(append([]byte{'{'}, b[1:]...), true)
		}
	})
	return nil
}

func exitCodeOf(ps *os.ProcessState, err error) (int, error) {
	if ps == nil {
		return 255, err
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal()), nil
	}
	return ps.ExitCode(), nil
}

// pump copies one output stream into the ring and to the attached client.
func (p *ptySession) pump(r io.ReadCloser, ch byte) {
	defer r.Close()
	buf := make([]byte, ptyChunk)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			p.mu.Lock()
			p.ring.write(buf[:n])
			c := p.client
			p.mu.Unlock()
			if c != nil {
				c.send(append([]byte{ch}, buf[:n]...), false)
			}
		}
		if err != nil {
			return
		}
	}
}

// send queues a frame for the client; text frames are JSON control frames.
// A client that does not keep up blocks the output (backpressure) until
// it goes away.
func (c *ptyClient) send(frame []byte, text bool) {
	if text {
		frame = append([]byte{0xff}, frame...)
	}
	select {
	case c.out <- frame:
	case <-c.done:
	}
}

// attachPTY serves the WebSocket of a PTY session: a replay from ?since=,
// then live output, with stdin, resize and signals from the client. One
// client at a time; ?takeover=1 replaces the current one (closed 4001).
func (s *Server) attachPTY(w http.ResponseWriter, r *http.Request) {
	sess, ok := s.ptys.get(r.PathValue("id"))
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
	sess.mu.Lock()
	if sess.client != nil && !takeover {
		sess.mu.Unlock()
		writeJSON(w, http.StatusConflict, api.ErrorResponse{Code: api.CodeExecdAlreadyConnected,
			Message: "another client is attached; reconnect with takeover=1 to replace it"})
		return
	}
	sess.mu.Unlock()

	conn, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
	if err != nil {
		return
	}
	conn.SetReadLimit(1 << 20)
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	c := newPTYClient(conn)
	defer close(c.done)

	sess.mu.Lock()
	if !sess.started {
		if err := sess.start(s.ptys, q.Get("pty") == "0"); err != nil {
			sess.mu.Unlock()
			writeWSError(ctx, conn, "START_FAILED", err.Error())
			_ = conn.Close(websocket.StatusInternalError, "start failed")
			return
		}
	}
	old := sess.client
	sess.client = c
	var replay []byte
	var replayOff int64
	if since >= 0 {
		replay, replayOff = sess.ring.since(since)
	}
	mode, exited, code := sess.mode, sess.exited, sess.exitCode
	sess.mu.Unlock()
	if old != nil {
		old.end(ptyCloseTakenOv, "TAKEN_OVER")
	}
	defer func() {
		sess.mu.Lock()
		if sess.client == c {
			sess.client = nil
		}
		sess.mu.Unlock()
	}()

	for len(replay) > 0 {
		if c.isEnded() {
			_ = conn.Close(c.endCode, c.endReason)
			return
		}
		n := min(len(replay), ptyChunk)
		frame := make([]byte, 9+n)
		frame[0] = chanReplay
		binary.BigEndian.PutUint64(frame[1:9], uint64(replayOff))
		copy(frame[9:], replay[:n])
		if err := writeWS(ctx, conn, websocket.MessageBinary, frame); err != nil {
			return
		}
		replay, replayOff = replay[n:], replayOff+int64(n)
	}
	hello, _ := json.Marshal(map[string]string{"type": "connected", "session_id": sess.id, "mode": mode})
	if err := writeWS(ctx, conn, websocket.MessageText, hello); err != nil {
		return
	}
	if exited {
		b, _ := json.Marshal(map[string]any{"type": "exit", "exit_code": code})
		_ = writeWS(ctx, conn, websocket.MessageText, b)
		_ = conn.Close(websocket.StatusNormalClosure, "process exited")
		return
	}
	go func() {
		defer cancel()
		s.ptyInput(ctx, sess, c)
	}()
	for {
		select {
		case <-c.ended:
			_ = conn.Close(c.endCode, c.endReason)
			return
		case <-ctx.Done():
			return
		case frame := <-c.out:
			typ := websocket.MessageBinary
			if frame[0] == 0xff {
				typ, frame = websocket.MessageText, frame[1:]
			}
			if err := writeWS(ctx, conn, typ, frame); err != nil {
				return
			}
			if typ == websocket.MessageText {
				// The only text frame the pump sends is the exit.
				_ = conn.Close(websocket.StatusNormalClosure, "process exited")
				return
			}
		}
	}
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
// signal and ping.
func (s *Server) ptyInput(ctx context.Context, sess *ptySession, c *ptyClient) {
	for {
		typ, data, err := c.conn.Read(ctx)
		if err != nil {
			return
		}
		if c.isEnded() {
			// Replaced or deleted: what it still sends is dropped while its
			// handler closes the connection (returning here would cancel
			// the context under that close).
			continue
		}
		f, err := decodeClientFrame(typ, data)
		if err != nil {
			writeWSError(ctx, c.conn, "INVALID_FRAME", err.Error())
			continue
		}
		switch f.kind {
		case "stdin":
			if err := sess.writeStdin(f.data); err != nil {
				writeWSError(ctx, c.conn, "STDIN_WRITE_FAILED", err.Error())
			}
		case "resize":
			if err := sess.resize(f.cols, f.rows); err != nil {
				writeWSError(ctx, c.conn, "INVALID_FRAME", err.Error())
			}
		case "signal":
			if err := sess.signal(f.signal); err != nil {
				writeWSError(ctx, c.conn, "INVALID_FRAME", err.Error())
			}
		case "stdin_eof":
			if err := sess.closeStdin(); err != nil {
				writeWSError(ctx, c.conn, "STDIN_WRITE_FAILED", err.Error())
			}
		case "ping":
			_ = writeWS(ctx, c.conn, websocket.MessageText, []byte(`{"type":"pong"}`))
		}
	}
}

func (p *ptySession) writeStdin(b []byte) error {
	p.mu.Lock()
	in := p.stdin
	p.mu.Unlock()
	if in == nil {
		return errors.New("the process is not running")
	}
	_, err := in.Write(b)
	return err
}

// closeStdin ends the input (a corral extension, {"type":"stdin_eof"}):
// in pipe mode the stdin pipe is closed; a terminal gets its EOF
// character, which ends input to a program reading a line.
func (p *ptySession) closeStdin() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stdin == nil {
		return errors.New("the process is not running")
	}
	if p.mode == "pty" {
		_, err := p.stdin.Write([]byte{4})
		return err
	}
	err := p.stdin.Close()
	p.stdin = nil
	return err
}

func (p *ptySession) resize(cols, rows int) error {
	if cols < 1 || rows < 1 || cols > 10000 || rows > 10000 {
		return errors.New("resize needs cols and rows from 1 to 10000")
	}
	p.mu.Lock()
	m := p.master
	p.mu.Unlock()
	if m == nil {
		return errors.New("resize needs PTY mode")
	}
	ws := pty.Winsize{Cols: uint16(cols), Rows: uint16(rows)}
	if err := pty.Setsize(m, &ws); err != nil {
		return err
	}
	p.mu.Lock()
	p.want = ws
	p.wantGen++
	gen := p.wantGen
	p.mu.Unlock()
	// Readline reads the size and writes it back each time it prepares
	// the terminal; a resize landing between the two is undone. Check
	// once shortly after and set it again if it was (which also sends
	// SIGWINCH, so the shell redraws at the right size).
	time.AfterFunc(resizeRecheck, func() { p.reassertSize(gen) })
	return nil
}

func (p *ptySession) reassertSize(gen uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.master == nil || p.exited || gen != p.wantGen {
		return
	}
	cur, err := pty.GetsizeFull(p.master)
	if err != nil || (cur.Cols == p.want.Cols && cur.Rows == p.want.Rows) {
		return
	}
	_ = pty.Setsize(p.master, &p.want)
}

func (p *ptySession) signal(name string) error {
	sig, ok := map[string]syscall.Signal{"SIGINT": syscall.SIGINT, "SIGTERM": syscall.SIGTERM, "SIGKILL": syscall.SIGKILL,
		"SIGQUIT": syscall.SIGQUIT, "SIGHUP": syscall.SIGHUP}[name]
	if !ok {
		return errors.New("signal must be SIGINT, SIGTERM, SIGKILL, SIGQUIT or SIGHUP")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.started || p.exited {
		return errors.New("the process is not running")
	}
	if p.mode == "pty" {
		// The shell's terminal foreground process group gets the signal,
		// as a keyboard's ^C would deliver it.
		if pgid, err := foregroundGroup(p.master); err == nil && pgid > 0 {
			return syscall.Kill(-pgid, sig)
		}
	}
	return syscall.Kill(-p.cmd.Process.Pid, sig)
}
