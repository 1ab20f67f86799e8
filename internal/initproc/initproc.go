// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

// Package initproc is PID 1 of a sandbox (`corral init`): it starts the
// user's entrypoint and runs the in-sandbox daemon in the same process,
// reaps every zombie (orphans included), forwards signals to the
// entrypoint, runs the daemon again if it returns, and exits with the
// entrypoint's exit code after stopping the daemon. internal/cli runs it
// as `corral init`; the runtimes (oci, docker, the Kubernetes
// controller) build its command line with Options.Argv and hand a warm
// sandbox its start with SendStart.
//
// One process serves both roles because each Go process costs an idle
// sandbox a runtime: 2 to 3 MiB and about six tasks (docs/benchmarks.md,
// density). Reaping then must not take the daemon's children: PID 1 runs
// on the process's main thread, which starts the entrypoint and is the
// one orphans are given to, and waits with __WNOTHREAD, which collects
// only that thread's children; the daemon starts its commands from other
// threads and waits for them itself.
package initproc

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/corral-dev/corral/internal/safefile"
)

// Config configures PID 1.
type Config struct {
	// Entrypoint is the user's program and its arguments.
	Entrypoint []string
	// Env is the entrypoint's environment.
	Env []string
	// Dir is the entrypoint's working directory ("" keeps the current one).
	Dir string
	// Daemon is the in-sandbox daemon, run in this process from before
	// the entrypoint starts until PID 1 stops (its context then ends and
	// it has StopGrace to return); nil runs none. It logs to stderr, the
	// console. If it returns earlier it is run again, with backoff. It
	// must start its processes from goroutines other than Run's.
	Daemon func(ctx context.Context, stderr io.Writer) error
	// Credential runs the entrypoint as another user when set.
	Credential *syscall.Credential
	// ExitFile, when set, receives the entrypoint's exit code (decimal,
	// a newline) before PID 1 exits: the runtime outside reads it, as it
	// is not the parent of PID 1. It is a descriptor the runtime passed
	// in, of a file outside the sandbox's file systems, so nothing in the
	// sandbox can put a link or a FIFO where the runtime reads.
	ExitFile *os.File
	// ConsoleLimit, when positive and PID 1's stdout is a regular file
	// (the runtime's console log), bounds that file: the entrypoint and
	// the daemon print into a pipe PID 1 copies from, and past the limit
	// the oldest output is dropped with a line that says so.
	ConsoleLimit int64
	// ConsoleRelay, when PID 1's stdout is a pipe the runtime drains on
	// the host (and bounds there), interposes a pipe the same way and
	// relays to it; while nothing reads it (the runtime restarting) the
	// output is dropped, and no program in the sandbox gets SIGPIPE for
	// it.
	ConsoleRelay bool
	// StartFIFO, when set, holds the entrypoint back: PID 1 starts the
	// daemon, then waits for one JSON Start written to this FIFO (a
	// warm-pool sandbox waiting to be claimed); Entrypoint is then unused.
	StartFIFO string
	// StartFile, when set, holds the entrypoint back like StartFIFO, but
	// PID 1 polls for a regular file the runtime renames into place
	// (SendStartFile): under gVisor, a FIFO shared with the host can lose
	// what the host writes before PID 1 opens it.
	StartFile string
	// WaitURL, when set, holds the entrypoint back until an HTTP GET of it
	// answers 200 (the daemon runs meanwhile): a Docker sandbox on a
	// remote engine waits for its egress sidecar's rules this way.
	WaitURL string
	// WaitTimeout bounds the wait for WaitURL (default 2 minutes); PID 1
	// then exits, and the entrypoint never runs.
	WaitTimeout time.Duration
	// StopGrace is how long the daemon gets to stop (default 2s).
	StopGrace time.Duration
	Stderr    io.Writer
	Logger    *slog.Logger

	// stdout and stderr are what the entrypoint and the daemon print to:
	// PID 1's own, or the console pipe.
	stdout, stderr *os.File
}

// Start is what a claim writes to a waiting PID 1's StartFIFO.
type Start struct {
	// Args is the entrypoint and its arguments.
	Args []string `json:"args"`
	// Env is added to the entrypoint's environment (KEY=VALUE).
	Env []string `json:"env,omitempty"`
}

// Adoption is what `corral adopt` hands a warm sandbox, as JSON in
// $CORRAL_ADOPT: the Kubernetes controller runs it through a warm pool
// pod's execd when a Sandbox adopts the pod.
type Adoption struct {
	// Token becomes execd's access token.
	Token string `json:"token"`
	// Env (KEY=VALUE) is added to the entrypoint's and every command's
	// environment.
	Env []string `json:"env,omitempty"`
	// Args is the entrypoint.
	Args []string `json:"args"`
}

