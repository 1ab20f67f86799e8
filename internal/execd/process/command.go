// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

// Package process runs execd's commands and sessions: it starts them in
// their own process groups, keeps their output in an on-disk log any
// number of readers can follow from a byte offset, and retains finished
// commands within count, size and age limits. It also runs PTY sessions:
// interactive shells on a terminal or on pipes, one viewer at a time, with
// the last MiB of output kept in memory for a viewer that reconnects; the
// WebSocket protocol that carries them is execd's.
package process

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"
)

// settleIdle is how long output may stay quiet after the command's main
// process exits before its stream ends anyway: children it left running in
// the background may hold its pipes open for ever.
const settleIdle = 25 * time.Millisecond

// Spec describes a command to start.
type Spec struct {
	// Script is run by the shell (bash -c, or sh -c without bash).
	Script string
	// Argv, when set, is run directly instead of Script.
	Argv []string
	Dir  string
	// Env is the complete environment.
	Env []string
	// Credential switches user and groups when set.
	Credential *syscall.Credential
	// Timeout kills the process group after this long; 0 means never.
	Timeout time.Duration
	// ExtraFiles are passed as fds 3, 4, ...
	ExtraFiles []*os.File
	// Background is recorded for the status and logs endpoints.
	Background bool
	// Stdin keeps a pipe to the process's standard input open for
	// [Command.WriteStdin] (else stdin is /dev/null).
	Stdin bool
	// Terminal, when set, runs the process as the leader of a session
	// on a new pseudo-terminal of that size: its output is one stream
	// (Stdout), its input is the terminal's, and it can be resized.
	Terminal *Size
}

// Size is a terminal's size in characters.
type Size struct{ Cols, Rows uint16 }

// Command is one started process and its retained output.
type Command struct {
	ID         string
	Content    string
	Background bool
	StartedAt  time.Time
	Log        *Log
	dir        string

	cmd *exec.Cmd
	// pipes are the read ends of stdout and stderr (the terminal's
	// master alone for a terminal).
	pipes []*os.File
	// stdin is the write end of the input pipe, or the terminal's
	// master; nil when input is /dev/null. master is the terminal's.
	stdin  *os.File
	master *os.File
	// exited is closed when the main process has been reaped.
	exited chan struct{}
	// settled is closed when the output of the main process is all in Log.
	settled chan struct{}

	// mu guards the fields below.
	mu         sync.Mutex
	exitCode   int
	exitErr    string
	finishedAt time.Time
	timedOut   bool
	readers    sync.WaitGroup
}

// Exit is how a command ended.
type Exit struct {
	Code       int
	Err        string
	FinishedAt time.Time
	TimedOut   bool
}

// Done returns a channel closed when the main process has exited and its
// output is retained.
func (c *Command) Done() <-chan struct{} { return c.settled }

// Running reports whether the main process is still running.
func (c *Command) Running() bool {
	select {
	case <-c.exited:
		return false
	default:
		return true
	}
}

