// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package execd_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/corral-dev/corral/api"
)

func (d *daemon) dialPTY(t *testing.T, id, query string) (*websocket.Conn, *http.Response, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	u := strings.Replace(d.url, "http://", "ws://", 1) + "/pty/" + id + "/ws" + query
	return websocket.Dial(ctx, u, &websocket.DialOptions{HTTPHeader: http.Header{api.HeaderExecdToken: {token}}})
}

// readUntil reads frames until the terminal output contains want; it
// returns everything read and the control frames seen.
func readUntil(t *testing.T, c *websocket.Conn, want string) (string, []map[string]any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	var out strings.Builder
	var ctrl []map[string]any
	for want == "" || !strings.Contains(out.String(), want) {
		typ, b, err := c.Read(ctx)
		if err != nil {
			t.Fatalf("read while waiting for %q (have %q): %v", want, out.String(), err)
		}
		if typ == websocket.MessageText {
			var m map[string]any
			_ = json.Unmarshal(b, &m)
			ctrl = append(ctrl, m)
			if m["type"] == "exit" && want == "" {
				return out.String(), ctrl
			}
			continue
		}
		switch b[0] {
		case 0x01, 0x02:
			out.Write(b[1:])
		case 0x03:
			out.Write(b[9:])
		}
	}
	return out.String(), ctrl
}

func TestPTY(t *testing.T) {
	t.Parallel()
	d := startExecd(t)
	var created map[string]string
	a := d.do("POST", "/pty", map[string]string{"cwd": "/tmp"})
	a.json(t, &created)
	id := created["session_id"]
	if a.status != 201 || id == "" {
		t.Fatalf("create = %d %s", a.status, a.body)
	}
	c, _, err := d.dialPTY(t, id, "")
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	ctx := t.Context()
	_ = c.Write(ctx, websocket.MessageBinary, append([]byte{0}, []byte("stty size; pwd; echo $((6*7))\n")...))
	out, ctrl := readUntil(t, c, "42")
	if len(ctrl) == 0 || ctrl[0]["type"] != "connected" || ctrl[0]["mode"] != "pty" {
		t.Errorf("first control frame = %v", ctrl)
	}
	if !strings.Contains(out, "24 80") || !strings.Contains(out, "/tmp") {
		t.Errorf("terminal output = %q", out)
	}
	// The resize may land while readline prepares the next prompt, which
	// writes back the size it read; execd sets it again 100 ms later.
	// The shell undoing it explicitly shows that re-assertion.
	_ = c.Write(ctx, websocket.MessageText, []byte(`{"type":"resize","cols":120,"rows":40}`))
	_ = c.Write(ctx, websocket.MessageText, []byte(`{"type":"stdin","data":"stty rows 24 cols 80; sleep 0.4; stty size\n"}`))
	readUntil(t, c, "40 120")
	_ = c.Write(ctx, websocket.MessageText, []byte(`{"type":"ping"}`))
	_ = c.Write(ctx, websocket.MessageText, []byte(`{"type":"bogus"}`))
	_ = c.Write(ctx, websocket.MessageText, []byte(`{"type":"stdin","data":"echo marker\n"}`))
	_, ctrl = readUntil(t, c, "marker")
	types := ""
	for _, m := range ctrl {
		types += fmt.Sprint(m["type"], m["code"], " ")
	}
	if !strings.Contains(types, "pong") || !strings.Contains(types, "errorINVALID_FRAME") {
		t.Errorf("control frames after ping and a bogus frame = %q", types)
	}

	// A second client is refused unless it takes over.
	if _, res, err := d.dialPTY(t, id, ""); err == nil || res == nil || res.StatusCode != http.StatusConflict {
		t.Errorf("second client: %v %v", res, err)
	}
	var st map[string]any
	d.do("GET", "/pty/"+id, nil).json(t, &st)
	offset := int64(st["output_offset"].(float64))
	if st["running"] != true || offset == 0 {
		t.Errorf("status = %v", st)
	}
	c2, _, err := d.dialPTY(t, id, "?takeover=1&since=0")
	if err != nil {
		t.Fatal(err)
	}
	defer c2.CloseNow()
	for err == nil {
		_, _, err = c.Read(ctx) // frames still in flight come first
	}
	var ce websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != 4001 {
		t.Errorf("the replaced client got %v, want close 4001", err)
	}
	// The replay starts at offset 0 and holds what was printed before.
	typ, b, err := c2.Read(ctx)
	if err != nil || typ != websocket.MessageBinary || b[0] != 0x03 || binary.BigEndian.Uint64(b[1:9]) != 0 || !strings.Contains(string(b[9:]), "42") {
		t.Errorf("replay frame = %v %q %v", typ, b, err)
	}
	_ = c2.Write(ctx, websocket.MessageBinary, append([]byte{0}, []byte("exit 7\n")...))
	_, ctrl = readUntil(t, c2, "")
	if last := ctrl[len(ctrl)-1]; last["type"] != "exit" || last["exit_code"] != float64(7) {
		t.Errorf("exit frame = %v", ctrl)
	}
	if a := d.do("DELETE", "/pty/"+id, nil); a.status != 200 {
		t.Errorf("delete = %d", a.status)
	}
	if a := d.do("GET", "/pty/"+id, nil); a.status != 404 {
		t.Errorf("status after delete = %d", a.status)
	}
	if _, res, err := d.dialPTY(t, "nope", ""); err == nil || res.StatusCode != 404 {
		t.Errorf("unknown pty: %v", err)
	}
}

