// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package process

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"
)

// Timings and sizes of PTY sessions.
const (
	// ptyReadChunk is the most output one read takes from the shell.
	ptyReadChunk = 32 << 10
	// ptyEvents is how many events a viewer that is behind may have
	// queued before the output waits for it.
	ptyEvents     = 64
	resizeRecheck = 100 * time.Millisecond
)

// PTYMode is how a PTY session's shell is connected.
type PTYMode int

const (
	// ModePTY runs the shell on a pseudo-terminal, 80x24 until resized:
	// one output stream, resizable, signals to the foreground job.
	ModePTY PTYMode = iota + 1
	// ModePipe gives the shell a stdin pipe and separate stdout and
	// stderr pipes.
	ModePipe
)

// String returns the mode's name on the wire: "pty" or "pipe".
func (m PTYMode) String() string {
	switch m {
	case ModePTY:
		return "pty"
	case ModePipe:
		return "pipe"
	}
	return ""
}

// PTYs holds the PTY sessions.
type PTYs struct {
	// mu guards m.
	mu sync.Mutex
	m  map[string]*PTY
	// wg owns the goroutines that read PTY output and reap shells.
	wg sync.WaitGroup
}

// NewPTYs returns an empty table.
func NewPTYs() *PTYs { return &PTYs{m: map[string]*PTY{}} }

// Create registers a session whose shell (bash, or bash -c command when
// command is set) starts in dir with env when a viewer first attaches.
func (t *PTYs) Create(dir, command string, env []string) *PTY {
	p := &PTY{ID: NewSessionID(), dir: dir, command: command, env: env, wg: &t.wg, exitCh: make(chan struct{})}
	t.mu.Lock()
	t.m[p.ID] = p
	t.mu.Unlock()
	return p
}

// Get returns a session by id.
func (t *PTYs) Get(id string) (*PTY, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	p, ok := t.m[id]
	return p, ok
}

// Delete removes a session, kills its shell and ends its viewer with
// [EndDeleted]; false if there is no such session. It returns once the
// shell is reaped.
func (t *PTYs) Delete(id string) bool {
	t.mu.Lock()
	p, ok := t.m[id]
	delete(t.m, id)
	t.mu.Unlock()
	if ok {
		p.kill()
	}
	return ok
}

// Close deletes every session and waits for all their goroutines.
func (t *PTYs) Close() {
	t.mu.Lock()
	all := make([]*PTY, 0, len(t.m))
	for id, p := range t.m {
		all = append(all, p)
		delete(t.m, id)
	}
	t.mu.Unlock()
	for _, p := range all {
		p.kill()
	}
	t.wg.Wait()
}

// PTY is an interactive shell with one viewer at a time. It keeps the
// last MiB of its output, so a viewer that reconnects can replay what it
// missed from a byte offset.
type PTY struct {
	ID      string
	dir     string
	command string
	env     []string
	// wg is the table's.
	wg *sync.WaitGroup

	// mu guards the fields below.
	mu       sync.Mutex
	started  bool
	mode     PTYMode
	cmd      *exec.Cmd
	stdin    io.WriteCloser
	master   *os.File
	ring     ring
	viewer   *Viewer
	exited   bool
	exitCode int
	exitCh   chan struct{}
	// want is the last size a client asked for; wantGen counts requests
	// so a re-assertion only acts for the newest one.
	want    unix.Winsize
	wantGen uint64
}

// Status reports whether the shell runs and how many bytes of output it
// has written.
func (p *PTY) Status() (running bool, outputOffset int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.started && !p.exited, p.ring.total
}

// HasViewer reports whether a viewer is attached.
func (p *PTY) HasViewer() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.viewer != nil
}

// Attachment is the state a viewer attached to.
type Attachment struct {
	// Replay is the output kept from the offset asked for (or from the
	// oldest byte kept), which starts at ReplayOffset.
	Replay       []byte
	ReplayOffset int64
	Mode         PTYMode
	// Exited and ExitCode tell a viewer attaching after the shell ended
	// how it ended; no event will come.
	Exited   bool
	ExitCode int
}

// Attach makes v the session's viewer. A viewer it replaces is ended with
// [EndTakenOver]. The first attach starts the shell in mode; later ones
// keep the mode it started in. With since >= 0 the attachment carries the
// output kept from that offset on. From here on v receives the output and
// then the exit, until it is replaced, the session is deleted, or it is
// detached.
func (p *PTY) Attach(v *Viewer, mode PTYMode, since int64) (Attachment, error) {
	p.mu.Lock()
	if !p.started {
		if err := p.start(mode); err != nil {
			p.mu.Unlock()
			return Attachment{}, err
		}
	}
	old := p.viewer
	p.viewer = v
	var a Attachment
	if since >= 0 {
		a.Replay, a.ReplayOffset = p.ring.since(since)
	}
	a.Mode, a.Exited, a.ExitCode = p.mode, p.exited, p.exitCode
	p.mu.Unlock()
	if old != nil {
		old.end(EndTakenOver)
	}
	return a, nil
}

