// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package execd_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/internal/testutil"
)

// requirePythonKernel makes sure the host has Debian's ipykernel (which
// scripts/test.sh installs): these tests speak to real kernels. In CI
// (CORRAL_TEST_ROOT=1) a missing kernel fails them.
func requirePythonKernel(t *testing.T) {
	t.Helper()
	if _, err := os.Stat("/usr/share/jupyter/kernels/python3/kernel.json"); err != nil {
		if os.Getenv(testutil.EnvRoot) == "1" {
			t.Fatal("no Python kernelspec: install python3-ipykernel")
		}
		t.Skip("no Python kernelspec (install python3-ipykernel)")
	}
}

// codeRun is one /code stream, raw and parsed.
type codeRun struct {
	raw    []byte
	events []api.ServerStreamEvent
}

func (r codeRun) stdout() string { return r.text(api.EventStdout) }
func (r codeRun) stderr() string { return r.text(api.EventStderr) }

func (r codeRun) text(typ string) string {
	var b strings.Builder
	for _, ev := range r.events {
		if ev.Type == typ {
			b.WriteString(ev.Text)
		}
	}
	return b.String()
}

func (r codeRun) results() []map[string]any {
	var out []map[string]any
	for _, ev := range r.events {
		if ev.Type == api.EventResult {
			out = append(out, ev.Results)
		}
	}
	return out
}

// resultText is the text of the first result, "" if none.
func resultText(r codeRun) string {
	if res := r.results(); len(res) > 0 {
		s, _ := res[0]["text"].(string)
		return s
	}
	return ""
}

func (r codeRun) errorEvent() *api.ExecError {
	for _, ev := range r.events {
		if ev.Type == api.EventError {
			return ev.Error
		}
	}
	return nil
}

func (r codeRun) init() string {
	if len(r.events) == 0 {
		return ""
	}
	return r.events[0].Text
}

// runCode posts code and reads the stream, checking it as OpenSandbox's
// three SDKs read it.
func (d *daemon) runCode(ctx context.Context, body any) codeRun {
	d.t.Helper()
	req := d.request("POST", "/code", body, "Accept", "text/event-stream")
	res, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		d.t.Fatal(err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		d.t.Fatal(err)
	}
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != "text/event-stream" {
		d.t.Fatalf("POST /code = %d %s: %s", res.StatusCode, res.Header.Get("Content-Type"), raw)
	}
	evs := checkCodeStream(d.t, raw)
	return codeRun{raw: raw, events: evs}
}

func (d *daemon) code(ctx string, src string) codeRun {
	d.t.Helper()
	return d.runCode(d.t.Context(), map[string]any{"code": src, "context": map[string]string{"id": ctx, "language": "python"}})
}

func (d *daemon) newContext(lang string) string {
	d.t.Helper()
	a := d.do("POST", "/code/context", map[string]string{"language": lang})
	if a.status != 200 {
		d.t.Fatalf("create context: %d %s", a.status, a.body)
	}
	var c api.CodeContext
	a.json(d.t, &c)
	if c.ID == "" || c.Language != lang {
		d.t.Fatalf("context %s", a.body)
	}
	return c.ID
}

