// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package oci

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/corral-dev/corral/internal/caplog"
	"github.com/corral-dev/corral/internal/safefile"
)

// What a runc or runsc sandbox's PID 1 sends the host goes through named
// pipes in its bundle, never into a file of the host's, so that no bound
// rests on PID 1 being corral's (docs/security.md):
//   - the console: the server drains it into console.log on the sandbox's
//     disk, through caplog, whatever PID 1 prints;
//   - the exit code (runc only): the server reads it from the pipe when
//     PID 1 has exited and writes the file it keeps itself. A pipe holds
//     64 KiB at most, and a PID 1 that writes without end only blocks.
//
// PID 1 holds the write ends, so the pipes outlive a server restart and
// the next server opens them again. While no server reads, corral init
// drops what it relays to the console, and waits with its exit code
// until a server is back (initproc --console-relay, --exit-fd).

// consolePipe and exitPipe are the pipes' names in a sandbox's bundle.
const (
	consolePipe = "console"
	exitPipe    = "exit-pipe"
)

// drains are the pipes a driver instance reads, by sandbox.
type drains struct {
	mu sync.Mutex
	m  map[string]*drain
	// bufs are the read buffers, shared: a drain holds one only while
	// it copies.
	bufs sync.Pool
}

// buf returns a read buffer from the pool.
func (ds *drains) buf() *[]byte {
	if bp, ok := ds.bufs.Get().(*[]byte); ok {
		return bp
	}
	b := make([]byte, 32<<10)
	return &b
}

// drain copies one sandbox's console pipe into its log and holds its exit
// pipe open.
type drain struct {
	bundle string
	r      *os.File
	done   chan struct{}
	// exit is the exit pipe, open for reading and writing without
	// blocking (-1: none); exitMu guards reading it.
	exitMu sync.Mutex
	exit   int
}