// Exit returns how the command ended; ok is false while it runs.
func (c *Command) Exit() (Exit, bool) {
	if c.Running() {
		return Exit{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return Exit{Code: c.exitCode, Err: c.exitErr, FinishedAt: c.finishedAt, TimedOut: c.timedOut}, true
}

// Signal sends sig to the command's process group.
func (c *Command) Signal(sig syscall.Signal) error {
	if !c.Running() {
		return nil
	}
	err := syscall.Kill(-c.cmd.Process.Pid, sig)
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return err
}

// Pid returns the process id of the command's main process (0 if it
// never started).
func (c *Command) Pid() int {
	if c.cmd == nil || c.cmd.Process == nil {
		return 0
	}
	return c.cmd.Process.Pid
}

// ErrNoStdin is returned for input to a command started without it.
var ErrNoStdin = errors.New("the process was not started with its standard input open")

// WriteStdin writes p to the command's standard input (its terminal for
// a terminal command).
func (c *Command) WriteStdin(p []byte) error {
	c.mu.Lock()
	in := c.stdin
	c.mu.Unlock()
	if in == nil {
		return ErrNoStdin
	}
	_, err := in.Write(p)
	return err
}

// CloseStdin closes the command's standard input; the process reads end
// of file. A terminal's input cannot be closed (send Ctrl-D instead).
func (c *Command) CloseStdin() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.master != nil {
		return errors.New("a terminal's input cannot be closed; write Ctrl-D (0x04) to it instead")
	}
	if c.stdin == nil {
		return ErrNoStdin
	}
	err := c.stdin.Close()
	c.stdin = nil
	return err
}

// Terminal reports whether the command runs on a terminal of its own.
func (c *Command) Terminal() bool { return c.master != nil }

// Resize sets the size of the command's terminal.
func (c *Command) Resize(sz Size) error {
	if c.master == nil {
		return errors.New("the process has no terminal to resize")
	}
	if sz.Cols == 0 || sz.Rows == 0 {
		return errors.New("a terminal needs at least one column and one row")
	}
	return setSize(c.master, &unix.Winsize{Col: sz.Cols, Row: sz.Rows})
}

// Interrupt sends SIGTERM to the process group, then SIGKILL after grace,
// and returns once the main process has exited (or ctx ends).
func (c *Command) Interrupt(ctx context.Context, grace time.Duration) error {
	if err := c.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-c.exited:
		return nil
	case <-t.C:
	case <-ctx.Done():
		return ctx.Err()
	}
	if err := c.Signal(syscall.SIGKILL); err != nil {
		return err
	}
	select {
	case <-c.exited:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// newID returns 32 hex characters, the form OpenSandbox command ids take.
func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Retention bounds the finished commands a Table keeps.
type Retention struct {
	// MaxCommands is how many finished commands are kept (default 1000).
	MaxCommands int
	// MaxBytes bounds the output kept for finished commands (default 1 GiB).
	MaxBytes int64
	// MaxAge drops finished commands older than this (default 24h).
	MaxAge time.Duration
}

// Table starts commands and keeps them, with their output, for the
// status and logs endpoints, under a retention policy.
type Table struct {
	dir   string
	shell []string
	ret   Retention

	// mu guards cmds.
	mu   sync.Mutex
	cmds map[string]*Command
	// wg owns the goroutines that copy output and reap processes.
	wg sync.WaitGroup
	// spare holds output directories prepared ahead of time: creating a
	// directory and two files costs more than starting a process on some
	// disks, so it is kept off the path of a command start.
	spare chan slot
	kick  chan struct{}
}

// slot is a prepared command directory with its empty log.
type slot struct {
	id  string
	dir string
	log *Log
}

// spareSlots is how many prepared directories a Table keeps.
const spareSlots = 8

// NewTable keeps command output under dir.
func NewTable(dir string, ret Retention) (*Table, error) {
	if ret.MaxCommands <= 0 {
		ret.MaxCommands = 1000
	}
	if ret.MaxBytes <= 0 {
		ret.MaxBytes = 1 << 30
	}
	if ret.MaxAge <= 0 {
		ret.MaxAge = 24 * time.Hour
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	t := &Table{dir: dir, shell: Shell(), ret: ret, cmds: map[string]*Command{},
		spare: make(chan slot, spareSlots), kick: make(chan struct{}, 1)}
	// One slot is ready before the first command arrives; the rest are
	// made in the background once commands start using them, so that a
	// freshly started sandbox's first command does not compete with them
	// for the disk.
	if s, err := t.newSlot(); err == nil {
		t.spare <- s
	}
	return t, nil
}

// newSlot prepares a command directory and its log.
func (t *Table) newSlot() (slot, error) {
	id := newID()
	dir := filepath.Join(t.dir, id)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return slot{}, err
	}
	log, err := CreateLog(dir)
	if err != nil {
		_ = os.RemoveAll(dir)
		return slot{}, err
	}
	return slot{id: id, dir: dir, log: log}, nil
}

// takeSlot returns a prepared slot, or prepares one now if none is left.
func (t *Table) takeSlot() (slot, error) {
	select {
	case s := <-t.spare:
		select {
		case t.kick <- struct{}{}:
		default:
		}
		return s, nil
	default:
	}
	select {
	case t.kick <- struct{}{}:
	default:
	}
	return t.newSlot()
}

// refill keeps the spare slots full until ctx ends, then removes them.
func (t *Table) refill(ctx context.Context) {
	defer func() {
		for {
			select {
			case s := <-t.spare:
				_ = s.log.Close()
				_ = os.RemoveAll(s.dir)
			default:
				return
			}
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.kick:
		}
		for len(t.spare) < cap(t.spare) {
			s, err := t.newSlot()
			if err != nil {
				break
			}
			select {
			case t.spare <- s:
			default:
				_ = s.log.Close()
				_ = os.RemoveAll(s.dir)
			}
		}
	}
}

// Shell returns the shell that runs scripts: bash if it is installed,
// otherwise sh.
func Shell() []string {
	if p, err := exec.LookPath("bash"); err == nil {
		return []string{p, "-c"}
	}
	return []string{"/bin/sh", "-c"}
}

// Get returns a command by id.
func (t *Table) Get(id string) (*Command, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	c, ok := t.cmds[id]
	return c, ok
}

// List returns the kept commands, the newest first.
func (t *Table) List() []*Command {
	t.mu.Lock()
	out := make([]*Command, 0, len(t.cmds))
	for _, c := range t.cmds {
		out = append(out, c)
	}
	t.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if !out[i].StartedAt.Equal(out[j].StartedAt) {
			return out[i].StartedAt.After(out[j].StartedAt)
		}
		return out[i].ID < out[j].ID
	})
	return out
}

