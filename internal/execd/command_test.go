// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package execd_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/internal/execd"
	"github.com/corral-dev/corral/internal/testutil"
	"github.com/corral-dev/corral/sse"
)

func TestPingAndAuth(t *testing.T) {
	t.Parallel()
	d := startExecd(t)
	if a := d.do("GET", "/ping", nil, api.HeaderExecdToken, ""); a.status != 200 {
		t.Errorf("ping without token = %d", a.status)
	}
	for _, tok := range []string{"", "wrong", token + "x"} {
		a := d.do("GET", "/metrics", nil, api.HeaderExecdToken, tok)
		if tok == "" {
			a = d.do("GET", "/metrics", nil, api.HeaderExecdToken, "")
		}
		if a.status != 401 || a.code(t) != api.CodeExecdUnauthorized {
			t.Errorf("token %q = %d %s", tok, a.status, a.body)
		}
	}
	if a := d.do("GET", "/metrics", nil); a.status != 200 {
		t.Errorf("right token = %d", a.status)
	}
}

var hexID = regexp.MustCompile(`^[0-9a-f]{32}$`)

func TestCommandStream(t *testing.T) {
	t.Parallel()
	d := startExecd(t)
	evs := withoutPings(d.events("/command", map[string]any{"command": "echo hello; echo err >&2; printf partial; exit 3"}))
	types := []string{}
	for _, ev := range evs {
		types = append(types, ev.Type)
	}
	if types[0] != api.EventInit || !hexID.MatchString(evs[0].Text) {
		t.Fatalf("first event = %+v, want init with a 32-hex id", evs[0])
	}
	last := evs[len(evs)-1]
	if last.Type != api.EventError || last.Error == nil || last.Error.EName != api.ErrCommandExec || last.Error.EValue != "3" {
		t.Fatalf("terminal event = %+v, want error CommandExecError 3", last)
	}
	for _, ev := range evs[:len(evs)-1] {
		if ev.Type == api.EventExecutionComplete || ev.Type == api.EventError {
			t.Errorf("terminal event before the end: %+v", ev)
		}
	}
	if got := output(evs, api.EventStdout); got != "hello\npartial\n" {
		t.Errorf("stdout = %q", got)
	}
	if got := output(evs, api.EventStderr); got != "err\n" {
		t.Errorf("stderr = %q", got)
	}
	ok := withoutPings(d.events("/command", map[string]any{"command": "true"}))
	if len(ok) != 2 || ok[1].Type != api.EventExecutionComplete || ok[1].ExecutionTime < 1 {
		t.Errorf("true = %+v, want init, execution_complete with execution_time", ok)
	}
}

func TestCommandLineSplitting(t *testing.T) {
	t.Parallel()
	d := startExecd(t)
	evs := d.events("/command", map[string]any{"command": `printf 'a\r\nb\rc\n\nd'`})
	if got := output(evs, api.EventStdout); got != "a\nb\nc\n\n\nd\n" {
		t.Errorf("stdout events = %q, want a b c <blank> d", got)
	}
}

func TestCommandRawOutput(t *testing.T) {
	t.Parallel()
	d := startExecd(t)
	// A two-byte character written in two halves must arrive whole.
	script := `printf 'a\r\nb\rc\n\nd'; printf 'x\303'; sleep 0.3; printf '\251y'; printf 'e1\ne2' >&2`
	evs := d.events("/command", map[string]any{"command": script}, execd.HeaderOutput, "raw", execd.HeaderEventCursors, "1")
	var raw, rawErr strings.Builder
	var last int64
	for _, ev := range evs {
		if ev.Type == api.EventStderr {
			rawErr.WriteString(ev.Text)
		}
		if ev.Type != api.EventStdout {
			continue
		}
		raw.WriteString(ev.Text)
		if ev.Cursor == nil || *ev.Cursor <= last {
			t.Fatalf("event %+v: cursor not increasing past %d", ev, last)
		}
		last = *ev.Cursor
	}
	if got, want := raw.String(), "a\r\nb\rc\n\ndx\u00e9y"; got != want {
		t.Errorf("raw stdout = %q, want %q", got, want)
	}
	if got := rawErr.String(); got != "e1\ne2" {
		t.Errorf("raw stderr = %q", got)
	}
}

