// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package jupyter

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"

	"github.com/corral-dev/corral/internal/testutil"
)

// pythonSpec finds the host's Python kernelspec (Debian's
// python3-ipykernel, which scripts/test.sh installs): the tests speak to a
// real kernel. Without one they skip, except in CI (CORRAL_TEST_ROOT=1),
// where a missing kernel fails them.
func pythonSpec(t *testing.T) Spec {
	t.Helper()
	s, ok := Pick(FindSpecs(DataDirs(os.Environ())), "python")
	if !ok {
		if os.Getenv(testutil.EnvRoot) == "1" {
			t.Fatal("no Python kernelspec on this machine: install python3-ipykernel")
		}
		t.Skip("no Python kernelspec (install python3-ipykernel)")
	}
	return s
}

func startKernel(t *testing.T) *Kernel {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	k, err := Start(ctx, pythonSpec(t), Options{Dir: t.TempDir(), Env: os.Environ(), RuntimeDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := k.Shutdown(2 * time.Second); err != nil {
			t.Error(err)
		}
	})
	return k
}

// run executes code and returns its output messages by type.
type run struct {
	reply  Reply
	stdout string
	stderr string
	result map[string]any
	msgs   []Message
}

func execute(t *testing.T, k *Kernel, code string) (run, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var r run
	rep, err := k.Execute(ctx, code, func(m Message) error {
		r.msgs = append(r.msgs, m)
		switch m.Type() {
		case "stream":
			var c struct{ Name, Text string }
			_ = json.Unmarshal(m.Content, &c)
			if c.Name == "stdout" {
				r.stdout += c.Text
			} else {
				r.stderr += c.Text
			}
		case "execute_result":
			var c struct {
				Data map[string]any `json:"data"`
			}
			_ = json.Unmarshal(m.Content, &c)
			r.result = c.Data
		}
		return nil
	})
	r.reply = rep
	return r, err
}

func TestKernelRoundTripKeepsState(t *testing.T) {
	k := startKernel(t)
	if k.Info().LanguageInfo.Name != "python" || k.Info().ProtocolVersion == "" {
		t.Fatalf("kernel_info: %+v", k.Info())
	}
	r, err := execute(t, k, "x = 6*7\nprint('hello')\nx")
	if err != nil {
		t.Fatal(err)
	}
	if r.reply.Status != "ok" || r.stdout != "hello\n" || r.result["text/plain"] != "42" {
		t.Fatalf("got reply %+v stdout %q result %v", r.reply, r.stdout, r.result)
	}
	first := r
	r, err = execute(t, k, "print('HELLO')\nx + 1")
	if err != nil || r.result["text/plain"] != "43" || r.reply.ExecutionCount != 2 {
		t.Fatalf("state not kept: %v %+v %v", err, r.reply, r.result)
	}
	// A message's bytes are its own (decode keeps the socket's frames,
	// uncopied): the next messages left the first run's as they were.
	for _, m := range first.msgs {
		var c struct{ Text string }
		if m.Type() == "stream" && (json.Unmarshal(m.Content, &c) != nil || c.Text != "hello\n") {
			t.Fatalf("the first run's output message now reads %q", m.Content)
		}
	}
	if err := k.Ping(5 * time.Second); err != nil {
		t.Fatalf("heartbeat: %v", err)
	}
}

// The first execution of a fresh kernel loses no output: the handshake
// waited until iopub was heard.
func TestFirstExecutionLosesNoOutput(t *testing.T) {
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Go(func() {
			k := startKernel(t)
			r, err := execute(t, k, "print('first', "+strconv.Itoa(i)+")")
			if err != nil || r.stdout != "first "+strconv.Itoa(i)+"\n" {
				t.Errorf("kernel %d: err %v, stdout %q", i, err, r.stdout)
			}
		})
	}
	wg.Wait()
}

func TestErrorsCarryTraceback(t *testing.T) {
	k := startKernel(t)
	r, err := execute(t, k, "undefined_name")
	if err != nil {
		t.Fatal(err)
	}
	if r.reply.Status != "error" || r.reply.EName != "NameError" || len(r.reply.Traceback) == 0 {
		t.Fatalf("reply %+v", r.reply)
	}
	var sawError bool
	for _, m := range r.msgs {
		sawError = sawError || m.Type() == "error"
	}
	if !sawError {
		t.Fatal("no error message on iopub")
	}
}