// Start starts a command. Its output goes to its Log; stdin is /dev/null.
// The returned command is registered before Start returns.
func (t *Table) Start(spec Spec) (_ *Command, err error) {
	sl, err := t.takeSlot()
	if err != nil {
		return nil, err
	}
	id, dir, log := sl.id, sl.dir, sl.log
	defer func() {
		if err != nil {
			_ = log.Close()
			_ = os.RemoveAll(dir)
		}
	}()
	argv := spec.Argv
	if argv == nil {
		argv = append(append([]string(nil), t.shell...), spec.Script)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir, cmd.Env, cmd.ExtraFiles = spec.Dir, spec.Env, spec.ExtraFiles
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: spec.Credential}
	var pipes []*os.File
	var stdin, master *os.File
	var startErr error
	switch {
	case spec.Terminal != nil:
		// The session leader of its own terminal; its session is its
		// process group, so signals to the group reach it.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Credential: spec.Credential}
		master, startErr = pty.StartWithAttrs(cmd, &pty.Winsize{Cols: spec.Terminal.Cols, Rows: spec.Terminal.Rows}, cmd.SysProcAttr)
		if startErr == nil {
			pipes, stdin = []*os.File{master}, master
		}
	default:
		var inR *os.File
		if spec.Stdin {
			if inR, stdin, err = os.Pipe(); err != nil {
				return nil, fmt.Errorf("%w: %w", errNoPipes, err)
			}
			cmd.Stdin = inR
		}
		var outR, errR *os.File
		outR, errR, startErr = startWithPipes(cmd, growPipe)
		if inR != nil {
			_ = inR.Close()
		}
		if errors.Is(startErr, errNoPipes) {
			if stdin != nil {
				_ = stdin.Close()
			}
			return nil, startErr
		}
		if startErr == nil {
			pipes = []*os.File{outR, errR}
		} else if stdin != nil {
			_ = stdin.Close()
			stdin = nil
		}
	}
	content := spec.Script
	if spec.Argv != nil {
		content = strings.Join(spec.Argv, " ")
	}
	c := &Command{ID: id, Content: content, Background: spec.Background, StartedAt: time.Now().UTC(), Log: log, dir: dir,
		cmd: cmd, pipes: pipes, stdin: stdin, master: master, exited: make(chan struct{}), settled: make(chan struct{})}
	if startErr != nil {
		c.pipes = nil
		log.Finish()
		c.exitCode, c.exitErr, c.finishedAt = 127, startErr.Error(), time.Now().UTC()
		close(c.exited)
		close(c.settled)
		t.add(c)
		return c, nil
	}
	t.add(c)
	idle := make(chan struct{}, 1)
	for i, r := range pipes {
		s := Stdout
		if i == 1 {
			s = Stderr
		}
		c.readers.Add(1)
		t.wg.Go(func() { c.copy(r, s, idle) })
	}
	t.wg.Go(func() { c.wait(spec.Timeout, idle) })
	return c, nil
}