// TestCommandRawBinaryOutputFitsEvents: megabytes of output that JSON
// writes six bytes a byte (NULs) arrive whole, in events a reader accepts
// (a pipe read of a megabyte was one event of six, refused as too large).
func TestCommandRawBinaryOutputFitsEvents(t *testing.T) {
	t.Parallel()
	d := startExecd(t)
	const n = 5000000
	evs := d.events("/command", map[string]any{"command": "head -c 5000000 /dev/zero; printf '\\303\\251'"}, execd.HeaderOutput, "raw", execd.HeaderEventCursors, "1")
	var raw strings.Builder
	var last int64
	for _, ev := range evs {
		if ev.Type != api.EventStdout {
			continue
		}
		raw.WriteString(ev.Text)
		if ev.Cursor == nil || *ev.Cursor <= last || *ev.Cursor != int64(raw.Len()) {
			t.Fatalf("cursor %v after %d bytes (last %d)", ev.Cursor, raw.Len(), last)
		}
		last = *ev.Cursor
	}
	if got := raw.String(); len(got) != n+2 || strings.Count(got, "\x00") != n || !strings.HasSuffix(got, "\u00e9") {
		t.Fatalf("stdout: %d bytes, %d NULs, ends %q", len(got), strings.Count(got, "\x00"), got[max(0, len(got)-4):])
	}
}

func TestCommandValidation(t *testing.T) {
	t.Parallel()
	d := startExecd(t)
	for _, tc := range []struct {
		name string
		body any
	}{
		{"not json", "{"},
		{"empty", ""},
		{"no command", map[string]any{"cwd": "/"}},
		{"missing cwd", map[string]any{"command": "true", "cwd": "/no/such/dir"}},
		{"cwd is a file", map[string]any{"command": "true", "cwd": "/etc/hostname"}},
		{"zero timeout", map[string]any{"command": "true", "timeout": 0}},
		{"gid without uid", map[string]any{"command": "true", "gid": 1}},
		{"negative uid", map[string]any{"command": "true", "uid": -1}},
		{"bad env", map[string]any{"command": "true", "envs": map[string]string{"A=B": "x"}}},
		{"wrong type", map[string]any{"command": 3}},
	} {
		a := d.do("POST", "/command", tc.body)
		if a.status != 400 || a.code(t) != api.CodeExecdInvalidRequestBody {
			t.Errorf("%s: %d %s", tc.name, a.status, a.body)
		}
	}
}

func TestCommandEnvCwdTimeout(t *testing.T) {
	t.Parallel()
	d := startExecd(t)
	dir := t.TempDir()
	envFile := filepath.Join(dir, "envs")
	_ = os.WriteFile(envFile, []byte("# comment\nFROM_FILE=yes\nexport ALSO=1\n"), 0o600)
	d2 := startExecd(t, "--env-file", envFile)
	evs := d2.events("/command", map[string]any{"command": `echo "$A $FROM_FILE $ALSO ${EXECD_ACCESS_TOKEN:-no-token}"; pwd`, "cwd": dir,
		"envs": map[string]string{"A": "from-request"}})
	if got := output(evs, api.EventStdout); got != "from-request yes 1 no-token\n"+dir+"\n" {
		t.Errorf("env and cwd = %q", got)
	}
	start := time.Now()
	evs = d.events("/command", map[string]any{"command": "sleep 30", "timeout": 300})
	last := evs[len(evs)-1]
	if last.Type != api.EventError || last.Error.EValue != "137" || !strings.Contains(last.Error.Traceback[0], "timed out") {
		t.Errorf("timeout terminal event = %+v", last)
	}
	if time.Since(start) > 20*time.Second {
		t.Errorf("the timeout did not stop the command")
	}
}

