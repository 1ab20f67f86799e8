// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

// Package forward gives sandbox ports host-loopback addresses: a
// listener on 127.0.0.1 whose every connection is piped to a connection
// the driver dials (into a network namespace, or to a container's
// address). A Set keeps one forwarder per sandbox and port.
package forward

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/errdefs"
)

// Dialer opens a connection to the port inside the sandbox.
type Dialer func(ctx context.Context) (net.Conn, error)

// forwarder is one loopback listener.
type forwarder struct {
	ln    net.Listener
	addr  netip.AddrPort
	dial  Dialer
	mu    sync.Mutex
	conns map[net.Conn]struct{}
	done  bool
}

func newForwarder(dial Dialer) (*forwarder, error) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	return &forwarder{ln: ln, addr: ln.Addr().(*net.TCPAddr).AddrPort(), dial: dial, conns: map[net.Conn]struct{}{}}, nil
}

// serve accepts until the listener closes; wg owns the goroutines.
func (f *forwarder) serve(wg *sync.WaitGroup) {
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return
		}
		wg.Go(func() { f.handle(c) })
	}
}

func (f *forwarder) track(c net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.done {
		return false
	}
	f.conns[c] = struct{}{}
	return true
}

func (f *forwarder) untrack(c net.Conn) {
	f.mu.Lock()
	delete(f.conns, c)
	f.mu.Unlock()
}

func (f *forwarder) handle(c net.Conn) {
	defer c.Close()
	if !f.track(c) {
		return
	}
	defer f.untrack(c)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	up, err := f.dial(ctx)
	cancel()
	if err != nil {
		return
	}
	defer up.Close()
	if !f.track(up) {
		return
	}
	defer f.untrack(up)
	var wg sync.WaitGroup
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite() // TCP, or TLS to a pinned sidecar
		}
	}
	wg.Go(func() { pipe(up, c) })
	pipe(c, up)
	wg.Wait()
}

// close stops accepting and ends every open connection.
func (f *forwarder) close() error {
	err := f.ln.Close()
	f.mu.Lock()
	f.done = true
	for c := range f.conns {
		_ = c.Close()
	}
	f.mu.Unlock()
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// MaxPerSandbox bounds the ports of one sandbox with a forwarder.
const MaxPerSandbox = 64

// Set holds the forwarders of a driver's sandboxes. The zero value is
// ready to use.
type Set struct {
	mu  sync.Mutex
	fs  map[string]map[int]*forwarder
	wg  sync.WaitGroup
	off bool
}

// Addr returns the loopback address forwarding to port of sandbox id,
// starting a forwarder that uses dial on first use.
func (s *Set) Addr(id string, port int, dial Dialer) (netip.AddrPort, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.off {
		return netip.AddrPort{}, errors.New("the driver is closed")
	}
	if f, ok := s.fs[id][port]; ok {
		return f.addr, nil
	}
	if len(s.fs[id]) >= MaxPerSandbox {
		// Each holds a host port and descriptors: a tenant asking for
		// every port of a sandbox must not take this machine's.
		return netip.AddrPort{}, errdefs.Newf(errdefs.ErrResourceExhausted, api.CodeSandboxTooManyEndpoints,
			"a sandbox has endpoints for at most %d ports at a time", MaxPerSandbox)
	}
	f, err := newForwarder(dial)
	if err != nil {
		return netip.AddrPort{}, err
	}
	if s.fs == nil {
		s.fs = map[string]map[int]*forwarder{}
	}
	if s.fs[id] == nil {
		s.fs[id] = map[int]*forwarder{}
	}
	s.fs[id][port] = f
	s.wg.Go(func() { f.serve(&s.wg) })
	return f.addr, nil
}

// Lookup returns the address of an existing forwarder to port of id.
func (s *Set) Lookup(id string, port int) (netip.AddrPort, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f, ok := s.fs[id][port]
	if !ok {
		return netip.AddrPort{}, false
	}
	return f.addr, true
}

// CloseSandbox stops the forwarders of sandbox id.
func (s *Set) CloseSandbox(id string) {
	s.mu.Lock()
	fs := s.fs[id]
	delete(s.fs, id)
	s.mu.Unlock()
	for _, f := range fs {
		_ = f.close()
	}
}

// Close stops every forwarder and waits for their connections to end.
func (s *Set) Close() {
	s.mu.Lock()
	s.off = true
	all := s.fs
	s.fs = nil
	s.mu.Unlock()
	for _, fs := range all {
		for _, f := range fs {
			_ = f.close()
		}
	}
	s.wg.Wait()
}

// Ping sends GET /ping over a connection from dial and reports whether it
// was answered 200 (execd's readiness check). Each try is bounded to a
// couple of seconds.
func Ping(ctx context.Context, dial Dialer) (bool, error) {
	dctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	conn, err := dial(dctx)
	if err != nil {
		return false, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := io.WriteString(conn, "GET /ping HTTP/1.1\r\nHost: execd\r\nConnection: close\r\n\r\n"); err != nil {
		return false, err
	}
	// Whatever answers is inside the sandbox: a status line is short, and
	// nothing more of the answer is read.
	line, err := bufio.NewReader(io.LimitReader(conn, 256)).ReadString('\n')
	if err != nil {
		return false, err
	}
	return strings.HasPrefix(line, "HTTP/1.1 200"), nil
}