func (t *Table) add(c *Command) {
	t.mu.Lock()
	t.cmds[c.ID] = c
	t.mu.Unlock()
}

// copy moves one pipe into the log until EOF.
func (c *Command) copy(r *os.File, s Stream, activity chan<- struct{}) {
	defer c.readers.Done()
	defer r.Close()
	notify := func() {
		select {
		case activity <- struct{}{}:
		default:
		}
	}
	// Spliced from the pipe into the log: the output never passes through
	// execd's memory on its way to disk.
	if rc, err := r.SyscallConn(); err == nil {
		for {
			var n int
			var serr error
			err := rc.Read(func(fd uintptr) bool {
				n, serr = c.Log.appendFromPipe(s, int(fd), pipeSize)
				return !errors.Is(serr, syscall.EAGAIN)
			})
			if err != nil {
				return
			}
			if serr != nil {
				break // no splice here, or a log that cannot be written: copy below
			}
			if n == 0 {
				// The end of the pipe, on Linux; gVisor's Sentry also
				// answers 0 for an empty pipe whose writer is still
				// there. The read below tells the two apart.
				break
			}
			notify()
		}
	}
	buf := make([]byte, 64<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			// A log that cannot be written (disk full) still drains the
			// pipe, so the command never blocks on us.
			_ = c.Log.Append(s, buf[:n])
			notify()
		}
		if err != nil {
			return
		}
	}
}

// wait reaps the main process, enforces the timeout, and settles the
// output: both pipes at EOF, or, after the exit, quiet for settleIdle with
// nothing left unread in them. What the command wrote before it exited is
// in the pipes already; a reader that a loaded machine has not scheduled
// for a while must not lose it from the stream.
func (c *Command) wait(timeout time.Duration, activity <-chan struct{}) {
	var timer *time.Timer
	if timeout > 0 {
		timer = time.AfterFunc(timeout, func() {
			c.mu.Lock()
			c.timedOut = true
			c.mu.Unlock()
			_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
		})
	}
	err := c.cmd.Wait()
	if timer != nil {
		timer.Stop()
	}
	code, msg := exitStatus(c.cmd.ProcessState, err)
	c.mu.Lock()
	c.exitCode, c.exitErr, c.finishedAt = code, msg, time.Now().UTC()
	if c.timedOut {
		c.exitErr = fmt.Sprintf("timed out after %v", timeout)
	}
	// Nothing reads the input of a process that is gone.
	if c.stdin != nil && c.master == nil {
		_ = c.stdin.Close()
		c.stdin = nil
	}
	c.mu.Unlock()
	close(c.exited)

	eof := make(chan struct{})
	go func() { c.readers.Wait(); close(eof) }()
	quiet := time.NewTimer(settleIdle)
	defer quiet.Stop()
	for settled := false; !settled; {
		select {
		case <-eof:
			settled = true
		case <-activity:
			quiet.Reset(settleIdle)
		case <-quiet.C:
			if c.unread() {
				quiet.Reset(settleIdle)
				continue
			}
			settled = true
		}
	}
	close(c.settled)
	// Output of children still running keeps being retained until they
	// close the pipes.
	<-eof
	c.Log.Finish()
}