// checkCodeStream checks a /code stream against every rule of
// code-interpreter-facts.md §2, parsing it the way each SDK does:
//   - Go: bufio.Scanner lines of at most 4 MiB; results as map[string]string;
//   - Python: `timestamp` an int on every event, exactly one init, at most
//     one execution_complete;
//   - JavaScript: text/plain ?? text for a result's text.
//
// It also checks corral's own promises: init first and naming the
// context, no status events, nothing after the terminal event.
func checkCodeStream(t *testing.T, raw []byte) []api.ServerStreamEvent {
	t.Helper()
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	var evs []api.ServerStreamEvent
	for sc.Scan() {
		line := strings.TrimPrefix(sc.Text(), "data:")
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		if !strings.HasPrefix(line, "{") {
			t.Fatalf("a stream line that is not an event: %.200q", line)
		}
		var generic map[string]json.RawMessage
		if err := json.Unmarshal([]byte(line), &generic); err != nil {
			t.Fatalf("event line: %v: %.200s", err, line)
		}
		var ts int64
		if err := json.Unmarshal(generic["timestamp"], &ts); err != nil || ts <= 0 {
			t.Fatalf("event without an integer timestamp (Python drops it): %.200s", line)
		}
		if age := time.Since(time.UnixMilli(ts)); age < -time.Minute || age > 10*time.Minute {
			t.Fatalf("timestamp %d is not now", ts)
		}
		if r, ok := generic["results"]; ok {
			var asGo map[string]string
			if err := json.Unmarshal(r, &asGo); err != nil {
				t.Fatalf("results are not string-only (Go reads map[string]string): %v: %.300s", err, r)
			}
			if asGo["text"] != asGo["text/plain"] {
				t.Fatalf("results text %q and text/plain %q differ", asGo["text"], asGo["text/plain"])
			}
			if _, plain := asGo["text/plain"]; plain {
				if _, ok := asGo["text"]; !ok {
					t.Fatal("results without text (Python reads only text)")
				}
			}
		}
		var ev api.ServerStreamEvent
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev)
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("the stream does not scan as the Go SDK scans it: %v", err)
	}
	var inits, completes, terminals int
	for i, ev := range evs {
		switch ev.Type {
		case api.EventInit:
			inits++
			if i != 0 || ev.Text == "" {
				t.Fatalf("init at %d with text %q", i, ev.Text)
			}
		case api.EventStatus:
			t.Fatal("a status event (Go SDK users would see it as stdout)")
		case api.EventExecutionComplete:
			completes++
			terminals++
			if ev.ExecutionTime < 0 {
				t.Fatalf("execution_time %d", ev.ExecutionTime)
			}
		case api.EventError:
			terminals++
			if ev.Error == nil || ev.Error.EName == "" || ev.Error.Traceback == nil {
				t.Fatalf("error event without name or traceback: %+v", ev.Error)
			}
		case api.EventStdout, api.EventStderr:
			if ev.Text == "" {
				t.Fatal("an empty output event")
			}
		case api.EventResult, api.EventExecutionCount, api.EventPing:
		default:
			t.Fatalf("unknown event type %q", ev.Type)
		}
		if terminals > 0 && ev.Type != api.EventExecutionComplete && ev.Type != api.EventError {
			t.Fatalf("%s event after the terminal one", ev.Type)
		}
	}
	if inits != 1 || completes > 1 || terminals != 1 {
		t.Fatalf("stream has %d init, %d execution_complete, %d terminal events: %s", inits, completes, terminals, raw)
	}
	return evs
}

func TestCodeContextsKeepStateAndStayApart(t *testing.T) {
	requirePythonKernel(t)
	d := startExecd(t)
	a, b := d.newContext("python"), d.newContext("python")
	if r := d.code(a, "x = 42"); r.events[len(r.events)-1].Type != api.EventExecutionComplete || r.init() != a {
		t.Fatalf("x = 42: %s", r.raw)
	}
	r := d.code(a, "result = x\nresult")
	if res := r.results(); len(res) != 1 || res[0]["text"] != "42" || res[0]["text/plain"] != "42" {
		t.Fatalf("x in the same context: %s", r.raw)
	}
	var counted bool
	for i, ev := range r.events {
		if ev.Type == api.EventExecutionCount {
			counted = ev.ExecutionCount == 2 && r.events[i+1].Type == api.EventResult
		}
	}
	if !counted {
		t.Fatalf("no execution_count 2 right before the result: %s", r.raw)
	}
	if e := d.code(b, "x").errorEvent(); e == nil || e.EName != "NameError" || !strings.Contains(e.TracebackText, "NameError") || strings.Contains(e.TracebackText, "\x1b[") {
		t.Fatalf("x in another context: %+v", e)
	}

	// The default context of a language: used and listed, and deleted by
	// language with the others.
	r = d.runCode(t.Context(), map[string]any{"code": "result = 2 + 2\nresult", "context": map[string]string{"language": "python"}})
	if res := r.results(); len(res) != 1 || res[0]["text"] != "4" || res[0]["text/plain"] != "4" {
		t.Fatalf("2 + 2: %s", r.raw)
	}
	def := r.init()
	if r := d.runCode(t.Context(), map[string]any{"code": "result", "context": map[string]string{"language": "python"}}); r.init() != def || resultText(r) != "4" {
		t.Fatalf("the default context changed: %s", r.raw)
	}
	var list []api.CodeContext
	d.do("GET", "/code/contexts?language=", nil).json(t, &list)
	if len(list) != 3 {
		t.Fatalf("contexts: %+v", list)
	}
	d.do("GET", "/code/contexts", nil).json(t, &list)
	if len(list) != 3 || list[0].ID != a || list[2].ID != def || list[0].Status != api.CodeContextIdle || list[0].Kernel != "python3" {
		t.Fatalf("contexts: %+v", list)
	}
	var one api.CodeContext
	if d.do("GET", "/code/contexts/"+b, nil).json(t, &one); one.ID != b || one.Language != "python" {
		t.Fatalf("context %+v", one)
	}
	if a := d.do("DELETE", "/code/contexts/"+b, nil); a.status != 200 {
		t.Fatalf("delete: %d %s", a.status, a.body)
	}
	if a := d.do("GET", "/code/contexts/"+b, nil); a.status != 404 || a.code(t) != api.CodeExecdContextNotFound {
		t.Fatalf("get deleted: %d %s", a.status, a.body)
	}
	if a := d.do("DELETE", "/code/contexts?language=python", nil); a.status != 200 {
		t.Fatalf("delete by language: %d", a.status)
	}
	if d.do("GET", "/code/contexts?language=python", nil).json(t, &list); len(list) != 0 {
		t.Fatalf("contexts left: %+v", list)
	}
	if a := d.do("DELETE", "/code/contexts?language=python", nil); a.status != 200 {
		t.Fatalf("delete by language with none left: %d", a.status)
	}
	testutil.WaitFor(t, 10*time.Second, "the kernels to exit", func() bool { return len(kernelPids(d)) == 0 })
}

