// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"
	"go.yaml.in/yaml/v4"
	"golang.org/x/sys/unix"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/internal/testutil"
)

// cli runs the corral binary against one server, as a user would: the
// server and key come from the environment, profiles from a private file.
type cli struct {
	t   *testing.T
	env []string
}

func newCLI(t *testing.T, s *server) *cli {
	return &cli{t: t, env: append(os.Environ(),
		"CORRAL_SERVER="+s.url, "CORRAL_API_KEY="+testKey, "OPEN_SANDBOX_DOMAIN=", "OPEN_SANDBOX_API_KEY=",
		"CORRAL_CONFIG="+filepath.Join(t.TempDir(), "config.toml"))}
}

type result struct {
	stdout, stderr string
	code           int
}

func (c *cli) run(stdin io.Reader, args ...string) result {
	c.t.Helper()
	cmd := exec.CommandContext(ctx(c.t), binary, args...)
	cmd.Env = c.env
	cmd.Stdin = stdin
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		c.t.Fatalf("corral %v: %v", args, err)
	}
	return result{out.String(), errb.String(), code}
}

// ok runs a command that must succeed and returns its stdout.
func (c *cli) ok(args ...string) string {
	c.t.Helper()
	r := c.run(nil, args...)
	if r.code != 0 {
		c.t.Fatalf("corral %s: exit %d\n%s", strings.Join(args, " "), r.code, r.stderr)
	}
	return r.stdout
}

// wantError checks a failure: its exit code and a one-line message.
func (c *cli) wantError(r result, code int, contains string) {
	c.t.Helper()
	if r.code != code || !strings.Contains(r.stderr, contains) || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
		c.t.Errorf("exit %d (want %d), stderr %q (want one line with %q)", r.code, code, r.stderr, contains)
	}
}

func sha(t *testing.T, path string) [32]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return [32]byte(h.Sum(nil))
}

