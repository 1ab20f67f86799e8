// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package sdk

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
)

// PTYOptions tune a terminal session.
type PTYOptions struct {
	Cwd string
	// Command runs instead of an interactive shell.
	Command string
}

// AttachOptions tune an attach to a terminal session.
type AttachOptions struct {
	// Pipe runs the shell with pipes instead of a terminal (first attach
	// only); stderr then arrives apart from stdout.
	Pipe bool
	// Since replays the output from this byte offset (-1: no replay).
	Since int64
	// Takeover replaces a client already attached.
	Takeover bool
	// SplitStderr keeps pipe mode's stderr apart, to be read from Stderr
	// (which must then be read too); otherwise it is mixed into Read.
	SplitStderr bool
}

// CreatePTY creates a terminal session; its shell starts on the first attach.
func (s *Sandbox) CreatePTY(ctx context.Context, opts PTYOptions) (string, error) {
	var out struct {
		SessionID string `json:"session_id"`
	}
	in := map[string]string{}
	if opts.Cwd != "" {
		in["cwd"] = opts.Cwd
	}
	if opts.Command != "" {
		in["command"] = opts.Command
	}
	if err := s.call(ctx, http.MethodPost, "/pty", nil, in, &out); err != nil {
		return "", err
	}
	return out.SessionID, nil
}

// DeletePTY ends a terminal session.
func (s *Sandbox) DeletePTY(ctx context.Context, id string) error {
	return s.call(ctx, http.MethodDelete, "/pty/"+url.PathEscape(id), nil, nil, nil)
}

// PTY is an attached terminal session: Read returns its output (stdout;
// stderr too in pipe mode unless read with ReadStderr), Write sends input.
type PTY struct {
	ID   string
	Mode string
	conn *wsConn

	out    *io.PipeReader
	outW   *io.PipeWriter
	errR   *io.PipeReader
	errW   *io.PipeWriter
	done   chan struct{}
	split  bool
	mu     sync.Mutex
	exit   *int
	offset int64
}

// AttachPTY connects to a terminal session over WebSocket.
func (s *Sandbox) AttachPTY(ctx context.Context, id string, opts AttachOptions) (*PTY, error) {
	q := url.Values{}
	if opts.Pipe {
		q.Set("pty", "0")
	}
	if opts.Since >= 0 {
		q.Set("since", strconv.FormatInt(opts.Since, 10))
	}
	if opts.Takeover {
		q.Set("takeover", "1")
	}
	key := wsKey()
	res, err := s.do(ctx, http.MethodGet, "/pty/"+url.PathEscape(id)+"/ws", q, nil, "",
		"Connection", "Upgrade", "Upgrade", "websocket", "Sec-WebSocket-Version", "13", "Sec-WebSocket-Key", key)
	if err != nil {
		return nil, err
	}
	if res.StatusCode != http.StatusSwitchingProtocols {
		defer res.Body.Close()
		return nil, decodeError(res)
	}
	rwc, ok := res.Body.(io.ReadWriteCloser)
	if !ok || res.Header.Get("Sec-WebSocket-Accept") != wsAccept(key) {
		res.Body.Close()
		return nil, fmt.Errorf("sandbox %s: the terminal endpoint did not speak WebSocket", s.ID)
	}
	conn := &wsConn{rwc: rwc, br: bufio.NewReader(rwc)}
	p := &PTY{ID: id, conn: conn, done: make(chan struct{}), split: opts.SplitStderr}
	p.out, p.outW = io.Pipe()
	p.errR, p.errW = io.Pipe()
	// The first control frame says the mode; replay frames come before it.
	go p.readLoop()
	return p, nil
}

func (p *PTY) readLoop() {
	defer close(p.done)
	var err error
	for {
		var op byte
		var data []byte
		op, data, err = p.conn.readMessage()
		if err != nil {
			break
		}
		if op == wsText {
			var f struct {
				Type     string `json:"type"`
				Mode     string `json:"mode"`
				ExitCode *int   `json:"exit_code"`
			}
			if json.Unmarshal(data, &f) == nil {
				switch f.Type {
				case "connected":
					p.mu.Lock()
					p.Mode = f.Mode
					p.mu.Unlock()
				case "exit":
					p.mu.Lock()
					p.exit = f.ExitCode
					p.mu.Unlock()
				}
			}
			continue
		}
		if len(data) == 0 {
			continue
		}
		payload := data[1:]
		w := p.outW
		switch data[0] {
		case 0x02:
			if p.split {
				w = p.errW
			}
		case 0x03:
			if len(data) < 9 {
				continue
			}
			payload = data[9:]
		}
		p.mu.Lock()
		p.offset += int64(len(payload))
		p.mu.Unlock()
		if _, werr := w.Write(payload); werr != nil {
			err = werr
			break
		}
	}
	if ce, ok := err.(*wsCloseError); ok && ce.Code == 1000 {
		err = nil
	}
	if err == nil {
		err = io.EOF
	}
	p.outW.CloseWithError(err)
	p.errW.CloseWithError(err)
}

// Read reads terminal output.
func (p *PTY) Read(b []byte) (int, error) { return p.out.Read(b) }

// Stderr returns stderr in pipe mode with AttachOptions.SplitStderr.
func (p *PTY) Stderr() io.Reader { return p.errR }

// Write sends input to the terminal.
func (p *PTY) Write(b []byte) (int, error) {
	if err := p.conn.writeFrame(wsBinary, append([]byte{0x00}, b...)); err != nil {
		return 0, err
	}
	return len(b), nil
}

func (p *PTY) control(v any) error {
	b, _ := json.Marshal(v)
	return p.conn.writeFrame(wsText, b)
}

// CloseStdin ends the input: in pipe mode the program's stdin is closed,
// on a terminal it gets the EOF character (a corral extension).
func (p *PTY) CloseStdin() error {
	return p.control(map[string]any{"type": "stdin_eof"})
}

// Resize changes the terminal's size.
func (p *PTY) Resize(cols, rows int) error {
	return p.control(map[string]any{"type": "resize", "cols": cols, "rows": rows})
}

// Signal sends SIGINT, SIGTERM, SIGKILL, SIGQUIT or SIGHUP to the shell's
// foreground process group.
func (p *PTY) Signal(name string) error {
	return p.control(map[string]any{"type": "signal", "signal": strings.ToUpper(name)})
}

// Wait returns the shell's exit code once it has exited and its output
// has been read; ok is false if the connection ended first.
func (p *PTY) Wait() (code int, ok bool) {
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.exit == nil {
		return -1, false
	}
	return *p.exit, true
}

// Offset is how many output bytes were received (a replay position).
func (p *PTY) Offset() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.offset
}

// Close detaches; the session keeps running.
func (p *PTY) Close() error {
	err := p.conn.close(1000, "bye")
	<-p.done
	return err
}