// kernelPids finds the kernels of an execd by their connection files.
func kernelPids(d *daemon) []int {
	var pids []int
	dirs, _ := os.ReadDir("/proc")
	for _, e := range dirs {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(b, []byte(d.stateDir)) && bytes.Contains(b, []byte("kernel-")) {
			st, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
			if !bytes.Contains(st, []byte(") Z ")) {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

func TestCodeResults(t *testing.T) {
	requirePythonKernel(t)
	d := startExecd(t)
	c := d.newContext("python")

	r := d.code(c, "print('out', flush=True)\nimport sys\nprint('err', file=sys.stderr, flush=True)\n{'a': [1, 2]}")
	if r.stdout() != "out\n" || r.stderr() != "err\n" || resultText(r) != "{'a': [1, 2]}" {
		t.Fatalf("streams and result: %s", r.raw)
	}
	r = d.code(c, "from IPython.display import display, HTML, JSON\ndisplay(HTML('<b>hi</b>'))\ndisplay(JSON({'k': 1}))")
	if res := r.results(); len(res) != 2 || res[0]["text/html"] != "<b>hi</b>" || res[1]["application/json"] != `{"k":1}` {
		t.Fatalf("display_data: %s", r.raw)
	}

	// A matplotlib figure comes as a PNG.
	r = d.code(c, "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])\nplt.show()")
	var png string
	for _, res := range r.results() {
		if s, ok := res["image/png"].(string); ok {
			png = s
		}
	}
	b, err := base64.StdEncoding.DecodeString(png)
	if err != nil || !bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")) {
		t.Fatalf("no PNG result (%v): %.500s", err, r.raw)
	}

	// An error: name, value, coloured traceback and a plain copy.
	e := d.code(c, "def f():\n    raise ValueError('bad value')\nf()").errorEvent()
	if e == nil || e.EName != "ValueError" || e.EValue != "bad value" || !strings.Contains(strings.Join(e.Traceback, "\n"), "\x1b[") ||
		!strings.Contains(e.TracebackText, "raise ValueError") || strings.Contains(e.TracebackText, "\x1b") {
		t.Fatalf("error event %+v", e)
	}
}

// Output of any size arrives whole, in events that each fit a Go SDK
// line; a result too large for an event goes to a file in the sandbox.
func TestCodeLargeOutput(t *testing.T) {
	requirePythonKernel(t)
	d := startExecd(t)
	c := d.newContext("python")
	r := d.code(c, "import sys\nsys.stdout.write('é' * 5_000_000)\nsys.stdout.flush()")
	if out := r.stdout(); out != strings.Repeat("é", 5_000_000) {
		t.Fatalf("10 MB of output: got %d bytes", len(out))
	}
	// In events of at most 32 KiB (docs/execd.md), each whole characters.
	for _, ev := range r.events {
		if ev.Type == api.EventStdout && (len(ev.Text) > 32<<10 || !utf8.ValidString(ev.Text)) {
			t.Fatalf("a stdout event of %d bytes (valid UTF-8: %v)", len(ev.Text), utf8.ValidString(ev.Text))
		}
	}
	r = d.code(c, "'y' * 10_000_000")
	res := r.results()
	if len(res) != 1 {
		t.Fatalf("results: %d", len(res))
	}
	var files []api.CodeFile
	if err := json.Unmarshal([]byte(res[0][api.CodeFilesKey].(string)), &files); err != nil || len(files) != 1 {
		t.Fatalf("files of a large result: %v %v", err, res[0])
	}
	if _, inline := res[0]["text/plain"]; inline || files[0].MIME != "text/plain" || files[0].Size != 10_000_002 {
		t.Fatalf("large result %+v", files)
	}
	b, err := os.ReadFile(files[0].Path)
	if err != nil || string(b) != "'"+strings.Repeat("y", 10_000_000)+"'" {
		t.Fatalf("result file: %v, %d bytes", err, len(b))
	}
	// Its files go with the context.
	d.do("DELETE", "/code/contexts/"+c, nil)
	if _, err := os.Stat(files[0].Path); !os.IsNotExist(err) {
		t.Fatalf("result file outlived its context: %v", err)
	}
}

func TestCodeInterruptAndDisconnect(t *testing.T) {
	requirePythonKernel(t)
	d := startExecd(t)
	c := d.newContext("python")
	done := make(chan codeRun, 1)
	go func() { done <- d.code(c, "print('spinning', flush=True)\nwhile True: pass") }()
	waitBusy(t, d, c)
	at := time.Now()
	if a := d.do("DELETE", "/code?id="+c, nil); a.status != 200 {
		t.Fatalf("interrupt: %d %s", a.status, a.body)
	}
	select {
	case r := <-done:
		if e := r.errorEvent(); e == nil || e.EName != "KeyboardInterrupt" {
			t.Fatalf("after interrupt: %s", r.raw)
		}
		t.Logf("interrupt answered in %v", time.Since(at))
	case <-time.After(30 * time.Second):
		t.Fatal("the interrupt did not end the execution")
	}
	if r := d.code(c, "1 + 1"); resultText(r) != "2" {
		t.Fatalf("context after interrupt: %s", r.raw)
	}
	if a := d.do("DELETE", "/code?id=fake-id", nil); a.status != 404 {
		t.Fatalf("interrupt of an unknown id: %d", a.status)
	}

	// A client that goes away interrupts its execution: the next one runs.
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		defer func() { _ = recover() }()
		req := d.request("POST", "/code", map[string]any{"code": "while True: pass", "context": map[string]string{"id": c}})
		res, err := http.DefaultClient.Do(req.WithContext(ctx))
		if err == nil {
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
		}
	}()
	waitBusy(t, d, c)
	cancel()
	if r := d.code(c, "'after'"); resultText(r) != "'after'" {
		t.Fatalf("context after a client left: %s", r.raw)
	}
}

// A client that leaves as soon as it has its error (as the CLI and the
// SDKs do) must not interrupt the kernel while it finishes the request:
// ipykernel, interrupted then, stops taking requests.
func TestCodeClientsLeavingAtTheErrorDoNotWedgeTheKernel(t *testing.T) {
	requirePythonKernel(t)
	d := startExecd(t)
	c := d.newContext("python")
	for i := range 30 {
		ctx, cancel := context.WithCancel(t.Context())
		req := d.request("POST", "/code", map[string]any{"code": "1/0", "context": map[string]string{"id": c}})
		res, err := http.DefaultClient.Do(req.WithContext(ctx))
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(res.Body)
		for sc.Scan() && !strings.Contains(sc.Text(), `"type":"error"`) {
		}
		cancel()
		res.Body.Close()
		rctx, rcancel := context.WithTimeout(t.Context(), 60*time.Second)
		r := d.runCode(rctx, map[string]any{"code": fmt.Sprintf("%d + 1", i), "context": map[string]string{"id": c}})
		rcancel()
		if resultText(r) != strconv.Itoa(i+1) {
			t.Fatalf("round %d: %s", i, r.raw)
		}
	}
}

// Code that ignores interrupts cannot hold its context: the kernel is
// stopped once the interrupt timeout passes.
func TestCodeThatIgnoresInterrupts(t *testing.T) {
	requirePythonKernel(t)
	d := startExecd(t, "--code-interrupt-timeout", "1s")
	c := d.newContext("python")
	done := make(chan codeRun, 1)
	ready := filepath.Join(t.TempDir(), "ready")
	go func() {
		done <- d.code(c, fmt.Sprintf("import signal, time\nsignal.signal(signal.SIGINT, lambda *a: print('ignored', flush=True))\nopen(%q, 'w').close()\nwhile True: time.sleep(0.05)", ready))
	}()
	testutil.WaitFor(t, 30*time.Second, "the code to ignore SIGINT", func() bool { _, err := os.Stat(ready); return err == nil })
	if a := d.do("DELETE", "/code?id="+c, nil); a.status != 200 {
		t.Fatalf("interrupt: %d", a.status)
	}
	select {
	case r := <-done:
		if e := r.errorEvent(); e == nil || e.EName != "KernelUnresponsive" || !strings.Contains(r.stdout(), "ignored") {
			t.Fatalf("stubborn code: %s", r.raw)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the stubborn execution was never ended")
	}
	var info api.CodeContext
	if d.do("GET", "/code/contexts/"+c, nil).json(t, &info); info.Status != api.CodeContextDead {
		t.Fatalf("context after a stopped kernel: %+v", info)
	}
	// An interrupt of an idle context is a no-op.
	c2 := d.newContext("python")
	if a := d.do("DELETE", "/code?id="+c2, nil); a.status != 200 {
		t.Fatalf("interrupt of an idle context: %d", a.status)
	}
	if r := d.code(c2, "'fine'"); resultText(r) != "'fine'" {
		t.Fatalf("after an idle interrupt: %s", r.raw)
	}
}

func waitBusy(t *testing.T, d *daemon, id string) {
	t.Helper()
	testutil.WaitFor(t, 30*time.Second, "context "+id+" to be busy", func() bool {
		var c api.CodeContext
		d.do("GET", "/code/contexts/"+id, nil).json(t, &c)
		return c.Status == api.CodeContextBusy
	})
}

// Executions in one context wait their turn (the queue is bounded);
// contexts run in parallel.
func TestCodeQueueAndParallelContexts(t *testing.T) {
	requirePythonKernel(t)
	d := startExecd(t, "--code-queue-limit", "1")
	a, b := d.newContext("python"), d.newContext("python")
	flag := filepath.Join(t.TempDir(), "go")
	var wg sync.WaitGroup
	var first, second codeRun
	wg.Go(func() {
		first = d.code(a, fmt.Sprintf("import os, time\nprint('waiting', flush=True)\nwhile not os.path.exists(%q): time.sleep(0.01)\nprint('first done')", flag))
	})
	waitBusy(t, d, a)
	wg.Go(func() { second = d.code(a, "print('second')") })
	testutil.WaitFor(t, 30*time.Second, "the second execution to queue", func() bool {
		var info api.CodeContext
		d.do("GET", "/code/contexts/"+a, nil).json(t, &info)
		return info.Queued == 1
	})
	if r := d.do("POST", "/code", map[string]any{"code": "1", "context": map[string]string{"id": a}}); r.status != 429 || r.code(t) != api.CodeExecdContextBusy {
		t.Fatalf("past the queue limit: %d %s", r.status, r.body)
	}
	// Another context runs meanwhile: it releases the first.
	if r := d.code(b, fmt.Sprintf("open(%q, 'w').close()\n'released'", flag)); resultText(r) != "'released'" {
		t.Fatalf("parallel context: %s", r.raw)
	}
	wg.Wait()
	if first.stdout() != "waiting\nfirst done\n" || second.stdout() != "second\n" {
		t.Fatalf("first %s\nsecond %s", first.raw, second.raw)
	}
	end := first.events[len(first.events)-1].Timestamp
	for _, ev := range second.events {
		if ev.Type == api.EventStdout && ev.Timestamp < end {
			t.Fatalf("the second execution printed before the first ended")
		}
	}
}

func TestCodeKernelDeath(t *testing.T) {
	requirePythonKernel(t)
	d := startExecd(t)
	c := d.newContext("python")
	// The code dies once the test has seen its output (what a kernel
	// prints just before a hard exit may never leave it).
	flag := filepath.Join(t.TempDir(), "die")
	req := d.request("POST", "/code", map[string]any{"code": fmt.Sprintf("import os, time\nprint('bye', flush=True)\nwhile not os.path.exists(%q): time.sleep(0.01)\nos._exit(1)", flag), "context": map[string]string{"id": c}})
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var raw bytes.Buffer
	sc := bufio.NewScanner(io.TeeReader(res.Body, &raw))
	for sc.Scan() {
		if strings.Contains(sc.Text(), `"bye`) {
			if err := os.WriteFile(flag, nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	res.Body.Close()
	r := codeRun{raw: raw.Bytes(), events: checkCodeStream(t, raw.Bytes())}
	if e := r.errorEvent(); e == nil || e.EName != "KernelDied" || r.stdout() != "bye\n" {
		t.Fatalf("kernel death: %s", r.raw)
	}
	var info api.CodeContext
	if d.do("GET", "/code/contexts/"+c, nil).json(t, &info); info.Status != api.CodeContextDead {
		t.Fatalf("dead context shows %+v", info)
	}
	if a := d.do("POST", "/code", map[string]any{"code": "1", "context": map[string]string{"id": c}}); a.status != 409 || a.code(t) != api.CodeExecdContextDead {
		t.Fatalf("run on a dead context: %d %s", a.status, a.body)
	}
	if a := d.do("POST", "/code/contexts/"+c+"/restart", nil); a.status != 200 {
		t.Fatalf("restart: %d %s", a.status, a.body)
	}
	if r := d.code(c, "'back'"); resultText(r) != "'back'" {
		t.Fatalf("after restart: %s", r.raw)
	}

	// A dead default context is replaced on the next call.
	def := d.runCode(t.Context(), map[string]any{"code": "import os\nos._exit(2)", "context": map[string]string{"language": "python"}})
	r = d.runCode(t.Context(), map[string]any{"code": "'new'", "context": map[string]string{"language": "python"}})
	if r.init() == def.init() || resultText(r) != "'new'" {
		t.Fatalf("default after death: %s then %s", def.raw, r.raw)
	}
}

func TestCodeBadInput(t *testing.T) {
	requirePythonKernel(t)
	d := startExecd(t, "--code-max-contexts", "2")
	d.newContext("python")
	d.newContext("python")
	if a := d.do("POST", "/code/context", map[string]string{"language": "python"}); a.status != 429 || a.code(t) != api.CodeExecdContextBusy {
		t.Errorf("a context past the limit: %d %s", a.status, a.body)
	}
	d.do("DELETE", "/code/contexts?language=python", nil)
	for _, tc := range []struct {
		name, method, path string
		body               any
		status             int
		code, contains     string
	}{
		{"unknown language", "POST", "/code/context", map[string]string{"language": "cobol"}, 400, api.CodeExecdNotSupported, "python"},
		{"unknown language in /code", "POST", "/code", map[string]any{"code": "1", "context": map[string]string{"language": "cobol"}}, 400, api.CodeExecdNotSupported, "python"},
		{"no language", "POST", "/code/context", map[string]string{}, 400, api.CodeExecdInvalidRequestBody, "language"},
		{"unknown context", "POST", "/code", map[string]any{"code": "1", "context": map[string]string{"id": "nope", "language": "python"}}, 404, api.CodeExecdContextNotFound, "nope"},
		{"code too large", "POST", "/code", map[string]any{"code": strings.Repeat("#", 5<<20), "context": map[string]string{"language": "python"}}, 400, api.CodeExecdInvalidRequestBody, "bytes"},
		{"malformed body", "POST", "/code", "{not json", 400, api.CodeExecdInvalidRequestBody, ""},
		{"malformed context body", "POST", "/code/context", `{"language": 3}`, 400, api.CodeExecdInvalidRequestBody, ""},
		{"delete unknown", "DELETE", "/code/contexts/nope", nil, 404, api.CodeExecdContextNotFound, ""},
		{"restart unknown", "POST", "/code/contexts/nope/restart", nil, 404, api.CodeExecdContextNotFound, ""},
		{"delete without language", "DELETE", "/code/contexts", nil, 400, api.CodeExecdMissingQuery, ""},
	} {
		a := d.do(tc.method, tc.path, tc.body)
		if a.status != tc.status || a.code(t) != tc.code || !strings.Contains(string(a.body), tc.contains) {
			t.Errorf("%s: %d %s", tc.name, a.status, a.body)
		}
	}
}

// Contexts unused past --code-idle-timeout are shut down; a context
// running code is not.
func TestCodeIdleContextsAreShutDown(t *testing.T) {
	requirePythonKernel(t)
	d := startExecd(t, "--code-idle-timeout", "2s")
	busy, idle := d.newContext("python"), d.newContext("python")
	r := d.code(busy, "import time\ntime.sleep(4)\n'slept'")
	if resultText(r) != "'slept'" {
		t.Fatalf("a run longer than the idle timeout: %s", r.raw)
	}
	if a := d.do("GET", "/code/contexts/"+busy, nil); a.status != 200 {
		t.Fatalf("a context was shut down while it ran code: %d", a.status)
	}
	testutil.WaitFor(t, 30*time.Second, "the idle contexts to go", func() bool {
		return d.do("GET", "/code/contexts/"+idle, nil).status == 404 && d.do("GET", "/code/contexts/"+busy, nil).status == 404
	})
	testutil.WaitFor(t, 10*time.Second, "their kernels to exit", func() bool { return len(kernelPids(d)) == 0 })
}

// Kernelspecs an image installs at start (as OpenSandbox's
// code-interpreter entrypoint does) are waited for, for a bounded time.
func TestCodeWaitsForKernelspecsInstalledAtStart(t *testing.T) {
	requirePythonKernel(t)
	dir := t.TempDir()
	t.Setenv("JUPYTER_PATH", dir)
	d := startExecd(t, "--code-spec-wait", "20s")
	created := make(chan answer, 1)
	go func() { created <- d.do("POST", "/code/context", map[string]string{"language": "r"}) }()
	time.Sleep(500 * time.Millisecond) // the create is waiting: no spec for r exists yet
	select {
	case a := <-created:
		t.Fatalf("the create did not wait for the kernelspec: %d %s", a.status, a.body)
	default:
	}
	// "Install" an R kernelspec (it runs ipykernel: what matters is that
	// it is found).
	spec := filepath.Join(dir, "kernels", "ir")
	if err := os.MkdirAll(spec, 0o755); err != nil {
		t.Fatal(err)
	}
	body := `{"argv": ["/usr/bin/python3", "-m", "ipykernel_launcher", "-f", "{connection_file}"], "language": "R", "display_name": "R"}`
	if err := os.WriteFile(filepath.Join(spec, "kernel.json"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	a := <-created
	var c api.CodeContext
	if a.status != 200 {
		t.Fatalf("create after the spec appeared: %d %s", a.status, a.body)
	}
	if a.json(t, &c); c.Kernel != "ir" || c.Language != "r" {
		t.Fatalf("context %+v", c)
	}
	// Past the wait, a missing language is refused at once.
	d2 := startExecd(t, "--code-spec-wait", "1ms")
	if a := d2.do("POST", "/code/context", map[string]string{"language": "java"}); a.status != 400 || !strings.Contains(string(a.body), "python") {
		t.Fatalf("a missing language after the wait: %d %s", a.status, a.body)
	}
}

// Stopping execd ends every kernel it started.
func TestCodeKernelsEndWithExecd(t *testing.T) {
	requirePythonKernel(t)
	d := startExecd(t)
	c := d.newContext("python")
	d.code(c, "import subprocess\np = subprocess.Popen(['sleep', '1000'])")
	if n := len(kernelPids(d)); n != 1 {
		t.Fatalf("%d kernels", n)
	}
	d.stop(t)
	testutil.WaitFor(t, 15*time.Second, "the kernel to exit with execd", func() bool { return len(kernelPids(d)) == 0 })
}
