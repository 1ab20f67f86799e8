// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package initproc

import (
	"errors"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/corral-dev/corral/internal/caplog"
)

// console copies what the entrypoint and the daemon print into a pipe to
// PID 1's stdout. Two kinds of stdout get one:
//   - a regular file of the runtime's, which would otherwise grow for as
//     long as the sandbox prints: the copy keeps it under its limit
//     (internal/caplog);
//   - a pipe the runtime drains and bounds on the host, which may have no
//     reader for a while (a server restarting): the copy drops what
//     cannot be written then, where the programs themselves would get
//     SIGPIPE and most would die of it.
type console struct {
	w    *os.File // the pipe's write end, the children's stdout and stderr
	r    *os.File
	done chan struct{}
}

// startConsole interposes a pipe in front of out when out is a regular
// file and limit is positive, or when relay is set; it returns nil for
// anything else (a terminal, a pipe the runtime reads itself), which is
// left alone.
func startConsole(out *os.File, limit int64, relay bool) (*console, error) {
	fi, err := out.Stat()
	if err != nil {
		return nil, err
	}
	var sink io.Writer
	switch {
	case fi.Mode().IsRegular() && limit > 0:
		sink = caplog.New(out, limit)
	case relay:
		// Caught, not ignored: a caught signal is reset by exec, so
		// the programs PID 1 starts get SIGPIPE as usual. Go raises it
		// for a write to stdout that fails EPIPE unless it is caught.
		signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
		sink = dropEPIPE{out}
	default:
		return nil, nil
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	c := &console{w: w, r: r, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		// A failed write (the file system is full, no reader) drops that
		// output, and the copy goes on; a host that reads slowly slows
		// the printing programs down, as a terminal would.
		buf := make([]byte, 32<<10)
		for {
			n, err := r.Read(buf)
			if n > 0 {
				_, _ = sink.Write(buf[:n])
			}
			if err != nil {
				return
			}
		}
	}()
	return c, nil
}

// dropEPIPE writes to a pipe and drops what it cannot take for want of a
// reader.
type dropEPIPE struct{ f *os.File }

func (d dropEPIPE) Write(p []byte) (int, error) {
	n, err := d.f.Write(p)
	if errors.Is(err, syscall.EPIPE) {
		return len(p), nil
	}
	return n, err
}

// close ends the copy once what was printed has been copied; descendants
// that still hold the pipe open do not keep PID 1 from exiting.
func (c *console) close() {
	c.w.Close()
	_ = c.r.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	<-c.done
	c.r.Close()
}
