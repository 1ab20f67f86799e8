// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package process

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"time"
)

// Session is a bash session: each run starts a fresh bash with the
// exported environment and working directory the previous run left, so
// `export` and `cd` persist between runs while a run that hangs or is
// killed cannot take the session down with it.
type Session struct {
	ID string
	// busy holds one token while a run is in progress: runs are serial.
	busy chan struct{}

	// mu guards the fields below.
	mu      sync.Mutex
	cwd     string
	env     []string
	current *Command
	closed  bool
}

// Sessions holds the bash sessions.
type Sessions struct {
	table *Table

	// mu guards m.
	mu sync.Mutex
	m  map[string]*Session
	// wg owns the goroutines that record what each run left behind.
	wg sync.WaitGroup
}

// NewSessions runs session commands through table.
func NewSessions(table *Table) *Sessions {
	return &Sessions{table: table, m: map[string]*Session{}}
}

// NewSessionID returns a random dashed UUID-like id.
func NewSessionID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// Create starts a session in cwd with env.
func (ss *Sessions) Create(cwd string, env []string) *Session {
	s := &Session{ID: NewSessionID(), cwd: cwd, env: env, busy: make(chan struct{}, 1)}
	ss.mu.Lock()
	ss.m[s.ID] = s
	ss.mu.Unlock()
	return s
}

// Get returns a session.
func (ss *Sessions) Get(id string) (*Session, bool) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	s, ok := ss.m[id]
	return s, ok
}

// Delete removes a session and kills what it runs. ok is false if unknown.
func (ss *Sessions) Delete(id string) bool {
	ss.mu.Lock()
	s, ok := ss.m[id]
	delete(ss.m, id)
	ss.mu.Unlock()
	if !ok {
		return false
	}
	s.mu.Lock()
	cur := s.current
	s.closed = true
	s.mu.Unlock()
	if cur != nil {
		_ = cur.Signal(9)
	}
	return true
}

// sessionScript wraps a user command so that, after it, bash reports its
// working directory, exit status and exported environment on fd 3. The
// user command itself runs with fd 3 closed, so nothing it leaves behind
// can hold the report open.
func sessionScript(command string) string {
	return "{\n" + command + "\n} 3>&-\n__corral_status=$?\n" +
		"{ printf '%s\\0%s\\0' \"$PWD\" \"$__corral_status\"; env -0; } >&3 2>/dev/null\n" +
		"exit $__corral_status\n"
}

// Run starts command in the session once any run in progress has
// finished (or ctx ends). When the command is done, the directory and
// exported environment it left become the session's.
func (ss *Sessions) Run(ctx context.Context, s *Session, command, cwd string, timeout time.Duration) (*Command, error) {
	select {
	case s.busy <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	release := func() { <-s.busy }
	s.mu.Lock()
	closed, dir, env := s.closed, s.cwd, s.env
	s.mu.Unlock()
	if closed {
		release()
		return nil, fmt.Errorf("session %s was deleted", s.ID)
	}
	if cwd != "" {
		dir = cwd
	}
	r, w, err := os.Pipe()
	if err != nil {
		release()
		return nil, err
	}
	c, err := ss.table.Start(Spec{Argv: []string{Shell()[0], "-c", sessionScript(command)}, Dir: dir, Env: env,
		Timeout: timeout, ExtraFiles: []*os.File{w}})
	w.Close()
	if err != nil {
		r.Close()
		release()
		return nil, err
	}
	c.Content = command
	s.mu.Lock()
	s.current = c
	s.mu.Unlock()
	ss.wg.Go(func() {
		defer release()
		b, _ := io.ReadAll(r)
		r.Close()
		<-c.Done()
		s.mu.Lock()
		defer s.mu.Unlock()
		s.apply(b)
		s.current = nil
	})
	return c, nil
}

// Close kills every session's run and waits for the bookkeeping to end.
func (ss *Sessions) Close() {
	ss.mu.Lock()
	ids := make([]string, 0, len(ss.m))
	for id := range ss.m {
		ids = append(ids, id)
	}
	ss.mu.Unlock()
	for _, id := range ids {
		ss.Delete(id)
	}
	ss.wg.Wait()
}

// apply reads "cwd\0status\0NAME=value\0..." as written by sessionScript.
// s.mu is held.
func (s *Session) apply(b []byte) {
	parts := bytes.Split(b, []byte{0})
	if len(parts) < 3 {
		return // the run exited before reporting (exit, exec, killed)
	}
	if _, err := strconv.Atoi(string(parts[1])); err != nil {
		return
	}
	s.cwd = string(parts[0])
	env := make([]string, 0, len(parts)-2)
	for _, p := range parts[2:] {
		kv := string(p)
		if kv == "" || kv[0] == '=' {
			continue
		}
		if name, _, _ := bytes.Cut(p, []byte("=")); isShellInternal(string(name)) {
			continue
		}
		env = append(env, kv)
	}
	s.env = env
}

// isShellInternal reports variables bash sets itself, which must not be
// carried into the next run.
func isShellInternal(name string) bool {
	switch name {
	case "_", "SHLVL", "OLDPWD", "PWD", "BASH_EXECUTION_STRING", "__corral_status":
		return true
	}
	return false
}