// A message signed with another key is refused by the kernel (and the
// kernel goes on working); one signed with ours is not refused by us.
func TestSignatures(t *testing.T) {
	good, bad := signer{key: []byte("k1")}, signer{key: []byte("k2")}
	m := Message{Header: Header{MsgID: "1", MsgType: "x"}, Content: json.RawMessage(`{"a":1}`)}
	frames, err := good.encode(m)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := good.decode(append([][]byte{[]byte("identity")}, frames...)); err != nil {
		t.Fatalf("own signature refused: %v", err)
	}
	if _, err := bad.decode(frames); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("wrong key: %v", err)
	}
	tampered := append([][]byte(nil), frames...)
	tampered[5] = []byte(`{"a":2}`)
	if _, err := good.decode(tampered); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("tampered content: %v", err)
	}
	if _, err := good.decode(frames[:4]); err == nil {
		t.Fatal("short message accepted")
	}

	k := startKernel(t)
	forged, err := k.newMessage("execute_request", map[string]any{"code": "open('pwned', 'w').close()", "silent": false})
	if err != nil {
		t.Fatal(err)
	}
	rc, _ := k.route(forged.Header.MsgID)
	if err := k.sendSigned(k.shell, forged, signer{key: []byte("not the key")}); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-rc:
		t.Fatalf("the kernel answered a forged request: %s", r.Content)
	case <-time.After(time.Second):
	}
	k.unroute(forged.Header.MsgID)
	r, err := execute(t, k, "import os; os.path.exists('pwned')")
	if err != nil || r.result["text/plain"] != "False" {
		t.Fatalf("forged code ran, or the kernel stopped working: %v %v", err, r.result)
	}
}

func TestInterrupt(t *testing.T) {
	k := startKernel(t)
	started := make(chan struct{})
	done := make(chan run, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		var once sync.Once
		rep, err := k.Execute(ctx, "import time\nprint('spinning', flush=True)\nwhile True: pass", func(m Message) error {
			if m.Type() == "stream" {
				once.Do(func() { close(started) })
			}
			return nil
		})
		if err != nil {
			t.Error(err)
		}
		done <- run{reply: rep}
	}()
	select {
	case <-started:
	case <-time.After(30 * time.Second):
		t.Fatal("the loop never started")
	}
	at := time.Now()
	if err := k.Interrupt(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		if r.reply.EName != "KeyboardInterrupt" {
			t.Fatalf("reply after interrupt: %+v", r.reply)
		}
		t.Logf("interrupted in %v", time.Since(at))
	case <-time.After(10 * time.Second):
		t.Fatal("the interrupt did not end the execution")
	}
	if r, err := execute(t, k, "1+1"); err != nil || r.result["text/plain"] != "2" {
		t.Fatalf("kernel unusable after interrupt: %v %v", err, r.result)
	}
}

func TestKernelDeathEndsTheExecution(t *testing.T) {
	k := startKernel(t)
	r, err := execute(t, k, "print('bye', flush=True)\nimport os; os._exit(3)")
	if !errors.Is(err, ErrDied) {
		t.Fatalf("err %v, reply %+v", err, r.reply)
	}
	<-k.Exited()
	var ee *os.ProcessState
	if k.cmd.ProcessState != nil {
		ee = k.cmd.ProcessState
	}
	if ee == nil || ee.ExitCode() != 3 {
		t.Fatalf("exit: %v", k.ExitError())
	}
	if _, err := execute(t, k, "1"); !errors.Is(err, ErrDied) {
		t.Fatalf("an execution on a dead kernel: %v", err)
	}
}

// Shutdown ends the kernel and what it started, and removes the
// connection file.
func TestShutdownKillsTheProcessGroup(t *testing.T) {
	k := startKernel(t)
	r, err := execute(t, k, "import subprocess\np = subprocess.Popen(['sleep', '1000'])\np.pid")
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(r.result["text/plain"].(string))
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Shutdown(2 * time.Second); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "the kernel's child to be gone", func() bool {
		b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
		// Gone, or a zombie waiting for its reaper (the test process is
		// not its parent).
		return err != nil || strings.Contains(string(b), ") Z ")
	})
	if err := syscall.Kill(k.Pid(), 0); err == nil {
		t.Fatal("the kernel process still runs")
	}
	if _, err := os.Stat(k.connFile); !os.IsNotExist(err) {
		t.Fatalf("connection file left: %v", err)
	}
}