// unread reports whether an output pipe still holds bytes.
func (c *Command) unread() bool {
	for _, p := range c.pipes {
		if pipeHolds(p) {
			return true
		}
	}
	return false
}

// exitStatus turns a wait result into an exit code: the status, or 128 +
// the signal for a process killed by one.
func exitStatus(ps *os.ProcessState, err error) (int, string) {
	if ps == nil {
		return 255, err.Error()
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal()), "signal: " + ws.Signal().String()
	}
	if ps.ExitCode() != 0 {
		return ps.ExitCode(), fmt.Sprintf("exit status %d", ps.ExitCode())
	}
	return 0, ""
}

// Collect removes finished commands beyond the retention policy, oldest
// first. Running commands are never collected.
func (t *Table) Collect() {
	t.mu.Lock()
	var done []*Command
	for _, c := range t.cmds {
		if ex, ok := c.Exit(); ok && !ex.FinishedAt.IsZero() {
			done = append(done, c)
		}
	}
	t.mu.Unlock()
	sort.Slice(done, func(i, j int) bool {
		a, _ := done[i].Exit()
		b, _ := done[j].Exit()
		return a.FinishedAt.After(b.FinishedAt)
	})
	var bytes int64
	now := time.Now()
	for i, c := range done {
		ex, _ := c.Exit()
		bytes += c.Log.Size()
		if i < t.ret.MaxCommands && bytes <= t.ret.MaxBytes && now.Sub(ex.FinishedAt) <= t.ret.MaxAge {
			continue
		}
		t.mu.Lock()
		delete(t.cmds, c.ID)
		t.mu.Unlock()
		_ = c.Log.Close()
		_ = os.RemoveAll(c.dir)
	}
}

// Run keeps spare output directories ready and collects expired commands
// every interval, until ctx ends.
func (t *Table) Run(ctx context.Context, interval time.Duration) {
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { t.refill(ctx) })
	tk := time.NewTicker(interval)
	defer tk.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tk.C:
			t.Collect()
		}
	}
}

// Running returns how many commands have not exited.
func (t *Table) Running() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, c := range t.cmds {
		select {
		case <-c.exited:
		default:
			n++
		}
	}
	return n
}

// Len returns how many commands are kept.
func (t *Table) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.cmds)
}

// Close kills running commands and removes all retained output.
func (t *Table) Close() error {
	t.mu.Lock()
	cmds := make([]*Command, 0, len(t.cmds))
	for _, c := range t.cmds {
		cmds = append(cmds, c)
	}
	t.cmds = map[string]*Command{}
	t.mu.Unlock()
	for _, c := range cmds {
		_ = c.Signal(syscall.SIGKILL)
		<-c.exited
		// Children that left the process group may still hold the pipes.
		for _, p := range c.pipes {
			_ = p.Close()
		}
	}
	t.wg.Wait()
	for _, c := range cmds {
		_ = c.Log.Close()
	}
	return os.RemoveAll(t.dir)
}

// errNoPipes wraps the failure to make a process's output pipes, as
// opposed to its start's.
var errNoPipes = errors.New("output pipes")

// startWithPipes starts cmd with a pipe of its own for stdout and one for
// stderr (each given to prepare first, when not nil) and returns their
// read ends. A failed start closes both; a failure to make them is
// errNoPipes.
func startWithPipes(cmd *exec.Cmd, prepare func(*os.File)) (stdout, stderr *os.File, err error) {
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", errNoPipes, err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return nil, nil, fmt.Errorf("%w: %w", errNoPipes, err)
	}
	if prepare != nil {
		prepare(outR)
		prepare(errR)
	}
	cmd.Stdout, cmd.Stderr = outW, errW
	err = cmd.Start()
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		return nil, nil, err
	}
	return outR, errR, nil
}
