// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package initproc

import (
	"os"
	"time"

	"github.com/corral-dev/corral/internal/caplog"
)

// console copies what the entrypoint and the daemon print into a pipe to
// PID 1's stdout, a file of the runtime's that would otherwise grow for
// as long as the sandbox prints. The file stays under its limit
// (internal/caplog).
type console struct {
	w    *os.File // the pipe's write end, the children's stdout and stderr
	r    *os.File
	log  *caplog.Writer
	done chan struct{}
}

// startConsole interposes a pipe in front of out when out is a regular
// file; it returns nil for anything else (a terminal, a pipe the runtime
// reads itself), which is left alone.
func startConsole(out *os.File, limit int64) (*console, error) {
	fi, err := out.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return nil, err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	c := &console{w: w, r: r, log: caplog.New(out, limit), done: make(chan struct{})}
	go func() {
		defer close(c.done)
		// A failed write (the file system is full) drops that output; the
		// pipe is drained regardless, so a printing program never blocks.
		buf := make([]byte, 32<<10)
		for {
			n, err := r.Read(buf)
			if n > 0 {
				_, _ = c.log.Write(buf[:n])
			}
			if err != nil {
				return
			}
		}
	}()
	return c, nil
}

// close ends the copy once what was printed has been copied; descendants
// that still hold the pipe open do not keep PID 1 from exiting.
func (c *console) close() {
	c.w.Close()
	_ = c.r.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	<-c.done
	c.r.Close()
}