// makePipes makes the sandbox's console pipe (and, for runc, its exit
// pipe), starts draining them and returns the write ends for the runtime
// to hand PID 1: its stdout and stderr, and fd 3.
func (d *Driver) makePipes(b *build, withExit bool) (console, exit *os.File, err error) {
	names := []string{consolePipe}
	if withExit {
		names = append(names, exitPipe)
	}
	for _, name := range names {
		if err := unix.Mkfifo(filepath.Join(b.bundle, name), 0o600); err != nil {
			return nil, nil, err
		}
	}
	if err := d.drains.start(b.spec.ID, b.bundle, b.disk); err != nil {
		return nil, nil, err
	}
	var ends []*os.File
	for _, name := range names {
		// Blocking (descriptions of their own, not the reader's
		// non-blocking ones): runc writes its own errors to the console
		// too. A reader exists, so the open returns at once.
		p := filepath.Join(b.bundle, name)
		fd, err := unix.Open(p, unix.O_WRONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
		if err != nil {
			for _, f := range ends {
				f.Close()
			}
			return nil, nil, err
		}
		ends = append(ends, os.NewFile(uintptr(fd), p))
	}
	if withExit {
		return ends[0], ends[1], nil
	}
	return ends[0], nil, nil
}

// start drains the pipes in bundle unless this instance does already; a
// bundle without them (a sandbox made before the host drained its
// console) is left alone.
func (ds *drains) start(id, bundle, disk string) error {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	if _, ok := ds.m[id]; ok {
		return nil
	}
	// Read and write: the open never waits for a writer, and the pipe
	// never reads as ended while the sandbox's writer comes and goes.
	r, err := os.OpenFile(filepath.Join(bundle, consolePipe), os.O_RDWR|unix.O_NOFOLLOW, 0)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi, err := r.Stat(); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		r.Close()
		return nil
	}
	dr := &drain{bundle: bundle, r: r, done: make(chan struct{}), exit: -1}
	if fd, err := unix.Open(filepath.Join(bundle, exitPipe), unix.O_RDWR|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0); err == nil {
		var st unix.Stat_t
		if unix.Fstat(fd, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFIFO {
			dr.exit = fd
		} else {
			unix.Close(fd)
		}
	} else if !errors.Is(err, unix.ENOENT) {
		r.Close()
		return err
	}
	// Readable too: caplog keeps the newest output when it trims. On
	// disk beside the writable layer, not on the runtime tmpfs that every
	// sandbox's small files share; only the server writes there. Open
	// only while output arrives: a quiet sandbox costs the server no
	// descriptor for its log.
	w, err := caplog.OpenPath(filepath.Join(disk, consoleFile), ConsoleLimit)
	if err != nil {
		r.Close()
		dr.closeExit()
		return err
	}
	rc, err := r.SyscallConn()
	if err != nil {
		r.Close()
		dr.closeExit()
		return err
	}
	go func() {
		defer close(dr.done)
		defer w.Idle()
		for {
			// The buffer is taken only once the pipe is readable: a
			// quiet sandbox's drain holds none (the poller waits).
			var n int
			var rerr error
			err := rc.Read(func(fd uintptr) bool {
				bp := ds.buf()
				defer ds.bufs.Put(bp)
				n, rerr = unix.Read(int(fd), *bp)
				if errors.Is(rerr, unix.EAGAIN) {
					return false
				}
				if n > 0 {
					// A failed write (the disk is full) drops that output.
					_, _ = w.Write((*bp)[:n])
				}
				return true
			})
			if err != nil || (rerr != nil && !errors.Is(rerr, unix.EINTR)) || (n == 0 && rerr == nil) {
				return
			}
			if pipeEmpty(rc) {
				w.Idle()
			}
		}
	}()
	if ds.m == nil {
		ds.m = map[string]*drain{}
	}
	ds.m[id] = dr
	return nil
}

// collectExit moves an exit code waiting in sandbox id's exit pipe into
// the bundle's exit file, which only the server writes. What PID 1 wrote
// is read as hostile input: 64 KiB at most, and only the last line
// counts.
func (ds *drains) collectExit(id string) {
	ds.mu.Lock()
	dr := ds.m[id]
	ds.mu.Unlock()
	if dr != nil {
		dr.collectExit()
	}
}

func (dr *drain) collectExit() {
	dr.exitMu.Lock()
	defer dr.exitMu.Unlock()
	if dr.exit < 0 {
		return
	}
	var got []byte
	buf := make([]byte, 4096)
	for len(got) < 64<<10 {
		n, err := unix.Read(dr.exit, buf)
		if n <= 0 || err != nil {
			break
		}
		got = append(got, buf[:n]...)
	}
	got = bytes.TrimRight(got, "\n")
	if i := bytes.LastIndexByte(got, '\n'); i >= 0 {
		got = got[i+1:]
	}
	if n, ok := parseExitCode(got); ok {
		_ = safefile.WriteFileAtomic(dr.bundle, exitFile, []byte(strconv.Itoa(n)+"\n"), 0o600)
	}
}

func (dr *drain) closeExit() {
	dr.exitMu.Lock()
	defer dr.exitMu.Unlock()
	if dr.exit >= 0 {
		unix.Close(dr.exit)
		dr.exit = -1
	}
}

// stop copies what the console pipe still holds, for a short while at
// most (a sandbox may print without end), collects a waiting exit code,
// then stops reading the pipes. Nothing sent later is kept.
func (ds *drains) stop(id string) {
	ds.mu.Lock()
	dr := ds.m[id]
	delete(ds.m, id)
	ds.mu.Unlock()
	if dr == nil {
		return
	}
	_ = dr.r.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	dr.collectExit()
	<-dr.done
	dr.r.Close()
	dr.closeExit()
}

// stopAll stops every drain (the driver closing), all at once, after
// collecting the exit codes waiting (a pipe whose PID 1 has exited ends
// with its last descriptor).
func (ds *drains) stopAll() {
	ds.mu.Lock()
	all := ds.m
	ds.m = nil
	ds.mu.Unlock()
	for _, dr := range all {
		_ = dr.r.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		dr.collectExit()
	}
	for _, dr := range all {
		<-dr.done
		dr.r.Close()
		dr.closeExit()
	}
}

// pipeEmpty reports whether nothing waits to be read in the pipe of rc
// (FIONREAD, which Linux calls TIOCINQ).
func pipeEmpty(rc syscall.RawConn) bool {
	n := 0
	var err error
	if rc.Control(func(fd uintptr) { n, err = unix.IoctlGetInt(int(fd), unix.TIOCINQ) }) != nil || err != nil {
		return true
	}
	return n == 0
}