func TestCommandUser(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	d := startExecd(t)
	evs := d.events("/command", map[string]any{"command": "id -u; id -g; id -G", "uid": 65534, "cwd": "/"})
	lines := strings.Split(strings.TrimSpace(output(evs, api.EventStdout)), "\n")
	if len(lines) != 3 || lines[0] != "65534" {
		t.Fatalf("uid 65534 ran as %q", lines)
	}
	evs = d.events("/command", map[string]any{"command": "id -u; id -g", "uid": 1234, "gid": 4321, "cwd": "/"})
	if got := output(evs, api.EventStdout); got != "1234\n4321\n" {
		t.Fatalf("uid 1234 gid 4321 = %q", got)
	}
}

func TestBackgroundCommandAndLogs(t *testing.T) {
	t.Parallel()
	d := startExecd(t)
	evs := d.events("/command", map[string]any{"command": "echo one; sleep 0.3; echo two >&2; exit 4", "background": true})
	if len(evs) != 2 || evs[0].Type != api.EventInit || evs[1].Type != api.EventExecutionComplete {
		t.Fatalf("background stream = %+v", evs)
	}
	id := evs[0].Text
	var st api.CommandStatusResponse
	d.do("GET", "/command/status/"+id, nil).json(t, &st)
	if !st.Running || st.ExitCode != nil || st.FinishedAt != nil || st.Content == "" {
		t.Errorf("status while running = %+v", st)
	}
	var a answer
	testutil.WaitFor(t, 10*time.Second, "the first line in the logs", func() bool {
		a = d.do("GET", "/command/"+id+"/logs", nil)
		return len(a.body) > 0
	})
	cursor, _ := strconv.ParseInt(a.header.Get(api.HeaderCommandsTailCursor), 10, 64)
	if a.status != 200 || string(a.body) != "one\n" || cursor != 4 {
		t.Fatalf("logs = %d %q cursor %d", a.status, a.body, cursor)
	}
	testutil.WaitFor(t, 10*time.Second, "the command to finish", func() bool {
		d.do("GET", "/command/status/"+id, nil).json(t, &st)
		return !st.Running
	})
	if st.ExitCode == nil || *st.ExitCode != 4 || st.FinishedAt == nil || st.Error != "exit status 4" {
		t.Errorf("final status = %+v", st)
	}
	a = d.do("GET", "/command/"+id+"/logs?cursor="+strconv.FormatInt(cursor, 10), nil)
	if string(a.body) != "two\n" || a.header.Get(api.HeaderCommandsTailCursor) != "8" {
		t.Errorf("logs from cursor = %q next %s", a.body, a.header.Get(api.HeaderCommandsTailCursor))
	}
	if a := d.do("GET", "/command/"+id+"/logs?cursor=-1", nil); a.status != 400 {
		t.Errorf("negative cursor = %d", a.status)
	}
	// limit bounds one read; the cursor says where the next starts.
	a = d.do("GET", "/command/"+id+"/logs?cursor=1&limit=4", nil)
	if string(a.body) != "ne\nt" || a.header.Get(api.HeaderCommandsTailCursor) != "5" {
		t.Errorf("logs with a limit = %q next %s", a.body, a.header.Get(api.HeaderCommandsTailCursor))
	}
	for _, q := range []string{"limit=0", "limit=x", "limit=67108865"} {
		if a := d.do("GET", "/command/"+id+"/logs?"+q, nil); a.status != 400 {
			t.Errorf("?%s = %d", q, a.status)
		}
	}
	for _, p := range []string{"/command/status/nope", "/command/nope/logs"} {
		if a := d.do("GET", p, nil); a.status != 404 || a.code(t) != api.CodeExecdCommandNotFound {
			t.Errorf("%s = %d %s", p, a.status, a.body)
		}
	}
}

