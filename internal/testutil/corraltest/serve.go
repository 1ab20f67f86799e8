// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package corraltest

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Served is a `corral serve` started by Serve, for TestMain functions
// that share one server among a package's tests and examples.
type Served struct {
	URL string
	// E2BURL is the E2B API's base URL when it serves one (--e2b-listen).
	E2BURL string
	data   string
	cmd    *exec.Cmd
	done   chan error
	mu     sync.Mutex
	log    strings.Builder
}

// Pid is the server's process id.
func (s *Served) Pid() int { return s.cmd.Process.Pid }

// Serve runs `bin serve` on a free loopback port with data in dataDir and
// the admin key key, and returns once it serves. A server that fails to
// start is gone when Serve returns, and what it mounted with it.
func Serve(bin, dataDir, key string, args ...string) (*Served, error) {
	full := append([]string{"serve", "--listen", "127.0.0.1:0", "--data-dir", dataDir, "--api-key", key, "--log-format", "json"}, args...)
	s := &Served{data: dataDir, cmd: exec.Command(bin, full...), done: make(chan error, 1)}
	pr, pw := io.Pipe()
	s.cmd.Stderr = pw
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { s.done <- s.cmd.Wait(); pw.Close() }()
	url := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		e2b := ""
		for sc.Scan() {
			s.mu.Lock()
			s.log.WriteString(sc.Text() + "\n")
			s.mu.Unlock()
			var line struct{ Msg, Listen string }
			if json.Unmarshal(sc.Bytes(), &line) != nil {
				continue
			}
			switch line.Msg {
			case "serving E2B's API":
				e2b = line.Listen
			case "serving":
				s.E2BURL = e2b
				url <- line.Listen
			}
		}
	}()
	select {
	case s.URL = <-url:
		return s, nil
	case err := <-s.done:
		_ = Unmount(dataDir)
		return nil, fmt.Errorf("corral serve exited: %v\n%s", err, s.Log())
	case <-time.After(60 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
		_ = Unmount(dataDir)
		return nil, fmt.Errorf("corral serve did not start:\n%s", s.Log())
	}
}

// Log returns what the server logged so far.
func (s *Served) Log() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.log.String()
}

// Stop asks the server to exit and waits for it, killing it after 30 s,
// then unmounts what it left mounted in its data directory (Unmount). The
// data directory is done with: a server started on it again finds no
// sandbox of this one's running.
func (s *Served) Stop() error {
	return errors.Join(s.stop(), Unmount(s.data))
}

func (s *Served) stop() error {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-s.done:
		return err
	case <-time.After(30 * time.Second):
		_ = s.cmd.Process.Kill()
		return fmt.Errorf("corral serve ignored SIGTERM: %v", <-s.done)
	}
}
