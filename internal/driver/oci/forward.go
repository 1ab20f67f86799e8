// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package oci

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"sync"
	"time"
)

// forwarder is a loopback listener on the host that forwards every
// connection to a port inside a sandbox's network namespace.
type forwarder struct {
	ln     net.Listener
	addr   netip.AddrPort
	netns  string
	target string
	// conns holds open connections so close can end them.
	mu    sync.Mutex
	conns map[net.Conn]struct{}
	done  bool
}

func newForwarder(netns string, port int) (*forwarder, error) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	return &forwarder{ln: ln, addr: ln.Addr().(*net.TCPAddr).AddrPort(), netns: netns,
		target: netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(port)).String(), conns: map[net.Conn]struct{}{}}, nil
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
	up, err := dialNetns(ctx, f.netns, f.target)
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
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
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