func TestInterrupt(t *testing.T) {
	t.Parallel()
	d := startExecd(t)
	id := d.events("/command", map[string]any{"command": "sleep 30", "background": true})[0].Text
	if a := d.do("DELETE", "/command?id="+id, nil); a.status != 200 {
		t.Fatalf("interrupt = %d %s", a.status, a.body)
	}
	var st api.CommandStatusResponse
	d.do("GET", "/command/status/"+id, nil).json(t, &st)
	if st.Running || st.ExitCode == nil || *st.ExitCode != 143 {
		t.Errorf("after SIGTERM status = %+v, want exit 143", st)
	}
	// A command that ignores SIGTERM is killed after the grace period.
	id = d.events("/command", map[string]any{"command": "trap '' TERM; sleep 30 & wait", "background": true})[0].Text
	time.Sleep(100 * time.Millisecond)
	if a := d.do("DELETE", "/command?id="+id, nil); a.status != 200 {
		t.Fatalf("interrupt = %d %s", a.status, a.body)
	}
	d.do("GET", "/command/status/"+id, nil).json(t, &st)
	if st.Running || *st.ExitCode != 137 {
		t.Errorf("after the grace status = %+v, want exit 137", st)
	}
	if a := d.do("DELETE", "/command?id="+id, nil); a.status != 200 {
		t.Errorf("interrupting a finished command = %d", a.status)
	}
	if a := d.do("DELETE", "/command?id=nope", nil); a.status != 400 {
		t.Errorf("unknown id = %d", a.status)
	}
	if a := d.do("DELETE", "/command", nil); a.status != 400 || a.code(t) != api.CodeExecdMissingQuery {
		t.Errorf("no id = %d %s", a.status, a.body)
	}
}

func TestPingsWhileIdle(t *testing.T) {
	t.Parallel()
	d := startExecd(t)
	evs := d.events("/command", map[string]any{"command": "sleep 0.7; echo done"})
	pings := 0
	for _, ev := range evs {
		if ev.Type == api.EventPing {
			pings++
		}
	}
	if pings < 2 || evs[len(evs)-1].Type != api.EventExecutionComplete {
		t.Errorf("%d pings over 0.7s at a 200ms interval; events %+v", pings, evs)
	}
}

// TestBinaryOutputIsRetainedExactly: the logs endpoint returns the exact
// bytes a command wrote, whatever they are.
func TestBinaryOutputIsRetainedExactly(t *testing.T) {
	t.Parallel()
	d := startExecd(t)
	data := make([]byte, 300000)
	_, _ = rand.Read(data)
	f := filepath.Join(t.TempDir(), "blob")
	if err := os.WriteFile(f, data, 0o644); err != nil {
		t.Fatal(err)
	}
	evs := d.events("/command", map[string]any{"command": "cat " + f})
	if evs[len(evs)-1].Type != api.EventExecutionComplete {
		t.Fatalf("cat of binary data = %+v", evs[len(evs)-1])
	}
	a := d.do("GET", "/command/"+evs[0].Text+"/logs", nil)
	if string(a.body) != string(data) {
		t.Fatalf("logs returned %d bytes that differ from the %d written", len(a.body), len(data))
	}
}

