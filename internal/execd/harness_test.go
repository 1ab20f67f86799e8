// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package execd_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/internal/testutil"
	"github.com/corral-dev/corral/internal/testutil/contracttest"
	"github.com/corral-dev/corral/internal/testutil/corraltest"
	"github.com/corral-dev/corral/sse"
)

var (
	corralBin string
	contracts contracttest.Contracts
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "corral-execd-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	corralBin, err = corraltest.Build(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return testutil.NoLeaks(m.Run())
}

const token = "test-token-123"

// daemon is a real `corral execd` process.
type daemon struct {
	t        *testing.T
	url      string
	pid      int
	stateDir string
	contract *contracttest.Contract
	stopOnce sync.Once
	stopFn   func()
}

// stop ends execd (SIGINT), as the test's cleanup does.
func (d *daemon) stop(t *testing.T) { d.stopOnce.Do(d.stopFn) }

func startExecd(t *testing.T, extra ...string) *daemon {
	t.Helper()
	state := t.TempDir()
	args := append([]string{"execd", "--listen", "127.0.0.1:0", "--state-dir", state, "--ping-interval", "200ms",
		"--interrupt-grace", "300ms"}, extra...)
	cmd := exec.Command(corralBin, args...)
	cmd.Env = append(os.Environ(), "EXECD_ACCESS_TOKEN="+token)
	cmd.Dir = t.TempDir()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var logMu sync.Mutex
	var logs bytes.Buffer
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			logMu.Lock()
			logs.Write(sc.Bytes())
			logs.WriteByte('\n')
			logMu.Unlock()
			var l struct{ Msg, Listen string }
			if json.Unmarshal(sc.Bytes(), &l) == nil && l.Msg == "execd serving" {
				addr <- l.Listen
			}
		}
	}()
	stop := func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
			t.Errorf("execd did not stop on SIGINT")
		}
		if t.Failed() {
			logMu.Lock()
			t.Logf("execd log:\n%s", logs.String())
			logMu.Unlock()
		}
	}
	select {
	case a := <-addr:
		d := &daemon{t: t, url: "http://" + a, pid: cmd.Process.Pid, stateDir: state, contract: contracts.Get(t, contracttest.Execd), stopFn: stop}
		t.Cleanup(func() { d.stop(t) })
		return d
	case <-time.After(30 * time.Second):
		stop()
		t.Fatal("execd did not start")
	}
	return nil
}

type answer struct {
	status int
	header http.Header
	body   []byte
}

func (a answer) json(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(a.body, v); err != nil {
		t.Fatalf("decode %s: %v", a.body, err)
	}
}

func (a answer) code(t *testing.T) string {
	t.Helper()
	var e api.ErrorResponse
	a.json(t, &e)
	if e.Code == "" || e.Message == "" {
		t.Fatalf("error body %s lacks code or message", a.body)
	}
	return e.Code
}

// do sends a request with the access token (unless noAuth) and checks the
// answer against the execd contract.
func (d *daemon) do(method, path string, body any, hdr ...string) answer {
	d.t.Helper()
	req := d.request(method, path, body, hdr...)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		d.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	a := answer{status: res.StatusCode, header: res.Header, body: b}
	d.validate(method, path, a)
	return a
}

func (d *daemon) request(method, path string, body any, hdr ...string) *http.Request {
	d.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	case io.Reader:
		rd = b
	default:
		j, _ := json.Marshal(b)
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequestWithContext(d.t.Context(), method, d.url+path, rd)
	if err != nil {
		d.t.Fatal(err)
	}
	req.Header.Set(api.HeaderExecdToken, token)
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i+1] == "" {
			req.Header.Del(hdr[i])
			continue
		}
		req.Header.Set(hdr[i], hdr[i+1])
	}
	return req
}

// validate checks JSON answers against the contract. Error statuses the
// contract does not list for a route (401 everywhere, a 404 for a missing
// path where only 400/500 are listed) must still be ErrorResponse bodies.
func (d *daemon) validate(method, path string, a answer) {
	d.t.Helper()
	u, _ := url.Parse(path)
	if !d.contract.Covers(method, u.Path) || strings.HasPrefix(a.header.Get("Content-Type"), "text/event-stream") {
		return
	}
	err := d.contract.Check(method, u.Path, u.RawQuery, a.status, a.header, a.body)
	if err != nil && a.status >= 400 && (strings.Contains(err.Error(), "status code") || strings.Contains(err.Error(), "status is not supported")) {
		var e map[string]any
		if json.Unmarshal(a.body, &e) != nil || len(e) != 2 || e["code"] == "" || e["message"] == "" {
			d.t.Errorf("%s %s → %d: undocumented error status with a body that is not {code,message}: %s", method, path, a.status, a.body)
		}
		return
	}
	if err != nil {
		d.t.Errorf("%s %s → %d does not match the execd contract: %v\n%s", method, path, a.status, err, a.body)
	}
}

// events posts body to path and reads the whole event stream.
func (d *daemon) events(path string, body any, hdr ...string) []api.ServerStreamEvent {
	d.t.Helper()
	res, err := http.DefaultClient.Do(d.request("POST", path, body, hdr...))
	if err != nil {
		d.t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != "text/event-stream" {
		b, _ := io.ReadAll(res.Body)
		d.t.Fatalf("POST %s = %d %s %s", path, res.StatusCode, res.Header.Get("Content-Type"), b)
	}
	return readEvents(d.t, res.Body)
}

func readEvents(t *testing.T, r io.Reader) []api.ServerStreamEvent {
	t.Helper()
	var out []api.ServerStreamEvent
	rd := sse.NewReader(r)
	for {
		raw, err := rd.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("read stream: %v", err)
		}
		var ev api.ServerStreamEvent
		if err := json.Unmarshal(raw, &ev); err != nil {
			t.Fatalf("event %s: %v", raw, err)
		}
		if ev.Timestamp == 0 {
			t.Fatalf("event without timestamp: %s", raw)
		}
		out = append(out, ev)
	}
}

// output joins the text of a stream's events, one line each.
func output(evs []api.ServerStreamEvent, typ string) string {
	var b strings.Builder
	for _, ev := range evs {
		if ev.Type == typ {
			b.WriteString(ev.Text)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// withoutPings drops ping events.
func withoutPings(evs []api.ServerStreamEvent) []api.ServerStreamEvent {
	var out []api.ServerStreamEvent
	for _, ev := range evs {
		if ev.Type != api.EventPing {
			out = append(out, ev)
		}
	}
	return out
}
