// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package execd_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/corral-dev/corral/api"
	fspb "github.com/corral-dev/corral/internal/e2b/envd/filesystem"
	"github.com/corral-dev/corral/internal/e2b/envd/filesystem/filesystemconnect"
	pb "github.com/corral-dev/corral/internal/e2b/envd/process"
	"github.com/corral-dev/corral/internal/e2b/envd/process/processconnect"
)

// tokenTransport adds execd's token, as the server does when it forwards.
type tokenTransport struct{ header http.Header }

func (t tokenTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(api.HeaderExecdToken, token)
	for k, v := range t.header {
		r.Header[k] = v
	}
	return http.DefaultTransport.RoundTrip(r)
}

func envdClients(d *daemon, hdr ...string) (processconnect.ProcessClient, filesystemconnect.FilesystemClient) {
	h := http.Header{}
	for i := 0; i+1 < len(hdr); i += 2 {
		h.Set(hdr[i], hdr[i+1])
	}
	hc := &http.Client{Transport: tokenTransport{header: h}}
	base := d.url + api.PathExecdE2BEnvd
	return processconnect.NewProcessClient(hc, base, connect.WithProtoJSON()), filesystemconnect.NewFilesystemClient(hc, base, connect.WithProtoJSON())
}

// events collects a process stream until it ends.
func events(t *testing.T, s interface {
	Receive() bool
	Err() error
}, msg func() *pb.ProcessEvent, started ...bool) (pid uint32, out, errOut string, keepalives int, end *pb.ProcessEvent_EndEvent) {
	t.Helper()
	first := len(started) == 0
	for s.Receive() {
		ev := msg()
		switch e := ev.GetEvent().(type) {
		case *pb.ProcessEvent_Start:
			pid = e.Start.GetPid()
		case *pb.ProcessEvent_Data:
			out += string(e.Data.GetStdout()) + string(e.Data.GetPty())
			errOut += string(e.Data.GetStderr())
		case *pb.ProcessEvent_Keepalive:
			keepalives++
		case *pb.ProcessEvent_End:
			end = e.End
		}
		if first && pid == 0 {
			t.Fatalf("the first event is not start: %v", ev)
		}
		first = false
	}
	if err := s.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	return
}

func startReq(cmd string, args ...string) *connect.Request[pb.StartRequest] {
	return connect.NewRequest(&pb.StartRequest{Process: &pb.ProcessConfig{Cmd: cmd, Args: args}})
}