// Detach stops deliveries to v if it is still the session's viewer.
func (p *PTY) Detach(v *Viewer) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.viewer == v {
		p.viewer = nil
	}
}

// kill ends the shell and the viewer's attachment.
func (p *PTY) kill() {
	p.mu.Lock()
	if p.started && !p.exited && p.cmd.Process != nil {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	}
	v := p.viewer
	p.viewer = nil
	started := p.started
	p.mu.Unlock()
	if v != nil {
		v.end(EndDeleted)
	}
	if started {
		<-p.exitCh
	}
}

// output is one output stream of the shell: a pipe, or the terminal.
type output struct {
	r io.ReadCloser
	s Stream
}

// start runs the shell in mode. p.mu held.
func (p *PTY) start(mode PTYMode) error {
	argv := []string{Shell()[0], "--norc", "--noprofile"}
	if p.command != "" {
		argv = append(argv, "-c", p.command)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir, cmd.Env = p.dir, p.env
	var outs []output
	var err error
	if mode == ModePipe {
		outs, err = p.startPipes(cmd)
	} else {
		outs, err = p.startTerminal(cmd)
	}
	if err != nil {
		return err
	}
	p.cmd, p.started = cmd, true
	var readers sync.WaitGroup
	for _, o := range outs {
		readers.Add(1)
		p.wg.Go(func() {
			defer readers.Done()
			p.pump(o)
		})
	}
	p.wg.Go(func() { p.reap(cmd, &readers) })
	return nil
}

// startPipes starts cmd with a stdin pipe and stdout and stderr pipes of
// its own. p.mu held.
func (p *PTY) startPipes(cmd *exec.Cmd) ([]output, error) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	outR, errR, err := startWithPipes(cmd, nil)
	if err != nil {
		return nil, err
	}
	p.stdin, p.mode = stdin, ModePipe
	return []output{{outR, Stdout}, {errR, Stderr}}, nil
}

// startTerminal starts cmd as the session leader of a new terminal.
// p.mu held.
func (p *PTY) startTerminal(cmd *exec.Cmd) ([]output, error) {
	master, err := pty.StartWithAttrs(cmd, &pty.Winsize{Cols: 80, Rows: 24}, &syscall.SysProcAttr{Setsid: true, Setctty: true})
	if err != nil {
		return nil, err
	}
	p.master, p.stdin, p.mode = master, master, ModePTY
	return []output{{master, Stdout}}, nil
}

// reap waits for the shell, then for the rest of its output, and tells
// the viewer how it ended.
func (p *PTY) reap(cmd *exec.Cmd, readers *sync.WaitGroup) {
	err := cmd.Wait()
	code, _ := exitStatus(cmd.ProcessState, err)
	if p.master != nil {
		// The terminal's output is read to its end (the reader sees EIO
		// once every holder of the other side has closed it and what they
		// wrote is read); only if something the shell left behind keeps
		// it open is the terminal closed, once nothing is left unread.
		// (Closing it at once lost the last lines the shell printed.)
		drained := make(chan struct{})
		go func() { readers.Wait(); close(drained) }()
		for quiet := 0; quiet < 4; {
			select {
			case <-drained:
				quiet = 4
				continue
			case <-time.After(settleIdle):
			}
			if pipeHolds(p.master) {
				quiet = 0
			} else {
				quiet++
			}
		}
		_ = p.master.Close()
	}
	readers.Wait()
	p.mu.Lock()
	p.exited, p.exitCode = true, code
	v := p.viewer
	p.mu.Unlock()
	close(p.exitCh)
	if v != nil {
		v.deliver(PTYEvent{Exited: true, ExitCode: code})
	}
}

// pump copies one output stream into the ring and to the viewer.
func (p *PTY) pump(o output) {
	defer o.r.Close()
	buf := make([]byte, ptyReadChunk)
	for {
		n, err := o.r.Read(buf)
		if n > 0 {
			p.mu.Lock()
			p.ring.write(buf[:n])
			v := p.viewer
			p.mu.Unlock()
			if v != nil {
				v.deliver(PTYEvent{Stream: o.s, Data: bytes.Clone(buf[:n])})
			}
		}
		if err != nil {
			return
		}
	}
}

// WriteStdin writes b to the shell's input.
func (p *PTY) WriteStdin(b []byte) error {
	p.mu.Lock()
	in := p.stdin
	p.mu.Unlock()
	if in == nil {
		return errors.New("the process is not running")
	}
	_, err := in.Write(b)
	return err
}

