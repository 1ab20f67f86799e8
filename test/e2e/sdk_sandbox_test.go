// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/internal/testutil"
	"github.com/corral-dev/corral/sdk"
)

// hostSandbox starts an OCI server and a sandbox of the host image and
// returns the client and the sandbox's handle.
func hostSandbox(t *testing.T, opts ...sdk.Option) (*server, *sdk.Client, *sdk.Sandbox) {
	t.Helper()
	requireOCI(t)
	s := startServer(t, t.TempDir(), "--runtime", "oci")
	c, err := sdk.New(append([]sdk.Option{sdk.WithBaseURL(s.url), sdk.WithAPIKey(testKey)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := c.CreateSandbox(ctx(t), ociCreate("host"), sdk.CreateOptions{Wait: true})
	if err != nil {
		t.Fatal(err)
	}
	x, err := c.Sandbox(ctx(t), sb.ID, sdk.SandboxOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s, c, x
}

// TestSDKCommands covers the command methods of the SDK against a real
// sandbox: streamed events, exact output to writers, readers, background
// commands with logs, interrupts, sessions and their failures.
func TestSDKCommands(t *testing.T) {
	t.Parallel()
	_, c, x := hostSandbox(t)
	cx := ctx(t)

	out, errOut, code, err := x.Run(cx, "echo out; echo err >&2; exit 7", sdk.CommandOptions{})
	if err != nil || out != "out\n" || errOut != "err\n" || code != 7 {
		t.Errorf("Run = %q %q %d %v", out, errOut, code, err)
	}
	// Exec copies output exactly, including a last line without newline
	// and carriage returns.
	var o, e bytes.Buffer
	code, err = x.Exec(cx, `printf 'a\r\nb\rc\n\nno-newline'; printf 'é' >&2`, sdk.CommandOptions{Cwd: "/tmp", Env: map[string]string{"X": "1"}}, &o, &e)
	if err != nil || code != 0 || o.String() != "a\r\nb\rc\n\nno-newline" || e.String() != "é" {
		t.Errorf("Exec = %q %q %d %v", o.String(), e.String(), code, err)
	}
	var evs []string
	res, err := x.RunStream(cx, "echo $X; pwd", sdk.CommandOptions{Cwd: "/tmp", Env: map[string]string{"X": "from-env"}}, func(ev sdk.Event) error {
		evs = append(evs, ev.Type+":"+ev.Text)
		return nil
	})
	if err != nil || res.ExitCode != 0 || res.ID == "" || strings.Join(evs[1:], ",") != "stdout:from-env,stdout:/tmp,execution_complete:" {
		t.Errorf("RunStream = %+v %v %v", res, evs, err)
	}
	_, err = x.RunStream(cx, "  ", sdk.CommandOptions{}, nil)
	wantKind(t, "empty command", err, sdk.ErrInvalidArgument)
	_, err = x.RunStream(cx, "true", sdk.CommandOptions{Cwd: "/no/such/dir"}, nil)
	wantKind(t, "missing cwd", err, sdk.ErrInvalidArgument)
	if _, _, code, _ := x.Run(cx, "sleep 10", sdk.CommandOptions{Timeout: 200 * time.Millisecond}); code == 0 {
		t.Error("a command past its timeout exited 0")
	}

	cmd := x.Start(cx, "head -c 300000 /dev/zero | tr '\\0' x; echo; echo done >&2", sdk.CommandOptions{})
	var so, se []byte
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); se, _ = io.ReadAll(cmd.Stderr()) }()
	so, _ = io.ReadAll(cmd.Stdout())
	wg.Wait()
	if code, err := cmd.Wait(); err != nil || code != 0 || len(so) != 300001 || string(se) != "done\n" {
		t.Errorf("Start: %d bytes, stderr %q, exit %d, %v", len(so), se, code, err)
	}

	id, err := x.StartBackground(cx, "echo one; sleep 0.3; echo two; sleep 30", sdk.CommandOptions{})
	if err != nil || id == "" {
		t.Fatalf("StartBackground = %q %v", id, err)
	}
	var logs []byte
	var cursor int64
	deadline := time.Now().Add(30 * time.Second)
	for !bytes.Contains(logs, []byte("two\n")) && time.Now().Before(deadline) {
		b, next, err := x.CommandLogs(cx, id, cursor)
		if err != nil {
			t.Fatal(err)
		}
		logs, cursor = append(logs, b...), next
		time.Sleep(50 * time.Millisecond)
	}
	if string(logs) != "one\ntwo\n" {
		t.Errorf("logs by cursor = %q", logs)
	}
	if st, err := x.CommandStatus(cx, id); err != nil || !st.Running {
		t.Errorf("status of a running command = %+v %v", st, err)
	}
	if err := x.Interrupt(cx, id); err != nil {
		t.Errorf("interrupt: %v", err)
	}
	testutil.WaitFor(t, 30*time.Second, "the interrupted command to end", func() bool {
		st, err := x.CommandStatus(cx, id)
		return err == nil && !st.Running
	})
	_, err = x.CommandStatus(cx, "no-such-command")
	wantKind(t, "status of a missing command", err, sdk.ErrNotFound)
	_, _, err = x.CommandLogs(cx, "no-such-command", 0)
	wantKind(t, "logs of a missing command", err, sdk.ErrNotFound)
	wantKind(t, "interrupt a missing command", x.Interrupt(cx, "no-such-command"), sdk.ErrNotFound)

	se2, err := x.CreateSession(cx, "/tmp")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := se2.Run(cx, "export K=v; cd /etc", 0, nil); err != nil {
		t.Fatal(err)
	}
	var sout strings.Builder
	if r, err := se2.Run(cx, "echo $K $(pwd)", 5*time.Second, func(ev sdk.Event) error {
		if ev.Type == api.EventStdout {
			sout.WriteString(ev.Text)
		}
		return nil
	}); err != nil || r.ExitCode != 0 || sout.String() != "v /etc" {
		t.Errorf("session state: %q %+v %v", sout.String(), r, err)
	}
	if err := se2.Close(cx); err != nil {
		t.Errorf("close session: %v", err)
	}
	_, err = se2.Run(cx, "true", 0, nil)
	wantKind(t, "run in a closed session", err, sdk.ErrNotFound)
	wantKind(t, "close a closed session", se2.Close(cx), sdk.ErrNotFound)
	_, err = x.CreateSession(cx, "/no/such/dir")
	wantKind(t, "session in a missing dir", err, sdk.ErrInvalidArgument)

	if m, err := x.Metrics(cx); err != nil || m.MemTotalMiB <= 0 {
		t.Errorf("metrics = %+v %v", m, err)
	}
	// Through the server's proxy, as a client on another machine would.
	px, err := c.Sandbox(cx, x.ID, sdk.SandboxOptions{UseServerProxy: true})
	if err != nil {
		t.Fatal(err)
	}
	if out, _, code, err := px.Run(cx, "echo via-proxy", sdk.CommandOptions{}); err != nil || code != 0 || out != "via-proxy\n" {
		t.Errorf("through the proxy: %q %d %v", out, code, err)
	}
	_, err = c.Sandbox(cx, "no-such-sandbox", sdk.SandboxOptions{})
	wantKind(t, "handle of a missing sandbox", err, sdk.ErrNotFound)
}

// TestSDKFilesAndTerminal covers the file and PTY methods of the SDK.
func TestSDKFilesAndTerminal(t *testing.T) {
	t.Parallel()
	_, _, x := hostSandbox(t)
	cx := ctx(t)

	data := make([]byte, 5<<20)
	_, _ = rand.Read(data)
	if err := x.UploadFiles(cx, []sdk.UploadFile{
		{Path: "/work/a/data.bin", Content: bytes.NewReader(data), Mode: 0o600},
		{Path: "/work/a/notes.txt", Content: strings.NewReader("hello corral\n")},
	}); err != nil {
		t.Fatalf("upload: %v", err)
	}
	var got bytes.Buffer
	if n, err := x.Download(cx, "/work/a/data.bin", &got); err != nil || n != int64(len(data)) || !bytes.Equal(got.Bytes(), data) {
		t.Errorf("download: %d bytes, equal %v, %v", n, bytes.Equal(got.Bytes(), data), err)
	}
	_, err := x.Download(cx, "/work/a/missing", io.Discard)
	wantKind(t, "download a missing file", err, sdk.ErrNotFound)
	wantKind(t, "upload without a path", x.Upload(cx, "", strings.NewReader("x"), 0), sdk.ErrInvalidArgument)

	info, err := x.FileInfo(cx, "/work/a/data.bin")
	if err != nil || info["/work/a/data.bin"].Size != int64(len(data)) || info["/work/a/data.bin"].Mode != 600 {
		t.Errorf("info = %+v %v", info, err)
	}
	_, err = x.FileInfo(cx, "/work/a/missing")
	wantKind(t, "info of a missing file", err, sdk.ErrNotFound)
	if err := x.MakeDirs(cx, map[string]fs.FileMode{"/work/b/c": 0o755}); err != nil {
		t.Errorf("mkdir: %v", err)
	}
	list, err := x.ListDir(cx, "/work", 3)
	if err != nil || len(list) != 5 {
		t.Errorf("list = %+v %v", list, err)
	}
	_, err = x.ListDir(cx, "/work/a/notes.txt", 1)
	wantKind(t, "list a file", err, sdk.ErrInvalidArgument)
	if err := x.Move(cx, api.RenameFileItem{Src: "/work/a/notes.txt", Dest: "/work/b/notes.txt"}); err != nil {
		t.Errorf("move: %v", err)
	}
	wantKind(t, "move a missing file", x.Move(cx, api.RenameFileItem{Src: "/work/nope", Dest: "/work/b/x"}), sdk.ErrNotFound)
	if err := x.Chmod(cx, map[string]api.Permission{"/work/b/notes.txt": {Mode: 640}}); err != nil {
		t.Errorf("chmod: %v", err)
	}
	wantKind(t, "chmod a missing file", x.Chmod(cx, map[string]api.Permission{"/work/nope": {Mode: 640}}), sdk.ErrNotFound)
	found, err := x.Search(cx, "/work", "*.txt")
	if err != nil || len(found) != 1 || found[0].Path != "/work/b/notes.txt" || found[0].Mode != 640 {
		t.Errorf("search = %+v %v", found, err)
	}
	rep, err := x.Replace(cx, map[string]api.ReplaceFileContentItem{"/work/b/notes.txt": {Old: "hello", New: "goodbye"}})
	if err != nil || rep["/work/b/notes.txt"].ReplacedCount != 1 {
		t.Errorf("replace = %+v %v", rep, err)
	}
	if out, _, _, _ := x.Run(cx, "cat /work/b/notes.txt", sdk.CommandOptions{}); out != "goodbye corral\n" {
		t.Errorf("after replace: %q", out)
	}
	if err := x.RemoveFiles(cx, "/work/b/notes.txt"); err != nil {
		t.Errorf("rm: %v", err)
	}
	if err := x.RemoveDirs(cx, "/work"); err != nil {
		t.Errorf("rmdir: %v", err)
	}
	_, err = x.FileInfo(cx, "/work")
	wantKind(t, "info after rmdir", err, sdk.ErrNotFound)

	id, err := x.CreatePTY(cx, sdk.PTYOptions{Cwd: "/tmp"})
	if err != nil {
		t.Fatal(err)
	}
	p, err := x.AttachPTY(cx, id, sdk.AttachOptions{Since: -1})
	if err != nil {
		t.Fatal(err)
	}
	// Wait for the prompt as a person would: bash's readline reads and
	// writes back the size while it prepares the terminal for a prompt.
	var all []byte
	buf := make([]byte, 4096)
	for !bytes.Contains(all, []byte("# ")) {
		n, err := p.Read(buf)
		all = append(all, buf[:n]...)
		if err != nil {
			t.Fatalf("no prompt: %v (output %q)", err, all)
		}
	}
	if err := p.Resize(100, 40); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(p, "stty size; echo marker-$((6*7)); exit 3\n"); err != nil {
		t.Fatal(err)
	}
	rest, _ := io.ReadAll(p)
	all = append(all, rest...)
	if code, ok := p.Wait(); !ok || code != 3 {
		t.Errorf("pty exit = %d %v", code, ok)
	}
	if !bytes.Contains(all, []byte("40 100")) || !bytes.Contains(all, []byte("marker-42")) || p.Mode != "pty" {
		t.Errorf("pty output (mode %q) = %q", p.Mode, all)
	}
	_, err = x.AttachPTY(cx, "no-such-pty", sdk.AttachOptions{Since: -1})
	wantKind(t, "attach a missing terminal", err, sdk.ErrNotFound)
	wantKind(t, "delete a missing terminal", x.DeletePTY(cx, "no-such-pty"), sdk.ErrNotFound)
}

// cutter dials normally but cuts the first connection that carries a
// command stream after a few kilobytes of answer.
type cutter struct {
	cut   atomic.Bool
	dials atomic.Int32
}

func (c *cutter) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	c.dials.Add(1)
	return &cuttable{Conn: conn, c: c}, nil
}

type cuttable struct {
	net.Conn
	c      *cutter
	stream bool
	read   int
}

// Write notes whether the request it starts (connections are reused) is
// a command stream.
func (x *cuttable) Write(b []byte) (int, error) {
	for _, m := range []string{"GET ", "POST ", "PUT ", "DELETE ", "PATCH ", "HEAD "} {
		if bytes.HasPrefix(b, []byte(m)) {
			x.stream, x.read = bytes.HasPrefix(b, []byte("POST /command ")), 0
		}
	}
	return x.Conn.Write(b)
}

func (x *cuttable) Read(b []byte) (int, error) {
	n, err := x.Conn.Read(b)
	x.read += n
	if x.stream && x.read > 8<<10 && x.c.cut.CompareAndSwap(false, true) {
		x.Conn.Close()
		return n, io.ErrUnexpectedEOF
	}
	return n, err
}

// TestSDKStreamReattachesAfterACut cuts a command's stream mid-output; the
// SDK resumes it by cursor and the caller sees every line exactly once.
func TestSDKStreamReattachesAfterACut(t *testing.T) {
	t.Parallel()
	cut := &cutter{}
	hc := &http.Client{Transport: &http.Transport{DialContext: cut.dial}}
	_, _, x := hostSandbox(t, sdk.WithHTTPClient(hc))
	var want strings.Builder
	for i := 1; i <= 3000; i++ {
		fmt.Fprintf(&want, "line %d\n", i)
	}
	var lines strings.Builder
	res, err := x.RunStream(ctx(t), "for i in $(seq 1 1500); do echo line $i; done; sleep 0.5; for i in $(seq 1501 3000); do echo line $i; done; exit 4",
		sdk.CommandOptions{}, func(ev sdk.Event) error {
			if ev.Type == api.EventStdout {
				lines.WriteString(ev.Text + "\n")
			}
			return nil
		})
	if err != nil || res.ExitCode != 4 {
		t.Fatalf("RunStream = %+v, %v", res, err)
	}
	if !cut.cut.Load() {
		t.Fatal("the stream was never cut; the test tested nothing")
	}
	if lines.String() != want.String() {
		t.Errorf("after the cut got %d bytes of output, want %d (lost or repeated lines)", lines.Len(), want.Len())
	}
	// The same through Exec's byte-exact mode.
	cut.cut.Store(false)
	var out bytes.Buffer
	code, err := x.Exec(ctx(t), "seq 1 20000", sdk.CommandOptions{}, &out, nil)
	var seq strings.Builder
	for i := 1; i <= 20000; i++ {
		fmt.Fprintf(&seq, "%d\n", i)
	}
	if err != nil || code != 0 || !cut.cut.Load() || out.String() != seq.String() {
		t.Errorf("Exec across a cut: %d bytes (want %d), exit %d, cut %v, %v", out.Len(), seq.Len(), code, cut.cut.Load(), err)
	}
}