func TestEnvdProcessStreamsOutputAndExit(t *testing.T) {
	t.Parallel()
	d := startExecd(t)
	proc, _ := envdClients(d)
	req := startReq("/bin/bash", "-c", "echo out; echo err >&2; exit 3")
	s, err := proc.Start(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	pid, out, errOut, _, end := events(t, s, func() *pb.ProcessEvent { return s.Msg().GetEvent() })
	if pid == 0 || out != "out\n" || errOut != "err\n" {
		t.Fatalf("pid %d out %q err %q", pid, out, errOut)
	}
	if end == nil || end.GetExitCode() != 3 || !end.GetExited() || end.GetStatus() != "exit status 3" || end.GetError() != "exit status 3" {
		t.Fatalf("end = %v", end)
	}
	// The request's environment reaches the process.
	req = startReq("/bin/sh", "-c", "echo $FROM_CALL")
	req.Msg.Process.Envs = map[string]string{"FROM_CALL": "yes"}
	s2, err := proc.Start(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if _, out, _, _, _ := events(t, s2, func() *pb.ProcessEvent { return s2.Msg().GetEvent() }); out != "yes\n" {
		t.Fatalf("envs: %q", out)
	}
}

func TestEnvdKeepaliveAndDisconnect(t *testing.T) {
	t.Parallel()
	d := startExecd(t)
	proc, _ := envdClients(d)
	// A quiet process gets keepalives at the client's interval (seconds).
	req := startReq("/bin/sh", "-c", "sleep 2.5")
	req.Header().Set("Keepalive-Ping-Interval", "1")
	s, err := proc.Start(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, _, n, end := events(t, s, func() *pb.ProcessEvent { return s.Msg().GetEvent() }); n < 1 || end == nil {
		t.Fatalf("keepalives %d, end %v", n, end)
	}

	// A client that goes away does not end its process; Connect
	// re-attaches and replays the output so far.
	ctx, cancel := context.WithCancel(t.Context())
	s, err = proc.Start(ctx, startReq("/bin/sh", "-c", "echo one; sleep 60"))
	if err != nil {
		t.Fatal(err)
	}
	if !s.Receive() {
		t.Fatal(s.Err())
	}
	pid := s.Msg().GetEvent().GetStart().GetPid()
	cancel()
	time.Sleep(200 * time.Millisecond)
	list, err := proc.List(t.Context(), connect.NewRequest(&pb.ListRequest{}))
	if err != nil || len(list.Msg.GetProcesses()) != 1 || list.Msg.GetProcesses()[0].GetPid() != pid || list.Msg.GetProcesses()[0].GetConfig().GetCmd() != "/bin/sh" {
		t.Fatalf("list after the client left = %v %v", list, err)
	}
	c, err := proc.Connect(t.Context(), connect.NewRequest(&pb.ConnectRequest{Process: &pb.ProcessSelector{Selector: &pb.ProcessSelector_Pid{Pid: pid}}}))
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 1)
	go func() {
		_, out, _, _, end := events(t, c, func() *pb.ProcessEvent { return c.Msg().GetEvent() })
		got <- fmt.Sprintf("%q %d %v %s", out, end.GetExitCode(), end.GetExited(), end.GetStatus())
	}()
	time.Sleep(200 * time.Millisecond)
	if _, err := proc.SendSignal(t.Context(), connect.NewRequest(&pb.SendSignalRequest{Process: &pb.ProcessSelector{Selector: &pb.ProcessSelector_Pid{Pid: pid}}, Signal: pb.Signal_SIGNAL_SIGKILL})); err != nil {
		t.Fatal(err)
	}
	if g := <-got; g != `"one\n" -1 false signal: killed` {
		t.Fatalf("connect = %s", g)
	}
	// Gone now: a signal to it is not_found, which the SDK reads as false.
	_, err = proc.SendSignal(t.Context(), connect.NewRequest(&pb.SendSignalRequest{Process: &pb.ProcessSelector{Selector: &pb.ProcessSelector_Pid{Pid: pid}}, Signal: pb.Signal_SIGNAL_SIGKILL}))
	if connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("signal to an ended process: %v", err)
	}
}

func TestEnvdStdinAndTerminal(t *testing.T) {
	t.Parallel()
	d := startExecd(t)
	proc, _ := envdClients(d)
	on := true
	req := startReq("/bin/cat")
	req.Msg.Stdin = &on
	s, err := proc.Start(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if !s.Receive() {
		t.Fatal(s.Err())
	}
	sel := &pb.ProcessSelector{Selector: &pb.ProcessSelector_Pid{Pid: s.Msg().GetEvent().GetStart().GetPid()}}
	if _, err := proc.SendInput(t.Context(), connect.NewRequest(&pb.SendInputRequest{Process: sel, Input: &pb.ProcessInput{Input: &pb.ProcessInput_Stdin{Stdin: []byte("abc")}}})); err != nil {
		t.Fatal(err)
	}
	if _, err := proc.CloseStdin(t.Context(), connect.NewRequest(&pb.CloseStdinRequest{Process: sel})); err != nil {
		t.Fatal(err)
	}
	if _, out, _, _, end := events(t, s, func() *pb.ProcessEvent { return s.Msg().GetEvent() }, true); out != "abc" || end.GetExitCode() != 0 {
		t.Fatalf("cat: %q %v", out, end)
	}
	// Input to a process started without stdin is refused, clearly.
	s, err = proc.Start(t.Context(), startReq("/bin/sleep", "5"))
	if err != nil {
		t.Fatal(err)
	}
	s.Receive()
	sel = &pb.ProcessSelector{Selector: &pb.ProcessSelector_Pid{Pid: s.Msg().GetEvent().GetStart().GetPid()}}
	_, err = proc.SendInput(t.Context(), connect.NewRequest(&pb.SendInputRequest{Process: sel, Input: &pb.ProcessInput{Input: &pb.ProcessInput_Stdin{Stdin: []byte("x")}}}))
	if connect.CodeOf(err) != connect.CodeFailedPrecondition {
		t.Fatalf("input without stdin: %v", err)
	}
	_, err = proc.Update(t.Context(), connect.NewRequest(&pb.UpdateRequest{Process: sel, Pty: &pb.PTY{Size: &pb.PTY_Size{Cols: 10, Rows: 10}}}))
	if connect.CodeOf(err) != connect.CodeFailedPrecondition {
		t.Fatalf("resize without a terminal: %v", err)
	}
	_, _ = proc.SendSignal(t.Context(), connect.NewRequest(&pb.SendSignalRequest{Process: sel, Signal: pb.Signal_SIGNAL_SIGKILL}))

	// A terminal of the asked size, resizable, fed through pty input.
	req = startReq("/bin/sh", "-c", "stty size; read line; stty size; echo got $line")
	req.Msg.Pty = &pb.PTY{Size: &pb.PTY_Size{Cols: 100, Rows: 30}}
	s, err = proc.Start(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	s.Receive()
	sel = &pb.ProcessSelector{Selector: &pb.ProcessSelector_Pid{Pid: s.Msg().GetEvent().GetStart().GetPid()}}
	time.Sleep(300 * time.Millisecond)
	if _, err := proc.Update(t.Context(), connect.NewRequest(&pb.UpdateRequest{Process: sel, Pty: &pb.PTY{Size: &pb.PTY_Size{Cols: 120, Rows: 40}}})); err != nil {
		t.Fatal(err)
	}
	if _, err := proc.SendInput(t.Context(), connect.NewRequest(&pb.SendInputRequest{Process: sel, Input: &pb.ProcessInput{Input: &pb.ProcessInput_Pty{Pty: []byte("hi\n")}}})); err != nil {
		t.Fatal(err)
	}
	_, out, _, _, end := events(t, s, func() *pb.ProcessEvent { return s.Msg().GetEvent() }, true)
	if !strings.Contains(out, "30 100") || !strings.Contains(out, "40 120") || !strings.Contains(out, "got hi") || end.GetExitCode() != 0 {
		t.Fatalf("terminal output %q, end %v", out, end)
	}
}

func TestEnvdRefusesBadInput(t *testing.T) {
	t.Parallel()
	d := startExecd(t)
	proc, fs := envdClients(d)
	bad := []struct {
		name string
		req  *connect.Request[pb.StartRequest]
	}{
		{"no cmd", connect.NewRequest(&pb.StartRequest{})},
		{"missing cwd", func() *connect.Request[pb.StartRequest] {
			r := startReq("/bin/true")
			cwd := "/no/such/dir"
			r.Msg.Process.Cwd = &cwd
			return r
		}()},
		{"bad env", func() *connect.Request[pb.StartRequest] {
			r := startReq("/bin/true")
			r.Msg.Process.Envs = map[string]string{"A=B": "c"}
			return r
		}()},
		{"unknown user", func() *connect.Request[pb.StartRequest] {
			r := startReq("/bin/true")
			r.Header().Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte("no-such-user-corral:")))
			return r
		}()},
	}
	for _, b := range bad {
		s, err := proc.Start(t.Context(), b.req)
		if err == nil {
			for s.Receive() {
			}
			err = s.Err()
		}
		if connect.CodeOf(err) != connect.CodeInvalidArgument {
			t.Errorf("%s: %v", b.name, err)
		}
	}
	_, err := proc.SendSignal(t.Context(), connect.NewRequest(&pb.SendSignalRequest{Process: &pb.ProcessSelector{Selector: &pb.ProcessSelector_Pid{Pid: 4000000}}, Signal: pb.Signal_SIGNAL_SIGTERM}))
	if connect.CodeOf(err) != connect.CodeNotFound {
		t.Errorf("signal to no process: %v", err)
	}
	_, err = proc.SendSignal(t.Context(), connect.NewRequest(&pb.SendSignalRequest{Process: &pb.ProcessSelector{Selector: &pb.ProcessSelector_Pid{Pid: 1}}}))
	if connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Errorf("an unspecified signal: %v", err)
	}
	_, err = proc.SendSignal(t.Context(), connect.NewRequest(&pb.SendSignalRequest{Signal: pb.Signal_SIGNAL_SIGTERM}))
	if connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Errorf("no selector: %v", err)
	}
	for _, p := range []string{"", "/", "bad\x00path"} {
		_, err := fs.Remove(t.Context(), connect.NewRequest(&fspb.RemoveRequest{Path: p}))
		if connect.CodeOf(err) != connect.CodeInvalidArgument {
			t.Errorf("remove %q: %v", p, err)
		}
	}
	_, err = fs.Stat(t.Context(), connect.NewRequest(&fspb.StatRequest{Path: "/no/such/file"}))
	if connect.CodeOf(err) != connect.CodeNotFound {
		t.Errorf("stat of nothing: %v", err)
	}
	_, err = fs.ListDir(t.Context(), connect.NewRequest(&fspb.ListDirRequest{Path: "/etc/hostname"}))
	if connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Errorf("list of a file: %v", err)
	}
	w, err := fs.WatchDir(t.Context(), connect.NewRequest(&fspb.WatchDirRequest{Path: "/no/such/dir"}))
	if err == nil {
		for w.Receive() {
		}
		err = w.Err()
	}
	if connect.CodeOf(err) != connect.CodeNotFound {
		t.Errorf("watch of nothing: %v", err)
	}
}