// Exit codes for an entrypoint that cannot start, as shells use them.
const (
	ExitNotFound      = 127
	ExitNotExecutable = 126
)

// forwarded are the signals passed on to the entrypoint.
func forwarded() []os.Signal {
	return []os.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1,
		syscall.SIGUSR2, syscall.SIGWINCH, syscall.SIGCONT, syscall.SIGTSTP}
}

// resolve finds the entrypoint's program, the way a shell would.
func resolve(prog string, env []string) (string, int, error) {
	path := prog
	if !strings.Contains(prog, "/") {
		p, err := lookPath(prog, env)
		if err != nil {
			return "", ExitNotFound, fmt.Errorf("entrypoint %q: not found in PATH", prog)
		}
		path = p
	}
	fi, err := os.Stat(path)
	if err != nil {
		return "", ExitNotFound, fmt.Errorf("entrypoint %q: %v", prog, err)
	}
	if fi.IsDir() || fi.Mode()&0o111 == 0 {
		return "", ExitNotExecutable, fmt.Errorf("entrypoint %q: not an executable file", prog)
	}
	return path, 0, nil
}

func lookPath(prog string, env []string) (string, error) {
	pathVar := "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			pathVar = v
		}
	}
	for _, dir := range filepath.SplitList(pathVar) {
		p := filepath.Join(dir, prog)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", exec.ErrNotFound
}

// Run is PID 1's life. It returns the exit code for the process.
func Run(cfg Config) int {
	if cfg.StopGrace <= 0 {
		cfg.StopGrace = 2 * time.Second
	}
	cfg.stdout, cfg.stderr = os.Stdout, os.Stderr
	if cfg.Stderr == nil {
		cfg.Stderr = os.Stderr
	}
	if cfg.WaitTimeout <= 0 {
		cfg.WaitTimeout = 2 * time.Minute
	}
	if len(cfg.Entrypoint) == 0 && cfg.StartFIFO == "" && cfg.StartFile == "" {
		fmt.Fprintln(cfg.Stderr, "corral init: no entrypoint given (usage: corral init [flags] -- PROGRAM [ARGS...])")
		return 2
	}
	// The entrypoint and the orphans must be children of the thread that
	// reaps (see the package doc).
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if unix.Gettid() != os.Getpid() {
		fmt.Fprintln(cfg.Stderr, "corral init: not on the process's main thread (the program must lock it in an init function)")
		return 2
	}
	// Nothing in the sandbox may read PID 1's memory, environment or
	// descriptors (the exit file among them): with no CAP_SYS_PTRACE
	// there, a process that is not dumpable is out of reach.
	_ = unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	if cfg.ExitFile != nil {
		syscall.CloseOnExec(int(cfg.ExitFile.Fd()))
	}
	var out *console
	if cfg.ConsoleLimit > 0 || cfg.ConsoleRelay {
		var err error
		if out, err = startConsole(os.Stdout, cfg.ConsoleLimit, cfg.ConsoleRelay); err != nil {
			fmt.Fprintln(cfg.Stderr, "corral init: console: "+err.Error())
		} else if out != nil {
			cfg.stdout, cfg.stderr = out.w, out.w
			if cfg.Stderr == os.Stderr {
				cfg.Stderr = out.w
			}
		}
	}
	code := run(cfg)
	if out != nil {
		out.close()
	}
	if cfg.ExitFile != nil {
		writeExit(cfg.ExitFile, code)
	}
	return code
}