// TestCLIAgainstARealSandbox drives the built CLI against a sandbox of
// the native runtime: output formats, exit codes, streams, copies both
// ways, background commands and errors.
func TestCLIAgainstARealSandbox(t *testing.T) {
	requireOCI(t)
	t.Parallel()
	s := startServer(t, t.TempDir(), "--runtime", "oci")
	c := newCLI(t, s)

	id := strings.TrimSpace(c.ok("create", "--image", "host", "--wait", "-l", "team=a", "--timeout", "10m"))
	if len(id) != 36 {
		t.Fatalf("create printed %q, want an id", id)
	}
	var list []api.Sandbox
	if err := json.Unmarshal([]byte(c.ok("ls", "-o", "json")), &list); err != nil || len(list) != 1 || list[0].ID != id {
		t.Fatalf("ls -o json = %v %v", list, err)
	}
	var ylist []map[string]any
	if err := yaml.Unmarshal([]byte(c.ok("ls", "-o", "yaml", "-l", "team=a", "--state", "Running")), &ylist); err != nil || len(ylist) != 1 || ylist[0]["id"] != id {
		t.Errorf("ls -o yaml = %v %v", ylist, err)
	}
	if out := c.ok("ls", "-q", "-l", "team=b"); out != "" {
		t.Errorf("ls filtered to nothing = %q", out)
	}
	if out := c.ok("ls"); !strings.Contains(out, id) || !strings.Contains(out, "Running") || !strings.Contains(out, "team=a") {
		t.Errorf("ls table = %q", out)
	}
	var got api.Sandbox
	if err := json.Unmarshal([]byte(c.ok("get", id[:8], "-o", "json")), &got); err != nil || got.ID != id {
		t.Errorf("get by prefix = %+v %v", got, err)
	}

	// Exit codes and streams.
	r := c.run(nil, "exec", id, "--", "sh", "-c", "echo out; echo err >&2; exit 7")
	if r.code != 7 || r.stdout != "out\n" || r.stderr != "err\n" {
		t.Errorf("exec exit 7: %+v", r)
	}
	r = c.run(nil, "exec", "-w", "/tmp", "-e", "A=b c", id, "echo $A; pwd; printf 'no newline'")
	if r.code != 0 || r.stdout != "b c\n/tmp\nno newline" {
		t.Errorf("exec with -w -e: %+v", r)
	}
	r = c.run(strings.NewReader("hello\n"), "exec", "-i", id, "--", "wc", "-c")
	if r.code != 0 || strings.TrimSpace(r.stdout) != "6" {
		t.Errorf("exec -i with stdin: %+v", r)
	}
	if r = c.run(nil, "exec", "--timeout", "300ms", id, "--", "sleep", "30"); r.code == 0 {
		t.Errorf("exec past its timeout exited 0: %+v", r)
	}
	cmdID := strings.TrimSpace(c.ok("exec", "-d", id, "--", "sh", "-c", "echo first; sleep 0.5; echo second"))
	if out := c.ok("logs", "-f", id, cmdID); out != "first\nsecond\n" {
		t.Errorf("logs -f = %q", out)
	}

	// Copies: a 100 MiB file and a tree, both ways, byte for byte.
	dir := t.TempDir()
	big := filepath.Join(dir, "big.bin")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.CopyN(f, rand.Reader, 100<<20); err != nil {
		t.Fatal(err)
	}
	f.Close()
	c.ok("cp", big, id+":/work/")
	c.ok("cp", id+":/work/big.bin", filepath.Join(dir, "back.bin"))
	if sha(t, big) != sha(t, filepath.Join(dir, "back.bin")) {
		t.Error("the 100 MiB file changed on its way in and out")
	}
	if out := c.ok("exec", id, "--", "sha256sum", "/work/big.bin"); !strings.HasPrefix(out, hexOf(sha(t, big))) {
		t.Errorf("inside, the file hashes to %q", out)
	}
	tree := filepath.Join(dir, "tree")
	for _, d := range []string{"src/pkg", "empty"} {
		if err := os.MkdirAll(filepath.Join(tree, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	_ = os.WriteFile(filepath.Join(tree, "src/pkg/main.go"), []byte("package main\n"), 0o644)
	_ = os.WriteFile(filepath.Join(tree, "run.sh"), []byte("#!/bin/sh\necho run\n"), 0o755)
	_ = os.WriteFile(filepath.Join(tree, "src/secret"), []byte("s"), 0o600)
	_ = os.Symlink("src/pkg/main.go", filepath.Join(tree, "link"))
	c.ok("cp", tree, id+":/work/tree")
	if out := c.ok("exec", id, "/work/tree/run.sh; readlink /work/tree/link; stat -c %a /work/tree/src/secret"); out != "run\nsrc/pkg/main.go\n600\n" {
		t.Errorf("the tree inside: %q", out)
	}
	c.ok("cp", id+":/work/tree", filepath.Join(dir, "tree-back"))
	testutil.SameTree(t, tree, filepath.Join(dir, "tree-back"))
	c.run(strings.NewReader("from stdin"), "cp", "-", id+":/work/stdin.txt")
	if r := c.run(nil, "cp", id+":/work/stdin.txt", "-"); r.stdout != "from stdin" {
		t.Errorf("cp to stdout = %+v", r)
	}

	if out := c.ok("endpoint", id, "44772"); !strings.HasPrefix(out, "http://127.0.0.1:") {
		t.Errorf("endpoint = %q", out)
	}
	if out := c.ok("renew", id, "--timeout", "2h"); !strings.Contains(out, "expires at") {
		t.Errorf("renew = %q", out)
	}

	// Errors: one sentence with the request id, or JSON with -o json.
	c.wantError(c.run(nil, "get", "no-such-sandbox"), 1, "request id")
	r = c.run(nil, "get", "no-such-sandbox", "-o", "json")
	var je struct{ Error, Kind, Code, RequestID string }
	if err := json.Unmarshal([]byte(r.stderr), &je); err != nil || r.code != 1 || je.Kind != "not_found" || je.RequestID == "" {
		t.Errorf("-o json error = %q (%v)", r.stderr, err)
	}
	c.wantError(c.run(nil, "exec", "no-such-sandbox", "--", "true"), 125, "not found")
	c.wantError(c.run(nil, "cp", id+":/no/such/file", dir), 1, "no such file")
	c.wantError(c.run(nil, "create"), 1, "--image")
	// The server allows runc only (the default): a tier it does not allow
	// is refused, naming what it allows.
	c.wantError(c.run(nil, "create", "--image", "host", "--isolation", "runsc"), 1, "allows runc")
	if out := c.ok("get", id); !strings.Contains(out, "runc-userns") {
		t.Errorf("get = %s, want the isolation shown", out)
	}
	if r := c.run(nil, "exec", id); r.code != 1 && r.code != 2 {
		t.Errorf("exec without a command: %+v", r)
	}
	wrongKey := &cli{t: t, env: append(c.env, "CORRAL_API_KEY=ck_wrong")}
	wrongKey.wantError(wrongKey.run(nil, "ls"), 1, "--api-key")

	if out := c.ok("kill", id[:8]); strings.TrimSpace(out) != id {
		t.Errorf("kill printed %q", out)
	}
	c.wantError(c.run(nil, "get", id), 1, "not found")
}

func hexOf(b [32]byte) string { return hex.EncodeToString(b[:]) }

// TestCLIShellThroughAPseudoTerminal types into `corral shell` on a real
// pseudo-terminal: a command and its output, a resize the shell sees, and
// an exit that leaves the terminal as it found it.
func TestCLIShellThroughAPseudoTerminal(t *testing.T) {
	requireOCI(t)
	t.Parallel()
	s := startServer(t, t.TempDir(), "--runtime", "oci")
	c := newCLI(t, s)
	id := strings.TrimSpace(c.ok("create", "--image", "host", "--wait"))

	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer ptmx.Close()
	defer tty.Close()
	if err := pty.Setsize(ptmx, &pty.Winsize{Cols: 80, Rows: 24}); err != nil {
		t.Fatal(err)
	}
	before, err := unix.IoctlGetTermios(int(tty.Fd()), unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx(t), binary, "shell", id)
	cmd.Env = c.env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
	cmd.SysProcAttr = &unix.SysProcAttr{Setsid: true, Setctty: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	out := &testutil.LockedBuffer{}
	go func() { _, _ = io.Copy(out, ptmx) }()
	expect := func(want string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for !strings.Contains(out.String(), want) {
			if time.Now().After(deadline) {
				t.Fatalf("waited for %q; the terminal shows:\n%s", want, out.String())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	type_ := func(s string) {
		if _, err := ptmx.Write([]byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	type_("echo marker-$((6*7))\r")
	expect("marker-42")
	// The raw local terminal passes keys through: the remote shell echoes.
	if err := pty.Setsize(ptmx, &pty.Winsize{Cols: 132, Rows: 43}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // SIGWINCH reaches the CLI, the resize the sandbox
	type_("stty size\r")
	expect("43 132")
	type_("exit 5\r")
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 5 {
			t.Errorf("shell ended with %v, want exit status 5", err)
		}
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("the shell did not exit:\n%s", out.String())
	}
	after, err := unix.IoctlGetTermios(int(tty.Fd()), unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	if after.Lflag != before.Lflag || after.Iflag != before.Iflag || after.Oflag != before.Oflag {
		t.Errorf("the terminal was not restored: lflag %#x→%#x iflag %#x→%#x", before.Lflag, after.Lflag, before.Iflag, after.Iflag)
	}
	if before.Lflag&unix.ECHO == 0 || before.Lflag&unix.ICANON == 0 {
		t.Fatalf("the test terminal did not start in cooked mode")
	}
}

// TestCLIProfilesLifecycleAndCompletion covers what needs no real
// runtime: connection profiles, pause/resume/kill of several sandboxes,
// snapshots, and completion scripts that the shells accept.
func TestCLIProfilesLifecycleAndCompletion(t *testing.T) {
	t.Parallel()
	s := startServer(t, t.TempDir(), "--runtime", "fake")
	conf := filepath.Join(t.TempDir(), "corral", "config.toml")
	// No server or key in the environment: only the profile says where.
	c := &cli{t: t, env: append(os.Environ(), "CORRAL_SERVER=", "CORRAL_API_KEY=", "OPEN_SANDBOX_DOMAIN=", "OPEN_SANDBOX_API_KEY=", "CORRAL_CONFIG="+conf)}
	// A server that is not one: an address this test holds, where every
	// connection is closed unanswered. (Without a profile the CLI would try
	// localhost:8080, which this test does not own; cli.TestClientPrecedence
	// checks that default without dialing it.)
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dead.Close() })
	go func() {
		for {
			conn, err := dead.Accept()
			if err != nil {
				return
			}
			conn.Close()
		}
	}()
	c.ok("config", "set", "dev", "--server", s.url, "--api-key", testKey)
	c.ok("config", "set", "broken", "--server", "http://"+dead.Addr().String(), "--api-key", "ck_x")
	if fi, err := os.Stat(conf); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("profile file: %v %v (want mode 0600: it holds keys)", fi, err)
	}
	if out := c.ok("config", "ls"); !regexp.MustCompile(`(?m)^\*\s+dev\s`).MatchString(out) || strings.Contains(out, testKey) {
		t.Errorf("config ls = %q (the current profile starred, keys hidden)", out)
	}
	if out := c.ok("ls"); !strings.HasPrefix(out, "ID") {
		t.Errorf("ls through the profile = %q", out)
	}
	c.wantError(c.run(nil, "ls", "--profile", "nope"), 1, `no profile "nope"`)
	c.ok("config", "use", "broken")
	c.wantError(c.run(nil, "ls"), 1, "is the server running")
	if out := c.ok("ls", "--profile", "dev", "-q"); out != "" {
		t.Errorf("ls --profile dev = %q", out)
	}
	c.ok("config", "rm", "broken")
	c.ok("config", "use", "dev")

	a := strings.TrimSpace(c.ok("create", "--image", "fake:ok", "-e", "K=V", "--cpu", "1", "--memory", "256Mi", "--entrypoint", `["sleep","1d"]`))
	b := strings.TrimSpace(c.ok("create", "--image", "fake:ok", "--timeout", "0"))
	if out := c.ok("pause", a, b); out != a+"\n"+b+"\n" {
		t.Errorf("pause = %q", out)
	}
	if out := c.ok("ls", "--state", "Paused", "-q"); strings.Count(out, "\n") != 2 {
		t.Errorf("paused = %q", out)
	}
	c.wantError(c.run(nil, "exec", a, "--", "true"), 125, "Paused")
	c.ok("resume", a, b)
	var sb api.Sandbox
	if err := json.Unmarshal([]byte(c.ok("get", a, "-o", "json")), &sb); err != nil || sb.Status.State != api.StateRunning || len(sb.Entrypoint) != 2 || sb.ExpiresAt == nil {
		t.Errorf("get = %+v %v", sb, err)
	}
	if out := c.ok("diagnostics", "logs", a); out != "$ sleep 1d\n" {
		t.Errorf("diagnostics logs = %q", out)
	}
	if out := c.ok("diagnostics", "events", a, "--scope", "lifecycle"); !strings.Contains(out, " paused ") || !strings.Contains(out, " resumed ") {
		t.Errorf("diagnostics events = %q", out)
	}
	c.wantError(c.run(nil, "diagnostics", "events", a, "--scope", "process"), 1, "scope process: this server has no events of that scope")
	snap := strings.TrimSpace(c.ok("snapshot", "create", a, "--name", "first"))
	if out := c.ok("snapshot", "ls", "--sandbox", a); !strings.Contains(out, snap) || !strings.Contains(out, "first") {
		t.Errorf("snapshot ls = %q", out)
	}
	testutilWaitSnapshotCLI(t, c, snap)
	from := strings.TrimSpace(c.ok("create", "--snapshot", snap))
	c.ok("snapshot", "rm", snap)
	// kill goes on past a failure and reports it.
	r := c.run(nil, "kill", a, "no-such-sandbox", b, from)
	if r.code != 1 || strings.Count(r.stdout, "\n") != 3 || !strings.Contains(r.stderr, "no-such-sandbox") {
		t.Errorf("kill with one bad id = %+v", r)
	}
	if out := c.ok("ls", "-q"); out != "" {
		t.Errorf("after kill: %q", out)
	}

	for _, sh := range []struct{ name, check string }{{"bash", "bash -n"}, {"zsh", "zsh -n"}, {"fish", "fish -n"}} {
		script := c.ok("completion", sh.name)
		if !strings.Contains(script, "exec") || !strings.Contains(script, "ls -q") {
			t.Errorf("%s completion lacks commands or id completion", sh.name)
		}
		bin := strings.Fields(sh.check)[0]
		if _, err := exec.LookPath(bin); err != nil {
			continue // only the shells this machine has can check syntax
		}
		chk := exec.Command(bin, "-n")
		chk.Stdin = strings.NewReader(script)
		if out, err := chk.CombinedOutput(); err != nil {
			t.Errorf("%s rejects its completion script: %v\n%s", sh.name, err, out)
		}
	}
}

// testutilWaitSnapshotCLI waits for a snapshot to be Ready.
func testutilWaitSnapshotCLI(t *testing.T, c *cli, id string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		var sn []api.Snapshot
		_ = json.Unmarshal([]byte(c.ok("snapshot", "ls", "-o", "json")), &sn)
		for _, s := range sn {
			if s.ID == id && s.Status.State == api.SnapshotReady {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("snapshot %s never became Ready", id)
}

// TestCLIRejectsBadInput: each mistaken invocation is refused with a
// non-zero exit and one sentence that says what is wrong, before anything
// is created.
func TestCLIRejectsBadInput(t *testing.T) {
	t.Parallel()
	s := startServer(t, t.TempDir(), "--runtime", "fake")
	c := newCLI(t, s)
	id := strings.TrimSpace(c.ok("create", "--image", "fake:ok"))
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"exec", "-u", "nobody", id, "--", "true"}, 1, "numeric UID"},
		{[]string{"exec", id}, 1, "give a sandbox id and a command"},
		{[]string{"cp", "./a", "./b"}, 1, "exactly one of"},
		{[]string{"cp", id + ":/a", id + ":/b"}, 1, "exactly one of"},
		{[]string{"create", "--image", "fake:ok", "--entrypoint", `["sleep",`}, 1, "JSON array"},
		{[]string{"create", "--image", "fake:ok", "--snapshot", "x"}, 1, "--image or --snapshot"},
		{[]string{"create", "--image", "fake:ok", "--timeout", "-5m"}, 1, "negative"},
		{[]string{"create", "--image", "fake:ok", "-e", "NOEQUALS"}, 2, "KEY=VALUE"},
		{[]string{"ls", "-o", "xml"}, 1, "want one of"},
		{[]string{"endpoint", id, "http"}, 1, "not a number"},
		{[]string{"renew", id, "--timeout", "0s"}, 1, "positive"},
		{[]string{"config", "set", "p"}, 1, "--server"},
		{[]string{"config", "use", "no-such-profile"}, 1, "no profile"},
		{[]string{"completion", "powershell"}, 1, "unknown shell"},
		{[]string{"egress"}, 1, "--netns is required"},
		{[]string{"egress", "--netns", "/nonexistent", "--upstream", "dns.example"}, 1, "want ip:port"},
		{[]string{"egress", "--netns", "/nonexistent", "--deny", "10.0.0.0/40", "--upstream", "127.0.0.1:53"}, 1, "want a CIDR"},
		{[]string{"egress", "--netns", "/nonexistent", "--token", "t", "--policy", `{"egress":[{"action":"allow","target":"http://x"}]}`, "--upstream", "127.0.0.1:53"}, 1, "egress[0]"},
		{[]string{"egress", "--netns", "/nonexistent", "--upstream", "127.0.0.1:53"}, 1, "a token is required"},
		{[]string{"egress", "--netns", "self", "--token", "t0123456789abcdef", "--inbound", "44772,"}, 1, "--inbound"},
		{[]string{"egress", "--netns", "/nonexistent", "--token", "t0123456789abcdef", "--inbound", "44772"}, 1, "--inbound needs --netns self"},
		{[]string{"egress", "--netns", "self", "--token", "t0123456789abcdef", "--api-tls-cert", "/nonexistent"}, 1, "go together"},
		{[]string{"egress", "--netns", "self", "--token", "t0123456789abcdef", "--api-tls-cert", "/nonexistent", "--api-tls-key", "/nonexistent"}, 1, "--api-tls-cert"},
		{[]string{"init", "--isolate-network", "44772,x", "--", "true"}, 1, "--isolate-network"},
		{[]string{"init", "--exit-fd", "1", "--", "true"}, 1, "--exit-fd 1: want a descriptor of 3 or more"},
		{[]string{"init", "--exit-fd", "97", "--", "true"}, 1, "--exit-fd 97: not an open descriptor"},
		{[]string{"init", "--console-limit", "-1", "--", "true"}, 1, "--console-limit"},
		{[]string{"execd", "--listen-fd", "2"}, 1, "--listen-fd 2"},
		{[]string{"egress", "--netns", "self", "--token", "t0123456789abcdef", "--log-limit", "-5"}, 1, "--log-limit"},
		{[]string{"nosuchcommand"}, 2, "unknown command"},
	} {
		r := c.run(nil, tc.args...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.msg) {
			t.Errorf("corral %s: exit %d, stderr %q; want exit %d mentioning %q", strings.Join(tc.args, " "), r.code, r.stderr, tc.code, tc.msg)
		}
	}
	if out := c.ok("ls", "-q"); strings.TrimSpace(out) != id {
		t.Errorf("a refused command created something: %q", out)
	}
}