// A client that is replaced or whose session is deleted learns why from
// the close frame (4001 TAKEN_OVER, 1000 "session deleted"), never from a
// dropped connection, even while output streams to it.
func TestPTYEndedClientsAreToldWhy(t *testing.T) {
	t.Parallel()
	d := startExecd(t)
	var created map[string]string
	a := d.do("POST", "/pty", map[string]string{})
	a.json(t, &created)
	id := created["session_id"]
	if a.status != 201 || id == "" {
		t.Fatalf("create = %d %s", a.status, a.body)
	}
	ctx := t.Context()
	c, _, err := d.dialPTY(t, id, "")
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	_ = c.Write(ctx, websocket.MessageBinary, append([]byte{0}, []byte("while :; do echo tick; sleep 0.002; done\n")...))
	readUntil(t, c, "tick")
	closedWith := func(c *websocket.Conn) websocket.CloseError {
		rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		var err error
		for err == nil {
			_, _, err = c.Read(rctx) // output still in flight comes first
		}
		var ce websocket.CloseError
		errors.As(err, &ce)
		if ce.Code == 0 {
			t.Errorf("connection ended by %v, not a close frame", err)
		}
		return ce
	}
	for i := range 10 {
		next, _, err := d.dialPTY(t, id, "?takeover=1")
		if err != nil {
			t.Fatal(err)
		}
		defer next.CloseNow()
		if ce := closedWith(c); ce.Code != 4001 || ce.Reason != "TAKEN_OVER" {
			t.Errorf("takeover %d: the replaced client got %v, want 4001 TAKEN_OVER", i, ce)
		}
		c = next
		readUntil(t, c, "tick")
	}
	done := make(chan websocket.CloseError, 1)
	go func() { done <- closedWith(c) }()
	if a := d.do("DELETE", "/pty/"+id, nil); a.status != 200 {
		t.Errorf("delete = %d %s", a.status, a.body)
	}
	if ce := <-done; ce.Code != websocket.StatusNormalClosure || ce.Reason != "session deleted" {
		t.Errorf("the client of a deleted session got %v, want 1000 session deleted", ce)
	}
}

func TestPTYPipeModeAndSignals(t *testing.T) {
	t.Parallel()
	d := startExecd(t)
	var created map[string]string
	d.do("POST", "/pty", map[string]string{"command": "echo out; echo err >&2; sleep 30"}).json(t, &created)
	c, _, err := d.dialPTY(t, created["session_id"], "?pty=0")
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	seen := map[byte]string{}
	for seen[0x01] == "" || seen[0x02] == "" {
		typ, b, err := c.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if typ == websocket.MessageBinary {
			seen[b[0]] += string(b[1:])
		}
	}
	if seen[0x01] != "out\n" || seen[0x02] != "err\n" {
		t.Errorf("pipe mode channels = %q", seen)
	}
	_ = c.Write(ctx, websocket.MessageText, []byte(`{"type":"signal","signal":"SIGTERM"}`))
	_, ctrl := readUntil(t, c, "")
	if last := ctrl[len(ctrl)-1]; last["type"] != "exit" || last["exit_code"] != float64(143) {
		t.Errorf("after SIGTERM = %v", ctrl)
	}
}

func TestPTYPipeStdinEOF(t *testing.T) {
	t.Parallel()
	d := startExecd(t)
	var created map[string]string
	d.do("POST", "/pty", map[string]string{"command": "wc -c"}).json(t, &created)
	c, _, err := d.dialPTY(t, created["session_id"], "?pty=0")
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := c.Write(ctx, websocket.MessageBinary, append([]byte{0}, "hello"...)); err != nil {
		t.Fatal(err)
	}
	if err := c.Write(ctx, websocket.MessageText, []byte(`{"type":"stdin_eof"}`)); err != nil {
		t.Fatal(err)
	}
	out, ctrl := readUntil(t, c, "")
	if strings.TrimSpace(out) != "5" || ctrl[len(ctrl)-1]["exit_code"] != float64(0) {
		t.Errorf("wc -c after EOF = %q, %v", out, ctrl)
	}
}

func TestProxy(t *testing.T) {
	t.Parallel()
	d := startExecd(t)
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s %s?%s token=%q", r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Get(api.HeaderExecdToken))
	}))
	defer backend.Close()
	port := backend.Listener.Addr().String()[strings.LastIndex(backend.Listener.Addr().String(), ":")+1:]
	a := d.do("POST", "/proxy/"+port+"/a/b?x=1", "body")
	if a.status != 200 || string(a.body) != `POST /a/b?x=1 token=""` {
		t.Errorf("proxy = %d %q", a.status, a.body)
	}
	execdPort := d.url[strings.LastIndex(d.url, ":")+1:]
	if a := d.do("GET", "/proxy/"+execdPort+"/ping", nil); a.status != 200 {
		t.Errorf("proxy to execd itself = %d", a.status)
	}
	if a := d.do("GET", "/proxy/0/", nil); a.status != 400 {
		t.Errorf("port 0 = %d", a.status)
	}
	if a := d.do("GET", "/proxy/1/", nil); a.status != 502 {
		t.Errorf("closed port = %d %s", a.status, a.body)
	}
	if a := d.do("GET", "/proxy/"+port+"/", nil, api.HeaderExecdToken, ""); a.status != 401 {
		t.Errorf("proxy without the token = %d", a.status)
	}
}
