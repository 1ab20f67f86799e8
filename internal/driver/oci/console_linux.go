// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package oci

import (
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/corral-dev/corral/internal/caplog"
)

// A runc or runsc sandbox prints into a named pipe in its bundle, never
// into a file of the host's: the server drains the pipe into console.log
// on the sandbox's disk, through caplog, so the log's bound holds whatever
// PID 1 does (docs/security.md). PID 1 holds the pipe's write end, so the
// pipe outlives a server restart and the next server drains it again;
// while no server reads, corral init drops what it relays
// (initproc --console-relay).

// consolePipe is the console pipe's name in a sandbox's bundle.
const consolePipe = "console"

// drains are the consoles a driver instance is draining, by sandbox.
type drains struct {
	mu sync.Mutex
	m  map[string]*drain
}

// drain copies one sandbox's console pipe into its log.
type drain struct {
	r    *os.File
	done chan struct{}
}

// makeConsole makes the console pipe of the sandbox being built, starts
// draining it and returns the write end for the runtime to hand PID 1.
func (d *Driver) makeConsole(b *build) (*os.File, error) {
	fifo := filepath.Join(b.bundle, consolePipe)
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		return nil, err
	}
	if err := d.drains.start(b.spec.ID, b.bundle, b.disk); err != nil {
		return nil, err
	}
	// Blocking (a description of its own, not the reader's non-blocking
	// one): runc writes its own errors to it too. A reader exists, so the
	// open returns at once.
	fd, err := unix.Open(fifo, unix.O_WRONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), fifo), nil
}

// start drains the console pipe in bundle into the log in disk unless
// this instance does already; a bundle without the pipe (a sandbox made
// before consoles were drained by the host) is left alone.
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
	// Readable too: caplog keeps the newest output when it trims. On
	// disk beside the writable layer, not on the runtime tmpfs that every
	// sandbox's small files share; only the server writes there.
	log, err := os.OpenFile(filepath.Join(disk, consoleFile), os.O_CREATE|os.O_RDWR|os.O_APPEND|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		r.Close()
		return err
	}
	w := caplog.New(log, ConsoleLimit)
	dr := &drain{r: r, done: make(chan struct{})}
	go func() {
		defer close(dr.done)
		defer log.Close()
		buf := make([]byte, 32<<10)
		for {
			n, err := r.Read(buf)
			if n > 0 {
				// A failed write (the disk is full) drops that output.
				_, _ = w.Write(buf[:n])
			}
			if err != nil {
				return
			}
		}
	}()
	if ds.m == nil {
		ds.m = map[string]*drain{}
	}
	ds.m[id] = dr
	return nil
}

// stop copies what the pipe still holds, for a short while at most (a
// sandbox may print without end), then stops draining it. Nothing
// printed later is kept.
func (ds *drains) stop(id string) {
	ds.mu.Lock()
	dr := ds.m[id]
	delete(ds.m, id)
	ds.mu.Unlock()
	if dr == nil {
		return
	}
	_ = dr.r.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	<-dr.done
	dr.r.Close()
}

// stopAll stops every drain (the driver closing), all at once.
func (ds *drains) stopAll() {
	ds.mu.Lock()
	all := ds.m
	ds.m = nil
	ds.mu.Unlock()
	for _, dr := range all {
		_ = dr.r.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	}
	for _, dr := range all {
		<-dr.done
		dr.r.Close()
	}
}
