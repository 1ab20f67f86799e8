// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/corral-dev/corral/internal/initproc"
	"github.com/corral-dev/corral/internal/testutil"
)

func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

// pid1 runs `corral init` as PID 1 of a new PID namespace with its own
// /proc (util-linux unshare).
func pid1(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	testutil.RequireRoot(t)
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Fatalf("unshare (util-linux) is needed: %v", err)
	}
	// --kill-child: the namespace's PID 1 (and with it everything in the
	// namespace) dies with unshare, whatever ends the test.
	return exec.Command(unshare, append([]string{"--pid", "--fork", "--kill-child", "--mount-proc", binary, "init"}, args...)...)
}

// inGroup makes cmd (a `corral init` that is not PID 1) the leader of a
// process group, which its entrypoint joins, and ends the whole group when
// the test does: killing init alone would leave the entrypoint running.
func inGroup(t *testing.T, cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	t.Cleanup(func() {
		if cmd.Process != nil {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
	})
}

// stopPID1 ends a namespace started by pid1 and returns once it is empty:
// killing unshare alone returns before the namespace's processes are gone,
// and execd in there could still be writing into the test's directories
// while they are removed (seen in CI as "directory not empty").
func stopPID1(t *testing.T, cmd *exec.Cmd, done <-chan error) {
	t.Helper()
	init := 0
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", cmd.Process.Pid, cmd.Process.Pid)); err == nil {
		_, _ = fmt.Sscan(string(b), &init)
	}
	if init > 0 {
		_ = syscall.Kill(init, syscall.SIGKILL)
	}
	_ = cmd.Process.Kill()
	<-done
	if init == 0 {
		return
	}
	// The namespace's init becomes a zombie (or is gone) only after every
	// other process in its namespace has been reaped.
	testutil.WaitFor(t, 20*time.Second, "the sandbox's PID namespace to empty", func() bool {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", init))
		if err != nil {
			return true
		}
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		return len(f) > 0 && (f[0] == "Z" || f[0] == "X")
	})
}

func TestInitAsPID1ExitCodeAndParent(t *testing.T) {
	t.Parallel()
	cmd := pid1(t, "--no-execd", "--", "sh", "-c", "echo ppid=$PPID; exit 7")
	out, err := cmd.CombinedOutput()
	if exitCode(err) != 7 || !strings.Contains(string(out), "ppid=1") {
		t.Fatalf("exit %d, output %q; want 7 and the entrypoint's parent to be PID 1", exitCode(err), out)
	}
}

func TestInitAsPID1ReapsOrphans(t *testing.T) {
	t.Parallel()
	// The subshell exits at once, orphaning its sleep, which PID 1 must
	// reap when it ends; then the entrypoint looks for zombies.
	script := `(sleep 0.2 &); sleep 1; z=$(grep -l '^State:.*Z' /proc/[0-9]*/status 2>/dev/null | wc -l); echo zombies=$z`
	out, err := pid1(t, "--no-execd", "--", "sh", "-c", script).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "zombies=0") {
		t.Fatalf("err %v, output %q; want zombies=0", err, out)
	}
}

func TestInitAsPID1ForwardsSIGTERM(t *testing.T) {
	t.Parallel()
	cmd := pid1(t, "--no-execd", "--", "sh", "-c", `trap 'echo got-term; exit 3' TERM; echo ready; while :; do sleep 0.05; done`)
	var out testutil.LockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "the entrypoint to start", func() bool { return strings.Contains(out.String(), "ready") })
	// unshare forwards nothing; signal the namespace's PID 1, its child.
	initPID := childOf(t, cmd.Process.Pid)
	if err := syscall.Kill(initPID, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	if exitCode(err) != 3 || !strings.Contains(out.String(), "got-term") {
		t.Fatalf("exit %d, output %q; want the entrypoint's trap to run and exit 3", exitCode(err), out.String())
	}
}

// childOf returns the only child of pid.
func childOf(t *testing.T, pid int) int {
	t.Helper()
	var child int
	testutil.WaitFor(t, 5*time.Second, "unshare's child", func() bool {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
		if err != nil {
			return false
		}
		_, err = fmt.Sscan(string(b), &child)
		return err == nil
	})
	return child
}

func TestInitEntrypointProblems(t *testing.T) {
	t.Parallel()
	plain := t.TempDir() + "/plain"
	_ = os.WriteFile(plain, []byte("not a program"), 0o644)
	for _, tc := range []struct {
		entry []string
		code  int
		msg   string
	}{
		{[]string{"/no/such/program"}, 127, "no such file"},
		{[]string{"no-such-program-xyz"}, 127, "not found in PATH"},
		{[]string{plain}, 126, "not an executable"},
		{nil, 2, "no entrypoint"},
	} {
		out, err := exec.Command(binary, append([]string{"init", "--no-execd", "--"}, tc.entry...)...).CombinedOutput()
		if exitCode(err) != tc.code || !strings.Contains(string(out), tc.msg) {
			t.Errorf("init %v: exit %d %q, want %d and %q", tc.entry, exitCode(err), out, tc.code, tc.msg)
		}
	}
}