func TestEnvdFilesystem(t *testing.T) {
	t.Parallel()
	d := startExecd(t)
	_, fs := envdClients(d)
	root := t.TempDir()
	ctx := t.Context()
	mk, err := fs.MakeDir(ctx, connect.NewRequest(&fspb.MakeDirRequest{Path: root + "/a/b"}))
	if err != nil || mk.Msg.GetEntry().GetType() != fspb.FileType_FILE_TYPE_DIRECTORY || mk.Msg.GetEntry().GetPath() != root+"/a/b" {
		t.Fatalf("makedir = %v %v", mk, err)
	}
	if _, err := fs.MakeDir(ctx, connect.NewRequest(&fspb.MakeDirRequest{Path: root + "/a/b"})); connect.CodeOf(err) != connect.CodeAlreadyExists {
		t.Fatalf("makedir again: %v", err)
	}
	if err := os.WriteFile(root+"/a/b/f.txt", []byte("12345"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("f.txt", root+"/a/b/link"); err != nil {
		t.Fatal(err)
	}
	st, err := fs.Stat(ctx, connect.NewRequest(&fspb.StatRequest{Path: root + "/a/b/f.txt"}))
	if err != nil || st.Msg.GetEntry().GetSize() != 5 || st.Msg.GetEntry().GetMode() != 0o640 || st.Msg.GetEntry().GetPermissions() != "-rw-r-----" ||
		st.Msg.GetEntry().GetOwner() == "" || st.Msg.GetEntry().GetModifiedTime() == nil {
		t.Fatalf("stat = %v %v", st, err)
	}
	ln, err := fs.Stat(ctx, connect.NewRequest(&fspb.StatRequest{Path: root + "/a/b/link"}))
	if err != nil || ln.Msg.GetEntry().GetType() != fspb.FileType_FILE_TYPE_SYMLINK || ln.Msg.GetEntry().GetSymlinkTarget() != "f.txt" {
		t.Fatalf("stat of a link = %v %v", ln, err)
	}
	one, err := fs.ListDir(ctx, connect.NewRequest(&fspb.ListDirRequest{Path: root}))
	if err != nil || len(one.Msg.GetEntries()) != 1 {
		t.Fatalf("list depth 1 = %v %v", one, err)
	}
	three, err := fs.ListDir(ctx, connect.NewRequest(&fspb.ListDirRequest{Path: root, Depth: 3}))
	if err != nil || len(three.Msg.GetEntries()) != 4 {
		t.Fatalf("list depth 3 = %v %v", three, err)
	}
	mv, err := fs.Move(ctx, connect.NewRequest(&fspb.MoveRequest{Source: root + "/a/b/f.txt", Destination: root + "/c/d/g.txt"}))
	if err != nil || mv.Msg.GetEntry().GetPath() != root+"/c/d/g.txt" {
		t.Fatalf("move = %v %v", mv, err)
	}
	if _, err := fs.Remove(ctx, connect.NewRequest(&fspb.RemoveRequest{Path: root + "/c"})); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(root + "/c"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("remove left %v", err)
	}

	// A stream watch, recursive, with entries.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := fs.WatchDir(wctx, connect.NewRequest(&fspb.WatchDirRequest{Path: root, Recursive: true, IncludeEntry: true}))
	if err != nil {
		t.Fatal(err)
	}
	if !w.Receive() || w.Msg().GetStart() == nil {
		t.Fatalf("the watch's first event is not start: %v %v", w.Msg(), w.Err())
	}
	if err := os.WriteFile(root+"/a/b/new.txt", []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for w.Receive() {
		ev := w.Msg().GetFilesystem()
		if ev != nil && ev.GetName() == "a/b/new.txt" && ev.GetType() == fspb.EventType_EVENT_TYPE_CREATE {
			if ev.GetEntry().GetPath() != root+"/a/b/new.txt" {
				t.Fatalf("the event's entry = %v", ev.GetEntry())
			}
			break
		}
	}
	cancel()

	// The polling form.
	cw, err := fs.CreateWatcher(ctx, connect.NewRequest(&fspb.CreateWatcherRequest{Path: root}))
	if err != nil {
		t.Fatal(err)
	}
	id := cw.Msg.GetWatcherId()
	if err := os.WriteFile(root+"/polled.txt", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		evs, err := fs.GetWatcherEvents(ctx, connect.NewRequest(&fspb.GetWatcherEventsRequest{WatcherId: id}))
		if err != nil {
			t.Fatal(err)
		}
		if len(evs.Msg.GetEvents()) > 0 && evs.Msg.GetEvents()[0].GetName() == "polled.txt" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the polling watcher saw nothing")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := fs.RemoveWatcher(ctx, connect.NewRequest(&fspb.RemoveWatcherRequest{WatcherId: id})); err != nil {
		t.Fatal(err)
	}
	if _, err := fs.GetWatcherEvents(ctx, connect.NewRequest(&fspb.GetWatcherEventsRequest{WatcherId: id})); connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("events of a removed watcher: %v", err)
	}
}

// frames splits a Connect streaming body into (flags, JSON) frames.
func frames(t *testing.T, body []byte) (out []struct {
	flags byte
	msg   string
}) {
	t.Helper()
	for len(body) > 0 {
		if len(body) < 5 {
			t.Fatalf("a truncated frame header: %x", body)
		}
		n := binary.BigEndian.Uint32(body[1:5])
		if int(n) > len(body)-5 {
			t.Fatalf("a truncated frame: %d of %d bytes", len(body)-5, n)
		}
		out = append(out, struct {
			flags byte
			msg   string
		}{body[0], string(body[5 : 5+n])})
		body = body[5+n:]
	}
	return out
}

// TestEnvdConnectFraming checks the wire as the SDKs read it: JSON names,
// base64 bytes, the end-of-stream frame (empty, or carrying the error),
// and unary errors as {"code": "not_found"}.
func TestEnvdConnectFraming(t *testing.T) {
	t.Parallel()
	d := startExecd(t)
	post := func(path, ctype, body string) (*http.Response, []byte) {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), "POST", d.url+api.PathExecdE2BEnvd+path, strings.NewReader(body))
		req.Header.Set("Content-Type", ctype)
		req.Header.Set("Connect-Protocol-Version", "1")
		req.Header.Set(api.HeaderExecdToken, token)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res, b
	}
	envelope := func(msg string) string {
		var b bytes.Buffer
		b.WriteByte(0)
		_ = binary.Write(&b, binary.BigEndian, uint32(len(msg)))
		b.WriteString(msg)
		return b.String()
	}
	res, body := post("/process.Process/Start", "application/connect+json", envelope(`{"process":{"cmd":"/bin/sh","args":["-c","printf hi; exit 2"]}}`))
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != "application/connect+json" {
		t.Fatalf("start = %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	fr := frames(t, body)
	if len(fr) < 4 || !strings.HasPrefix(fr[0].msg, `{"event":{"start":{"pid":`) {
		t.Fatalf("frames = %q", fr)
	}
	if fr[1].msg != `{"event":{"data":{"stdout":"`+base64.StdEncoding.EncodeToString([]byte("hi"))+`"}}}` {
		t.Fatalf("data frame = %s", fr[1].msg)
	}
	var end struct {
		Event struct {
			End map[string]any `json:"end"`
		} `json:"event"`
	}
	if err := json.Unmarshal([]byte(fr[len(fr)-2].msg), &end); err != nil || end.Event.End["exitCode"] != 2.0 || end.Event.End["exited"] != true || end.Event.End["status"] != "exit status 2" {
		t.Fatalf("end frame = %s", fr[len(fr)-2].msg)
	}
	if last := fr[len(fr)-1]; last.flags != 2 || last.msg != "{}" {
		t.Fatalf("end of stream = %d %q", last.flags, last.msg)
	}
	// A stream's error travels in its end-of-stream frame.
	_, body = post("/process.Process/Connect", "application/connect+json", envelope(`{"process":{"pid":4000000}}`))
	fr = frames(t, body)
	if len(fr) != 1 || fr[0].flags != 2 || !strings.Contains(fr[0].msg, `"code":"not_found"`) {
		t.Fatalf("connect to no process = %q", fr)
	}
	// Unary: a JSON body, or a status and {"code": ...}.
	res, body = post("/process.Process/SendSignal", "application/json", `{"process":{"pid":4000000},"signal":"SIGNAL_SIGKILL"}`)
	if res.StatusCode != 404 || !strings.Contains(string(body), `"code":"not_found"`) {
		t.Fatalf("unary error = %d %s", res.StatusCode, body)
	}
	res, body = post("/process.Process/List", "application/json", `{}`)
	if res.StatusCode != 200 || strings.TrimSpace(string(body)) != "{}" {
		t.Fatalf("list = %d %s", res.StatusCode, body)
	}
	// Not JSON at all.
	res, _ = post("/filesystem.Filesystem/Stat", "application/json", `{"path":`)
	if res.StatusCode != 400 {
		t.Fatalf("a broken body = %d", res.StatusCode)
	}
}

func TestEnvdFilesRoute(t *testing.T) {
	t.Parallel()
	d := startExecd(t)
	root := t.TempDir()
	do := func(method, path string, body io.Reader, hdr ...string) (*http.Response, []byte) {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), method, d.url+api.PathExecdE2BEnvd+path, body)
		req.Header.Set(api.HeaderExecdToken, token)
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		res, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res, b
	}
	var mp bytes.Buffer
	w := multipart.NewWriter(&mp)
	part, _ := w.CreateFormFile("file", root+"/up/one.bin")
	_, _ = part.Write([]byte{0, 1, 2, 255})
	part, _ = w.CreateFormFile("file", root+"/up/two.txt")
	_, _ = part.Write([]byte("two"))
	_ = w.Close()
	res, body := do("POST", "/files", &mp, "Content-Type", w.FormDataContentType())
	var written []map[string]string
	if res.StatusCode != 200 || json.Unmarshal(body, &written) != nil || len(written) != 2 || written[0]["path"] != root+"/up/one.bin" || written[0]["type"] != "file" {
		t.Fatalf("upload = %d %s", res.StatusCode, body)
	}
	res, body = do("GET", "/files?path="+root+"/up/one.bin", nil)
	if res.StatusCode != 200 || !bytes.Equal(body, []byte{0, 1, 2, 255}) {
		t.Fatalf("download = %d %x", res.StatusCode, body)
	}
	// A raw, gzip-encoded upload; a gzip download.
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write([]byte("zipped"))
	_ = zw.Close()
	if res, body := do("POST", "/files?path="+root+"/z.txt", &gz, "Content-Type", "application/octet-stream", "Content-Encoding", "gzip"); res.StatusCode != 200 {
		t.Fatalf("gzip upload = %d %s", res.StatusCode, body)
	}
	res, body = do("GET", "/files?path="+root+"/z.txt", nil, "Accept-Encoding", "gzip")
	if res.Header.Get("Content-Encoding") != "gzip" {
		t.Fatalf("no gzip: %v", res.Header)
	}
	zr, err := gzip.NewReader(bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := io.ReadAll(zr); string(b) != "zipped" {
		t.Fatalf("gzip download = %q", b)
	}
	// Errors in E2B's shape, code equal to the status.
	for _, c := range []struct {
		method, path string
		body         io.Reader
		hdr          []string
		status       int
	}{
		{"GET", "/files?path=" + root, nil, nil, 400},
		{"GET", "/files?path=" + root + "/nothing", nil, nil, 404},
		{"GET", "/files", nil, nil, 400},
		{"POST", "/files", strings.NewReader("x"), []string{"Content-Type", "application/octet-stream"}, 400},
		{"POST", "/files?path=" + root, strings.NewReader("x"), []string{"Content-Type", "application/octet-stream"}, 400},
		{"POST", "/files?path=" + root + "/x", strings.NewReader("x"), []string{"Content-Type", "text/plain"}, 400},
		{"POST", "/files?path=" + root + "/x", strings.NewReader("--b\r\n"), []string{"Content-Type", "multipart/form-data; boundary=b"}, 400},
		{"GET", "/files?path=" + root + "/x&username=no-such-user-corral", nil, nil, 400},
		{"GET", "/nowhere", nil, nil, 404},
	} {
		res, body := do(c.method, c.path, c.body, c.hdr...)
		var e struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		}
		if res.StatusCode != c.status || json.Unmarshal(body, &e) != nil || e.Code != c.status || e.Message == "" {
			t.Errorf("%s %s = %d %s", c.method, c.path, res.StatusCode, body)
		}
	}
	if _, err := os.Stat(filepath.Join(root, "x")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused upload left a file: %v", err)
	}
	// Health needs nothing more than execd's own token.
	if res, _ := do("GET", "/health", nil); res.StatusCode != 204 {
		t.Errorf("health = %d", res.StatusCode)
	}
}