// writeExit records the exit code in f in one write, so a reader sees
// either nothing or the whole code. A file gets it in place; a pipe (the
// native runtime's) gets a line, and while no server reads the pipe (one
// restarting) PID 1 waits for the next rather than lose the code.
func writeExit(f *os.File, code int) {
	b := []byte(strconv.Itoa(code) + "\n")
	if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeNamedPipe != 0 {
		// Caught, so a write without a reader fails EPIPE instead.
		signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
		for {
			_, err := f.Write(b)
			if !errors.Is(err, syscall.EPIPE) {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	if _, err := f.WriteAt(b, 0); err == nil {
		_ = f.Truncate(int64(len(b)))
	}
}

func run(cfg Config) int {
	// Outside a PID namespace we are not PID 1; becoming a subreaper makes
	// orphans ours anyway.
	if os.Getpid() != 1 {
		_ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
	}
	sigs := make(chan os.Signal, 32)
	signal.Notify(sigs, append(forwarded(), syscall.SIGCHLD)...)
	defer signal.Stop(sigs)

	p := &pid1{cfg: cfg}
	if cfg.WaitURL != "" {
		p.startDaemon()
		if _, code, ok := p.hold(sigs, p.waitURL); !ok {
			p.stopDaemon(sigs)
			return code
		}
	}
	if cfg.StartFIFO != "" || cfg.StartFile != "" {
		p.startDaemon()
		read := p.readStart
		if cfg.StartFile != "" {
			read = p.pollStart
		}
		st, code, ok := p.hold(sigs, read)
		if !ok {
			p.stopDaemon(sigs)
			return code
		}
		cfg.Entrypoint, cfg.Env = st.Args, append(append([]string(nil), cfg.Env...), st.Env...)
		p.cfg = cfg
	}
	path, code, err := resolve(cfg.Entrypoint[0], cfg.Env)
	if err != nil {
		fmt.Fprintln(cfg.Stderr, "corral init: "+err.Error())
		p.stopDaemon(sigs)
		return code
	}
	p.startDaemon()
	var sys *syscall.SysProcAttr
	if cfg.Credential != nil {
		sys = &syscall.SysProcAttr{Credential: cfg.Credential}
	}
	entry, err := os.StartProcess(path, cfg.Entrypoint, &os.ProcAttr{
		Dir: cfg.Dir, Env: cfg.Env, Files: []*os.File{os.Stdin, cfg.stdout, cfg.stderr}, Sys: sys,
	})
	if err != nil {
		fmt.Fprintln(cfg.Stderr, "corral init: start entrypoint: "+err.Error())
		p.stopDaemon(sigs)
		if errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.ENOEXEC) {
			return ExitNotExecutable
		}
		return ExitNotFound
	}
	for {
		sig := <-sigs
		if sig != syscall.SIGCHLD {
			_ = entry.Signal(sig)
			continue
		}
		if exit, done := p.reap(entry.Pid); done {
			p.stopDaemon(sigs)
			return exit
		}
	}
}

// hold runs wait while reaping and keeping the daemon alive. A
// terminating signal first ends PID 1 (ok false), as does a failed wait.
func (p *pid1) hold(sigs <-chan os.Signal, wait func() (Start, error)) (Start, int, bool) {
	type result struct {
		st  Start
		err error
	}
	done := make(chan result, 1)
	go func() {
		st, err := wait()
		done <- result{st, err}
	}()
	for {
		select {
		case r := <-done:
			if r.err != nil {
				fmt.Fprintln(p.cfg.Stderr, "corral init: "+r.err.Error())
				return Start{}, 2, false
			}
			return r.st, 0, true
		case sig := <-sigs:
			if sig == syscall.SIGCHLD {
				p.reap(-1)
				continue
			}
			if sig == syscall.SIGTERM || sig == syscall.SIGINT || sig == syscall.SIGHUP || sig == syscall.SIGQUIT {
				return Start{}, 128 + int(sig.(syscall.Signal)), false
			}
		}
	}
}

// readStart reads the Start from the FIFO; bad requests are skipped.
func (p *pid1) readStart() (Start, error) {
	for {
		f, err := os.OpenFile(p.cfg.StartFIFO, os.O_RDONLY, 0)
		if err != nil {
			return Start{}, fmt.Errorf("wait for the start request: %w", err)
		}
		var st Start
		err = json.NewDecoder(f).Decode(&st)
		f.Close()
		if err == nil && len(st.Args) > 0 {
			return st, nil
		}
		fmt.Fprintf(p.cfg.Stderr, "corral init: a bad start request (%v); waiting for another\n", err)
	}
}

// pollStart waits for the Start the runtime renames into StartFile; a
// bad one is reported once and waited past (the runtime replaces it).
func (p *pid1) pollStart() (Start, error) {
	delay := time.Millisecond
	var bad []byte
	reported := ""
	for {
		b, err := readSmallFile(p.cfg.StartFile, 1<<20)
		switch {
		case err == nil && !bytes.Equal(b, bad):
			var st Start
			if err := json.Unmarshal(b, &st); err == nil && len(st.Args) > 0 {
				return st, nil
			}
			bad = b
			fmt.Fprintf(p.cfg.Stderr, "corral init: a bad start request (%v); waiting for another\n", err)
		case err != nil && !errors.Is(err, fs.ErrNotExist) && err.Error() != reported:
			// A link or a directory where the request goes: not taken.
			reported = err.Error()
			fmt.Fprintf(p.cfg.Stderr, "corral init: a bad start request (%v); waiting for another\n", err)
		}
		time.Sleep(delay)
		delay = min(delay*2, 10*time.Millisecond)
	}
}

// readSmallFile reads a regular file of at most limit bytes, without
// following a link at its name. Not safefile's reader: that one needs
// openat2, which gVisor's kernel, where this runs, does not have.
func readSmallFile(path string, limit int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil, errors.New("not a regular file")
	}
	return io.ReadAll(io.LimitReader(f, limit))
}

// SendStartFile hands st to a PID 1 polling for name in dir
// (Config.StartFile): written beside it, then renamed there, so PID 1
// reads all of it or nothing.
func SendStartFile(dir, name string, st Start) error {
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	return safefile.WriteFileAtomic(dir, name, b, 0o644)
}

// waitURL polls WaitURL until it answers 200 or WaitTimeout passes.
func (p *pid1) waitURL() (Start, error) {
	// A readiness gate: what answers matters, not who (nothing but PID 1
	// and the daemon runs yet), so an https URL's certificate is not
	// checked.
	hc := &http.Client{Timeout: time.Second, Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true,
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	deadline := time.Now().Add(p.cfg.WaitTimeout)
	delay := 5 * time.Millisecond
	var last string
	for {
		res, err := hc.Get(p.cfg.WaitURL)
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return Start{}, nil
			}
			last = res.Status
		} else {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			return Start{}, fmt.Errorf("%s did not answer 200 within %v (last: %s); the entrypoint was not started", p.cfg.WaitURL, p.cfg.WaitTimeout, last)
		}
		time.Sleep(delay)
		delay = min(2*delay, 20*time.Millisecond)
	}
}