// TestDurableStreamResume: a client that loses its stream mid-command
// resumes from its last cursors and gets exactly the rest.
func TestDurableStreamResume(t *testing.T) {
	t.Parallel()
	d := startExecd(t)
	script := `for i in $(seq 1 40); do echo "out $i"; echo "err $i" >&2; sleep 0.02; done`
	want := withoutPings(d.events("/command", map[string]any{"command": script}))

	ctx, cancel := context.WithCancel(t.Context())
	req := d.request("POST", "/command", map[string]any{"command": script}, "Corral-Event-Cursors", "1").WithContext(ctx)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	rd := sse.NewReader(res.Body)
	var got []api.ServerStreamEvent
	var cur = map[string]int64{}
	for len(got) < 15 {
		raw, err := rd.Next()
		if err != nil {
			t.Fatal(err)
		}
		var ev api.ServerStreamEvent
		_ = json.Unmarshal(raw, &ev)
		if ev.Type == api.EventPing {
			continue
		}
		if ev.Type == api.EventStdout || ev.Type == api.EventStderr {
			if ev.Cursor == nil {
				t.Fatalf("no cursor on %s", raw)
			}
			cur[ev.Type] = *ev.Cursor
		}
		ev.Cursor = nil
		got = append(got, ev)
	}
	cancel() // the connection drops mid-command
	res.Body.Close()
	id := got[0].Text
	time.Sleep(150 * time.Millisecond)
	q := "?stdout=" + strconv.FormatInt(cur["stdout"], 10) + "&stderr=" + strconv.FormatInt(cur["stderr"], 10)
	res2, err := http.DefaultClient.Do(d.request("GET", "/command/"+id+"/stream"+q, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer res2.Body.Close()
	rest := withoutPings(readEvents(t, res2.Body))
	got = append(got, rest[1:]...) // the resumed stream starts with init again
	if output(got, api.EventStdout) != output(want, api.EventStdout) || output(got, api.EventStderr) != output(want, api.EventStderr) {
		t.Fatalf("after resume:\nstdout %q\nwant   %q\nstderr %q\nwant   %q", output(got, api.EventStdout), output(want, api.EventStdout),
			output(got, api.EventStderr), output(want, api.EventStderr))
	}
	if got[len(got)-1].Type != api.EventExecutionComplete {
		t.Errorf("resumed stream ends with %+v", got[len(got)-1])
	}
	if a := d.do("GET", "/command/"+id+"/stream?stdout=x", nil); a.status != 400 {
		t.Errorf("bad cursor = %d", a.status)
	}
}

// TestLargeOutputKeepsMemoryBounded: a command printing 256 MiB does not
// grow execd's memory, read live or not read at all.
func TestLargeOutputKeepsMemoryBounded(t *testing.T) {
	t.Parallel()
	d := startExecd(t)
	evs := d.events("/command", map[string]any{"command": "head -c 268435456 /dev/zero | tr '\\0' 'x' | fold -w 1000"})
	if evs[len(evs)-1].Type != api.EventExecutionComplete {
		t.Fatalf("last event = %+v", evs[len(evs)-1])
	}
	n := 0
	for _, ev := range evs {
		if ev.Type == api.EventStdout {
			n += len(ev.Text)
		}
	}
	if n != 268435456 {
		t.Errorf("streamed %d bytes of output, want 268435456", n)
	}
	if hwm := peakRSS(t, d.pid); hwm > 96<<20 {
		t.Errorf("execd's peak RSS reached %d MiB while streaming 256 MiB", hwm>>20)
	}
}

func peakRSS(t *testing.T, pid int) int64 {
	t.Helper()
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	t.Fatal("no VmHWM")
	return 0
}

func TestSessions(t *testing.T) {
	t.Parallel()
	d := startExecd(t)
	var s api.CreateSessionResponse
	d.do("POST", "/session", nil).json(t, &s)
	if s.SessionID == "" {
		t.Fatal("no session id")
	}
	dir := t.TempDir()
	evs := d.events("/session/"+s.SessionID+"/run", map[string]any{"command": "export GREETING=hi; cd " + dir + "; UNEXPORTED=x"})
	if evs[0].Type != api.EventInit || evs[0].Text != s.SessionID || evs[len(evs)-1].Type != api.EventExecutionComplete {
		t.Fatalf("first run = %+v", evs)
	}
	evs = d.events("/session/"+s.SessionID+"/run", map[string]any{"command": `echo "$GREETING $PWD ${UNEXPORTED:-unset}"`})
	if got := output(evs, api.EventStdout); got != "hi "+dir+" unset\n" {
		t.Errorf("second run = %q", got)
	}
	evs = d.events("/session/"+s.SessionID+"/run", map[string]any{"command": "false"})
	if last := evs[len(evs)-1]; last.Type != api.EventError || last.Error.EValue != "1" {
		t.Errorf("failing run = %+v", last)
	}
	evs = d.events("/session/"+s.SessionID+"/run", map[string]any{"command": "sleep 30", "timeout": 200})
	if last := evs[len(evs)-1]; last.Type != api.EventError || last.Error.EValue != "137" {
		t.Errorf("timed-out run = %+v", last)
	}
	// The session survives a killed run.
	evs = d.events("/session/"+s.SessionID+"/run", map[string]any{"command": "echo $GREETING"})
	if output(evs, api.EventStdout) != "hi\n" {
		t.Errorf("after a timeout the session lost its state: %+v", evs)
	}
	var s2 api.CreateSessionResponse
	d.do("POST", "/session", map[string]string{"cwd": dir}).json(t, &s2)
	evs = d.events("/session/"+s2.SessionID+"/run", map[string]any{"command": "pwd; echo ${GREETING:-separate}"})
	if output(evs, api.EventStdout) != dir+"\nseparate\n" {
		t.Errorf("second session = %q", output(evs, api.EventStdout))
	}
	if a := d.do("POST", "/session", map[string]string{"cwd": "/no/such"}); a.status != 400 {
		t.Errorf("session in a missing cwd = %d", a.status)
	}
	if a := d.do("POST", "/session/nope/run", map[string]string{"command": "true"}); a.status != 400 {
		t.Errorf("run in unknown session = %d", a.status)
	}
	if a := d.do("POST", "/session/"+s.SessionID+"/run", map[string]string{}); a.status != 400 {
		t.Errorf("run without command = %d", a.status)
	}
	if a := d.do("DELETE", "/session/"+s.SessionID, nil); a.status != 200 {
		t.Errorf("delete = %d", a.status)
	}
	if a := d.do("DELETE", "/session/"+s.SessionID, nil); a.status != 404 {
		t.Errorf("delete twice = %d", a.status)
	}
}

func TestSessionDeleteKillsWhatRuns(t *testing.T) {
	t.Parallel()
	d := startExecd(t)
	var s api.CreateSessionResponse
	d.do("POST", "/session", nil).json(t, &s)
	marker := filepath.Join(t.TempDir(), "survived")
	done := make(chan []api.ServerStreamEvent, 1)
	go func() {
		done <- d.events("/session/"+s.SessionID+"/run", map[string]any{"command": "sleep 2; touch " + marker})
	}()
	time.Sleep(300 * time.Millisecond)
	if a := d.do("DELETE", "/session/"+s.SessionID, nil); a.status != 200 {
		t.Fatalf("delete = %d", a.status)
	}
	evs := <-done
	if last := evs[len(evs)-1]; last.Type != api.EventError {
		t.Errorf("the run of a deleted session ended with %+v", last)
	}
	time.Sleep(2 * time.Second)
	if _, err := os.Stat(marker); err == nil {
		t.Errorf("the session's command kept running after delete")
	}
}

func TestCode(t *testing.T) {
	t.Parallel()
	d := startExecd(t)
	evs := d.events("/code", map[string]any{"code": "echo from-code"})
	if output(evs, api.EventStdout) != "from-code\n" || evs[len(evs)-1].Type != api.EventExecutionComplete {
		t.Errorf("code without language = %+v", evs)
	}
	evs = d.events("/code", map[string]any{"code": "echo as-command", "context": map[string]string{"language": "command"}})
	if output(evs, api.EventStdout) != "as-command\n" {
		t.Errorf("code in language command = %+v", evs)
	}
	if a := d.do("GET", "/code/contexts?language=python", nil); a.status != 200 || string(a.body) != "[]\n" {
		t.Errorf("list contexts = %d %s", a.status, a.body)
	}
	if a := d.do("DELETE", "/code/contexts", nil); a.status != 400 {
		t.Errorf("delete contexts without language = %d", a.status)
	}
	if a := d.do("DELETE", "/code/contexts?language=python", nil); a.status != 200 {
		t.Errorf("delete contexts = %d", a.status)
	}
	if a := d.do("GET", "/code/contexts/nope", nil); a.status != 404 || a.code(t) != api.CodeExecdContextNotFound {
		t.Errorf("get context = %d %s", a.status, a.body)
	}
	if a := d.do("POST", "/code", map[string]any{}); a.status != 400 {
		t.Errorf("code without code = %d", a.status)
	}
}

// TestAccessTokenFile: a warm-pool execd takes its token from a file that
// changes when the sandbox is claimed; a missing or empty file lets
// nothing in.
func TestAccessTokenFile(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "token")
	d := startExecd(t, "--access-token-file", file)
	if a := d.do("GET", "/metrics", nil); a.status != 401 {
		t.Errorf("without the file = %d", a.status)
	}
	if err := os.WriteFile(file, []byte("pool-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if a := d.do("GET", "/metrics", nil, api.HeaderExecdToken, "pool-token"); a.status != 200 {
		t.Errorf("the file's token = %d", a.status)
	}
	if err := os.WriteFile(file, []byte(token), 0o600); err != nil {
		t.Fatal(err)
	}
	if a := d.do("GET", "/metrics", nil, api.HeaderExecdToken, "pool-token"); a.status != 401 {
		t.Errorf("the old token after a change = %d", a.status)
	}
	if a := d.do("GET", "/metrics", nil); a.status != 200 {
		t.Errorf("the new token = %d", a.status)
	}
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if a := d.do("GET", "/metrics", nil, api.HeaderExecdToken, ""); a.status != 401 {
		t.Errorf("an empty file let an empty token in: %d", a.status)
	}
}

// EXECD_ENVS (--user-env-file) is what the sandbox's own programs write:
// its lines reach the commands of root and of the file's owner, after
// the runtime's --env-file; a file another user owns, a link, or a FIFO
// (which would block a reader) changes nothing.
func TestCommandUserEnvFile(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	dir := t.TempDir()
	_ = os.Chmod(dir, 0o755)
	runtimeFile, userFile := filepath.Join(dir, "runtime"), filepath.Join(dir, "user")
	_ = os.WriteFile(runtimeFile, []byte("WHO=runtime\nKEPT=runtime\n"), 0o600)
	_ = os.WriteFile(userFile, []byte("WHO=entrypoint\nPATH=/opt/lang/bin:/usr/bin:/bin\n"), 0o600)
	d := startExecd(t, "--env-file", runtimeFile, "--user-env-file", userFile)
	run := func(uid int) string {
		t.Helper()
		evs := d.events("/command", map[string]any{"command": `echo "$WHO $KEPT $PATH"`, "uid": uid, "cwd": "/"})
		return strings.TrimSpace(output(evs, api.EventStdout))
	}
	if got := run(0); got != "entrypoint runtime /opt/lang/bin:/usr/bin:/bin" {
		t.Errorf("root's command with a root-owned EXECD_ENVS = %q", got)
	}
	// Written by an unprivileged entrypoint: its own commands see it,
	// root's do not.
	if err := os.Chown(userFile, 1234, 1234); err != nil {
		t.Fatal(err)
	}
	if got := run(1234); !strings.HasPrefix(got, "entrypoint runtime /opt/lang/bin") {
		t.Errorf("the owner's command = %q", got)
	}
	if got := run(0); strings.Contains(got, "entrypoint") || strings.Contains(got, "/opt/lang") {
		t.Errorf("root's command took an unprivileged user's EXECD_ENVS: %q", got)
	}
	if got := run(4321); strings.Contains(got, "entrypoint") {
		t.Errorf("another user's command took it: %q", got)
	}
	// A link to a root-owned file, or a FIFO, in its place: ignored.
	target := filepath.Join(dir, "target")
	_ = os.WriteFile(target, []byte("WHO=link\n"), 0o600)
	_ = os.Remove(userFile)
	if err := os.Symlink(target, userFile); err != nil {
		t.Fatal(err)
	}
	if got := run(0); !strings.HasPrefix(got, "runtime runtime") {
		t.Errorf("through a link = %q", got)
	}
	_ = os.Remove(userFile)
	if err := syscall.Mkfifo(userFile, 0o666); err != nil {
		t.Fatal(err)
	}
	if got := run(0); !strings.HasPrefix(got, "runtime runtime") {
		t.Errorf("a FIFO = %q", got)
	}
}

// TestCommandsAreListed: GET /corral/commands pages through every kept
// command, the newest first, running ones with no exit, finished ones
// with their code and the size of their output; bad pages are 400s; no
// token is 401.
func TestCommandsAreListed(t *testing.T) {
	t.Parallel()
	d := startExecd(t)
	var list api.CommandList
	d.do("GET", api.PathExecdCommands, nil).json(t, &list)
	if list.Total != 0 || list.Items == nil || len(list.Items) != 0 {
		t.Fatalf("an empty execd lists %+v", list)
	}
	var ids []string
	for i, script := range []string{"printf 12345", "echo six >&2; exit 3", "sleep 30"} {
		evs := d.events("/command", map[string]any{"command": script, "background": i == 2})
		ids = append(ids, evs[0].Text)
		time.Sleep(10 * time.Millisecond) // distinct start times
	}
	d.do("GET", api.PathExecdCommands, nil).json(t, &list)
	if list.Total != 3 || len(list.Items) != 3 {
		t.Fatalf("three commands list as %+v", list)
	}
	run, failed, ok := list.Items[0], list.Items[1], list.Items[2]
	if run.ID != ids[2] || !run.Running || run.ExitCode != nil || !run.Background || run.Content != "sleep 30" {
		t.Errorf("the running one: %+v", run)
	}
	if failed.ID != ids[1] || failed.Running || failed.ExitCode == nil || *failed.ExitCode != 3 || failed.OutputBytes != 4 || failed.FinishedAt == nil {
		t.Errorf("the failed one: %+v", failed)
	}
	if ok.ID != ids[0] || ok.ExitCode == nil || *ok.ExitCode != 0 || ok.OutputBytes != 5 || ok.Background {
		t.Errorf("the first one: %+v", ok)
	}
	d.do("GET", api.PathExecdCommands+"?limit=1&offset=1", nil).json(t, &list)
	if list.Total != 3 || len(list.Items) != 1 || list.Items[0].ID != ids[1] {
		t.Errorf("the second page of one: %+v", list)
	}
	d.do("GET", api.PathExecdCommands+"?offset=9", nil).json(t, &list)
	if list.Total != 3 || len(list.Items) != 0 {
		t.Errorf("past the end: %+v", list)
	}
	for _, q := range []string{"limit=0", "limit=201", "limit=x", "offset=-1", "offset=1e3"} {
		if a := d.do("GET", api.PathExecdCommands+"?"+q, nil); a.status != 400 {
			t.Errorf("?%s = %d %s", q, a.status, a.body)
		}
	}
	if a := d.do("GET", api.PathExecdCommands, nil, api.HeaderExecdToken, ""); a.status != 401 {
		t.Errorf("no token = %d", a.status)
	}
	d.do("DELETE", "/command?id="+ids[2], nil)
}

// TestObservingIsNotActivity: a GET marked Corral-Observe: 1 (a console
// reading metrics) leaves /corral/activity's lastActivity as it was; the
// same request unmarked moves it.
func TestObservingIsNotActivity(t *testing.T) {
	t.Parallel()
	d := startExecd(t)
	d.do("GET", "/metrics", nil)
	var before, after api.ExecdActivity
	d.do("GET", api.PathExecdActivity, nil).json(t, &before)
	time.Sleep(20 * time.Millisecond)
	for _, p := range []string{"/metrics", api.PathExecdCommands} {
		if a := d.do("GET", p, nil, api.HeaderObserve, "1"); a.status != 200 {
			t.Fatalf("%s = %d %s", p, a.status, a.body)
		}
	}
	d.do("GET", api.PathExecdActivity, nil).json(t, &after)
	if !after.LastActivity.Equal(before.LastActivity) || after.InFlight != 0 {
		t.Errorf("observing moved the activity: %+v → %+v", before, after)
	}
	d.do("GET", "/metrics", nil)
	d.do("GET", api.PathExecdActivity, nil).json(t, &after)
	if !after.LastActivity.After(before.LastActivity) {
		t.Errorf("a plain read did not count: %+v → %+v", before, after)
	}
}