// TestInitRunsExecd: init starts execd with the token from its
// environment, keeps the token from the entrypoint, and stops execd when
// the entrypoint exits.
func TestInitRunsExecd(t *testing.T) {
	t.Parallel()
	addr := freeLoopbackAddr(t)
	marker := t.TempDir() + "/env"
	cmd := exec.Command(binary, "init", "--execd-listen", addr, "--execd-state-dir", t.TempDir(), "--",
		"sh", "-c", "echo ${EXECD_ACCESS_TOKEN:-none} > "+marker+"; sleep 30")
	cmd.Env = append(os.Environ(), "EXECD_ACCESS_TOKEN=init-token")
	inGroup(t, cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	testutil.WaitFor(t, 10*time.Second, "execd to answer", func() bool {
		req, _ := http.NewRequest("GET", "http://"+addr+"/metrics", nil)
		req.Header.Set("X-EXECD-ACCESS-TOKEN", "init-token")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == 200
	})
	// The entrypoint starts beside execd, not before it answers.
	var b []byte
	testutil.WaitFor(t, 10*time.Second, "the entrypoint to write what it saw", func() bool {
		b, _ = os.ReadFile(marker)
		return strings.HasSuffix(string(b), "\n")
	})
	if strings.TrimSpace(string(b)) != "none" {
		t.Errorf("the entrypoint saw EXECD_ACCESS_TOKEN=%q", b)
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-done:
		if exitCode(err) != 143 {
			t.Errorf("init exit = %v, want 143 (the entrypoint killed by SIGTERM)", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("init did not exit after SIGTERM")
	}
	if _, err := http.Get("http://" + addr + "/ping"); err == nil {
		t.Errorf("execd still answers after init exited")
	}
}

// TestInitWaitsForStartFile: with --wait-start-file the entrypoint is
// the one the runtime renames into the file, started only then; what is
// there before (a link, a bad request) is not taken for it.
func TestInitWaitsForStartFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	marker := filepath.Join(dir, "started")
	start := filepath.Join(dir, "start.json")
	// A link planted where the file will be: not followed.
	elsewhere := filepath.Join(t.TempDir(), "start.json")
	if err := os.WriteFile(elsewhere, []byte(`{"args":["sh","-c","echo planted > `+marker+`"]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(elsewhere, start); err != nil {
		t.Fatal(err)
	}
	var out testutil.LockedBuffer
	cmd := exec.Command(binary, "init", "--no-execd", "--wait-start-file", start, "--")
	cmd.Stdout, cmd.Stderr = &out, &out
	inGroup(t, cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	time.Sleep(300 * time.Millisecond)
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the entrypoint started from a link")
	}
	_ = os.Remove(start)
	if err := os.WriteFile(start, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "the bad request to be reported", func() bool { return strings.Contains(out.String(), "bad start request") })
	if err := initproc.SendStartFile(dir, "start.json", initproc.Start{Args: []string{"sh", "-c", "echo $GREETING > " + marker}, Env: []string{"GREETING=hi"}}); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "the entrypoint to start", func() bool {
		b, _ := os.ReadFile(marker)
		return string(b) == "hi\n"
	})
	if err := cmd.Wait(); exitCode(err) != 0 {
		t.Errorf("init exited %d: %s", exitCode(err), out.String())
	}
}

// TestInitWaitsForURL: with --wait-url the entrypoint starts only once
// the URL answers 200; a URL that never does ends init with a message
// and no entrypoint run; a URL that is not http(s) is refused.
func TestInitWaitsForURL(t *testing.T) {
	t.Parallel()
	var ready atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !ready.Load() {
			http.Error(w, "not yet", http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(srv.Close)
	marker := t.TempDir() + "/started"
	cmd := exec.Command(binary, "init", "--no-execd", "--wait-url", srv.URL+"/healthz", "--", "sh", "-c", "echo yes > "+marker+"; sleep 30")
	inGroup(t, cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	time.Sleep(300 * time.Millisecond)
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the entrypoint started before the URL answered 200")
	}
	ready.Store(true)
	testutil.WaitFor(t, 10*time.Second, "the entrypoint to start", func() bool {
		_, err := os.Stat(marker)
		return err == nil
	})

	never := t.TempDir() + "/never"
	out, err := exec.Command(binary, "init", "--no-execd", "--wait-url", "http://127.0.0.1:1/healthz", "--wait-timeout", "300ms",
		"--", "sh", "-c", "echo yes > "+never).CombinedOutput()
	if exitCode(err) != 2 || !strings.Contains(string(out), "did not answer 200") {
		t.Errorf("a URL that never answers: exit %d %q", exitCode(err), out)
	}
	if _, err := os.Stat(never); err == nil {
		t.Error("the entrypoint ran although the URL never answered")
	}
	for _, bad := range [][]string{{"--wait-url", "ftp://x/"}, {"--wait-url", "127.0.0.1:18080"}, {"--wait-url", "http://x/", "--wait-timeout", "0s"}} {
		out, err := exec.Command(binary, append(append([]string{"init", "--no-execd"}, bad...), "--", "true")...).CombinedOutput()
		if exitCode(err) != 1 || !strings.Contains(string(out), "--wait-") {
			t.Errorf("init %v: exit %d %q", bad, exitCode(err), out)
		}
	}
}

// TestInitServesExecdItself: PID 1 serves execd in its own process (one
// Go runtime per sandbox), and its reaping never takes a command from
// execd: many commands at once, some leaving orphans, all report their
// own exit code; the orphans are reaped; no second corral process runs.
func TestInitServesExecdItself(t *testing.T) {
	t.Parallel()
	addr := freeLoopbackAddr(t)
	cmd := pid1(t, "--execd-listen", addr, "--execd-state-dir", t.TempDir(), "--", "sleep", "60")
	cmd.Env = append(os.Environ(), "EXECD_ACCESS_TOKEN=init-token")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() { stopPID1(t, cmd, done) })
	x := &execd{t: t, base: "http://" + addr, token: "init-token"}
	testutil.WaitFor(t, 10*time.Second, "execd to answer", func() bool {
		res, err := http.Get(x.base + "/ping")
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == 200
	})
	errs := make(chan string, 64)
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Go(func() {
			want := i % 7
			// Every other one leaves an orphan behind for PID 1.
			script := fmt.Sprintf("exit %d", want)
			if i%2 == 1 {
				script = fmt.Sprintf("(sleep 0.1 &); exit %d", want)
			}
			_, stderr, code := x.run(script)
			if code != want {
				errs <- fmt.Sprintf("%q: exit %d (%q), want %d", script, code, stderr, want)
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	var out string
	testutil.WaitFor(t, 10*time.Second, "the orphans to be reaped", func() bool {
		out, _, _ = x.run(`grep -l '^State:.*Z' /proc/[0-9]*/status 2>/dev/null | wc -l`)
		return strings.TrimSpace(out) == "0"
	})
	out, _, _ = x.run(`for p in /proc/[0-9]*; do [ "$(readlink $p/exe)" = "$(readlink /proc/1/exe)" ] && echo ${p#/proc/}; done`)
	if f := strings.Fields(out); len(f) != 1 || f[0] != "1" {
		t.Errorf("corral processes in the sandbox: %q, want PID 1 only", out)
	}
}

// freeLoopbackAddr is a loopback address whose port was free a moment ago,
// for a corral init to bind execd on.
func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestInitSignalsReadyOnceExecdListens: with --ready-fd, PID 1 writes a
// line only once execd's port is bound (a connection made right after it
// is accepted), and closes the descriptor before the entrypoint starts.
func TestInitSignalsReadyOnceExecdListens(t *testing.T) {
	t.Parallel()
	addr := freeLoopbackAddr(t)
	mark := filepath.Join(t.TempDir(), "fd3")
	cmd := pid1(t, "--execd-listen", addr, "--execd-state-dir", t.TempDir(), "--ready-fd", "3", "--",
		"sh", "-c", "if [ -e /proc/$$/fd/3 ]; then echo leaked > "+mark+"; else echo closed > "+mark+"; fi; exec sleep 60")
	cmd.Env = append(os.Environ(), "EXECD_ACCESS_TOKEN=init-token")
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cmd.ExtraFiles = []*os.File{w}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() { stopPID1(t, cmd, done) })
	// One line (unshare, PID 1's parent here, keeps its own copy open).
	_ = r.SetReadDeadline(time.Now().Add(30 * time.Second))
	line := make([]byte, 8)
	if n, err := r.Read(line); err != nil || string(line[:n]) != "\n" {
		t.Fatalf("ready pipe gave %q, %v; want one newline", line[:n], err)
	}
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("execd's port is not bound when PID 1 says it is: %v", err)
	}
	c.Close()
	testutil.WaitFor(t, 10*time.Second, "the entrypoint to look at its descriptors", func() bool {
		b, _ := os.ReadFile(mark)
		return len(b) > 0
	})
	if b, _ := os.ReadFile(mark); string(b) != "closed\n" {
		t.Errorf("the entrypoint inherited the ready descriptor: %q", b)
	}
}
