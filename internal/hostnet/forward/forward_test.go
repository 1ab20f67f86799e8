// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package forward

import (
	"bytes"
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"

	"github.com/corral-dev/corral/errdefs"
)

// A program in the sandbox that takes execd's port and streams bytes
// without a newline must not make the server buffer them.
func TestPingReadsABoundedAnswer(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var sent atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		chunk := bytes.Repeat([]byte("x"), 1<<20)
		for {
			n, err := c.Write(chunk)
			sent.Add(int64(n))
			if err != nil || sent.Load() > 1<<30 {
				return
			}
		}
	}()
	ok, err := Ping(t.Context(), func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", ln.Addr().String())
	})
	if ok {
		t.Fatal("Ping = true for an answer that is not HTTP")
	}
	<-done
	// What the kernel buffers on loopback is a few MiB; an unbounded read
	// takes all the hostile server can send for the whole deadline.
	if n := sent.Load(); n > 64<<20 {
		t.Fatalf("the hostile server got %d MiB read before Ping gave up (err %v)", n>>20, err)
	}
}

func TestPingAcceptsExecd(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		buf := make([]byte, 512)
		_, _ = c.Read(buf)
		_, _ = c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\npong"))
	}()
	ok, err := Ping(t.Context(), func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", ln.Addr().String())
	})
	if !ok || err != nil {
		t.Fatalf("Ping = %v, %v; want true", ok, err)
	}
}

// A tenant asking for every port of a sandbox gets a bounded number of
// forwarders, then a clear refusal; other sandboxes are not affected.
func TestForwardersPerSandboxAreBounded(t *testing.T) {
	t.Parallel()
	var s Set
	defer s.Close()
	dial := func(ctx context.Context) (net.Conn, error) { return nil, errors.New("unused") }
	for port := 1; port <= MaxPerSandbox; port++ {
		if _, err := s.Addr("a", port, dial); err != nil {
			t.Fatalf("forwarder %d: %v", port, err)
		}
	}
	if _, err := s.Addr("a", MaxPerSandbox+1, dial); !errors.Is(err, errdefs.ErrResourceExhausted) {
		t.Fatalf("forwarder %d = %v, want ErrResourceExhausted", MaxPerSandbox+1, err)
	}
	if _, err := s.Addr("a", 1, dial); err != nil {
		t.Errorf("an existing forwarder after the bound: %v", err)
	}
	if _, err := s.Addr("b", 1, dial); err != nil {
		t.Errorf("another sandbox's forwarder: %v", err)
	}
}