// CloseStdin ends the input: in pipe mode the stdin pipe is closed; a
// terminal gets its EOF character, which ends input to a program reading
// a line.
func (p *PTY) CloseStdin() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stdin == nil {
		return errors.New("the process is not running")
	}
	if p.mode == ModePTY {
		_, err := p.stdin.Write([]byte{4})
		return err
	}
	err := p.stdin.Close()
	p.stdin = nil
	return err
}

// Resize sets the terminal's size (PTY mode only).
func (p *PTY) Resize(cols, rows int) error {
	if cols < 1 || rows < 1 || cols > 10000 || rows > 10000 {
		return errors.New("resize needs cols and rows from 1 to 10000")
	}
	p.mu.Lock()
	m := p.master
	p.mu.Unlock()
	if m == nil {
		return errors.New("resize needs PTY mode")
	}
	ws := unix.Winsize{Col: uint16(cols), Row: uint16(rows)}
	if err := setSize(m, &ws); err != nil {
		return err
	}
	p.mu.Lock()
	p.want = ws
	p.wantGen++
	gen := p.wantGen
	p.mu.Unlock()
	// Readline reads the size and writes it back each time it prepares
	// the terminal; a resize landing between the two is undone. Check
	// once shortly after and set it again if it was (which also sends
	// SIGWINCH, so the shell redraws at the right size).
	time.AfterFunc(resizeRecheck, func() { p.reassertSize(gen) })
	return nil
}

func (p *PTY) reassertSize(gen uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.master == nil || p.exited || gen != p.wantGen {
		return
	}
	cur, err := getSize(p.master)
	if err != nil || (cur.Col == p.want.Col && cur.Row == p.want.Row) {
		return
	}
	_ = setSize(p.master, &p.want)
}

// Signal sends the signal named (SIGINT, SIGTERM, SIGKILL, SIGQUIT or
// SIGHUP): in PTY mode to the terminal's foreground process group, as a
// keyboard would, in pipe mode to the shell's process group.
func (p *PTY) Signal(name string) error {
	sig, ok := map[string]syscall.Signal{"SIGINT": syscall.SIGINT, "SIGTERM": syscall.SIGTERM, "SIGKILL": syscall.SIGKILL,
		"SIGQUIT": syscall.SIGQUIT, "SIGHUP": syscall.SIGHUP}[name]
	if !ok {
		return errors.New("signal must be SIGINT, SIGTERM, SIGKILL, SIGQUIT or SIGHUP")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.started || p.exited {
		return errors.New("the process is not running")
	}
	if p.mode == ModePTY {
		if pgid, err := foregroundGroup(p.master); err == nil && pgid > 0 {
			return syscall.Kill(-pgid, sig)
		}
	}
	return syscall.Kill(-p.cmd.Process.Pid, sig)
}

// PTYEvent is output of a PTY session's shell or, once after all of its
// output, its exit.
type PTYEvent struct {
	// Stream is Stdout, or Stderr in pipe mode.
	Stream Stream
	Data   []byte
	// Exited marks the last event; ExitCode is the status, or 128 + the
	// signal for a shell killed by one.
	Exited   bool
	ExitCode int
}

// EndReason is why a viewer's attachment ended.
type EndReason int

const (
	// EndTakenOver: another viewer attached in its place.
	EndTakenOver EndReason = iota + 1
	// EndDeleted: the session was deleted.
	EndDeleted
)

// Viewer is a client of a PTY session. While attached it receives the
// session's output and exit on Events; a viewer that does not keep up
// holds the output back (backpressure) until it is closed.
type Viewer struct {
	events chan PTYEvent
	done   chan struct{}

	// ended is closed when the session replaces or deletes the viewer.
	// The session does not tear the client down itself: the client's
	// owner does, after telling its peer why.
	endOnce sync.Once
	ended   chan struct{}
	reason  EndReason
}

// NewViewer returns a viewer to attach.
func NewViewer() *Viewer {
	return &Viewer{events: make(chan PTYEvent, ptyEvents), done: make(chan struct{}), ended: make(chan struct{})}
}

// Events delivers the output and the exit.
func (v *Viewer) Events() <-chan PTYEvent { return v.events }

// Ended is closed when the attachment ends; Reason then says why.
func (v *Viewer) Ended() <-chan struct{} { return v.ended }

// Reason says why the attachment ended, once Ended is closed.
func (v *Viewer) Reason() EndReason {
	<-v.ended
	return v.reason
}

// Close tells the session the viewer reads no more events: deliveries to
// it return at once from then on. Call it once, when the client is gone.
func (v *Viewer) Close() { close(v.done) }

// deliver queues ev, waiting while the viewer is behind, until it is
// closed.
func (v *Viewer) deliver(ev PTYEvent) {
	select {
	case v.events <- ev:
	case <-v.done:
	}
}

// end ends the attachment; the first reason wins.
func (v *Viewer) end(r EndReason) {
	v.endOnce.Do(func() {
		v.reason = r
		close(v.ended)
	})
}