func TestFindSpecs(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	write := func(dir, name, body string) {
		d := filepath.Join(dir, "kernels", name)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "kernel.json"), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(a, "python3", `{"argv":["a","-f","{connection_file}"],"language":"python","display_name":"A"}`)
	write(b, "python3", `{"argv":["b"],"language":"python"}`)
	write(b, "python", `{"argv":["p"],"language":"Python","interrupt_mode":"message"}`)
	write(b, "broken", `{"argv":`)
	write(b, "noargv", `{"language":"x"}`)
	write(b, "ir", `{"argv":["R"],"language":"R"}`)
	if err := os.Symlink("/dev/zero", filepath.Join(b, "kernels", "dev")); err != nil {
		t.Fatal(err)
	}
	specs := FindSpecs([]string{a, b, filepath.Join(a, "missing")})
	var names []string
	for _, s := range specs {
		names = append(names, s.Name)
	}
	if strings.Join(names, ",") != "ir,python,python3" {
		t.Fatalf("specs %v", names)
	}
	if specs[2].DisplayName != "A" || specs[2].Dir != filepath.Join(a, "kernels", "python3") {
		t.Fatalf("the first data dir does not win: %+v", specs[2])
	}
	if s, _ := Pick(specs, "python"); s.Name != "python" || !s.InterruptByMessage() {
		t.Fatalf("Pick(python) = %+v", s)
	}
	if s, ok := Pick(specs, "r"); !ok || s.Name != "ir" {
		t.Fatalf("Pick(r) = %+v", s)
	}
	if _, ok := Pick(specs, "cobol"); ok {
		t.Fatal("Pick(cobol) found something")
	}
	if got := strings.Join(Languages(specs), ","); got != "python,r" {
		t.Fatalf("Languages = %s", got)
	}
	dirs := DataDirs([]string{"JUPYTER_PATH=/j1:/j2:relative", "HOME=/home/u", "PATH=/opt/py/bin:/usr/bin"})
	want := "/j1,/j2,/home/u/.local/share/jupyter,/opt/py/share/jupyter,/usr/share/jupyter,/usr/local/share/jupyter"
	if strings.Join(dirs, ",") != want {
		t.Fatalf("DataDirs = %v", dirs)
	}
}

// A kernel that stops taking requests (here: stopped) is reported, not
// waited for forever.
func TestUnresponsiveKernel(t *testing.T) {
	k := startKernel(t)
	k.ackTimeout = time.Second
	if err := syscall.Kill(k.Pid(), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(k.Pid(), syscall.SIGCONT)
	if _, err := execute(t, k, "1"); !errors.Is(err, ErrUnresponsive) {
		t.Fatalf("execute on a stopped kernel: %v", err)
	}
	if err := k.Ping(time.Second); err == nil {
		t.Fatal("a stopped kernel answered the heartbeat")
	}
}

func TestQueueBoundsABacklogNotAMessage(t *testing.T) {
	q := newQueue()
	stream := func(n int) Message {
		return Message{Header: Header{MsgType: "stream"}, Content: make(json.RawMessage, n)}
	}
	q.push(stream(maxQueued + 10))
	if got := q.take(); len(got) != 1 || q.droppedBytes() != 0 {
		t.Fatalf("one large message: %d taken, %d dropped", len(got), q.droppedBytes())
	}
	q.push(stream(maxQueued - 10))
	q.push(stream(100))
	q.push(Message{Header: Header{MsgType: "status"}, Content: make(json.RawMessage, 100)})
	if got := q.take(); len(got) != 2 || got[1].Type() != "status" || q.droppedBytes() != 100 {
		t.Fatalf("a backlog past the bound: %d taken, %d dropped", len(got), q.droppedBytes())
	}
}

// TestStartRetriesATakenPort: a port chosen for the kernel that another
// socket takes before the kernel binds it (here a PULL socket on the
// heartbeat port, as a kernel's own internal socket once did in CI) does
// not fail the start: it is tried again with other ports.
func TestStartRetriesATakenPort(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	pull := zmq4.NewPull(ctx)
	defer pull.Close()
	if err := pull.Listen("tcp://127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	taken := pull.Addr().(*net.TCPAddr).Port
	calls := 0
	pickPorts = func(n int) ([]int, error) {
		calls++
		ports, err := freePorts(n)
		if calls == 1 && err == nil {
			ports[4] = taken // the heartbeat's
		}
		return ports, err
	}
	t.Cleanup(func() { pickPorts = freePorts })
	k, err := Start(ctx, pythonSpec(t), Options{Dir: t.TempDir(), Env: os.Environ(), RuntimeDir: t.TempDir()})
	if err != nil {
		t.Fatalf("start with a taken port: %v", err)
	}
	defer k.Shutdown(2 * time.Second)
	if calls < 2 {
		t.Fatalf("ports were picked %d times; the taken one was used", calls)
	}
	if r, err := execute(t, k, "1+1"); err != nil || r.result["text/plain"] != "2" {
		t.Fatalf("the kernel of the second try: %v %v", err, r.result)
	}
}
