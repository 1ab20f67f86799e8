// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package forward

import (
	"bytes"
	"context"
	"net"
	"sync/atomic"
	"testing"
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