type pid1 struct {
	cfg Config
	// stop ends the daemon's context; done is closed once it has
	// returned for good. Both are nil while no daemon runs.
	stop context.CancelFunc
	done chan struct{}
}

// startDaemon runs the daemon in the background, again after each early
// return, with a backoff that grows while it keeps failing.
func (p *pid1) startDaemon() {
	if p.cfg.Daemon == nil || p.done != nil {
		return
	}
	ctx, stop := context.WithCancel(context.Background())
	p.stop, p.done = stop, make(chan struct{})
	// Run changes p.cfg once a start request arrives: the goroutine keeps
	// its own copies.
	daemon, out, log, done := p.cfg.Daemon, p.cfg.stderr, p.cfg.Stderr, p.done
	go func() {
		defer close(done)
		restarts, lastFail := 0, time.Time{}
		for {
			err := daemon(ctx, out)
			if ctx.Err() != nil {
				return
			}
			if time.Since(lastFail) < 10*time.Second {
				restarts++
			} else {
				restarts = 0
			}
			lastFail = time.Now()
			fmt.Fprintf(log, "corral init: the daemon stopped (%v); starting it again\n", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(min(time.Duration(restarts)*200*time.Millisecond, 5*time.Second)):
			}
		}
	}()
}

// reap collects every exited child of PID 1's thread: the entrypoint and
// the orphans, never the daemon's commands (the package doc says why).
// It reports the entrypoint's exit code once the entrypoint has exited.
func (p *pid1) reap(entryPID int) (int, bool) {
	exit, done := 0, false
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG|unix.WNOTHREAD, nil)
		if err != nil || pid <= 0 {
			return exit, done
		}
		if pid == entryPID {
			exit, done = statusCode(ws), true
		}
	}
}

// stopDaemon ends the daemon's context and waits for it to return, at
// most the grace period (PID 1's exit then ends whatever is left),
// reaping meanwhile.
func (p *pid1) stopDaemon(sigs <-chan os.Signal) {
	if p.done == nil {
		return
	}
	p.stop()
	deadline := time.NewTimer(p.cfg.StopGrace)
	defer deadline.Stop()
	for {
		select {
		case <-p.done:
			return
		case sig := <-sigs:
			if sig == syscall.SIGCHLD {
				p.reap(-1)
			}
		case <-deadline.C:
			fmt.Fprintf(p.cfg.Stderr, "corral init: the daemon did not stop within %v\n", p.cfg.StopGrace)
			return
		}
	}
}

func statusCode(ws syscall.WaitStatus) int {
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}

// SendStart writes the Start to PID 1's FIFO, waiting briefly for PID 1
// to open it.
func SendStart(ctx context.Context, dir *os.Root, name string, st Start) error {
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		f, err := dir.OpenFile(name, os.O_WRONLY|syscall.O_NONBLOCK, 0)
		if err == nil {
			if fi, serr := f.Stat(); serr != nil || fi.Mode()&fs.ModeNamedPipe == 0 {
				f.Close()
				return errors.New("the start FIFO is not a FIFO")
			}
			_ = syscall.SetNonblock(int(f.Fd()), false)
			_, err = f.Write(b)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			return err
		}
		if !errors.Is(err, syscall.ENXIO) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Millisecond):
		}
	}
}
