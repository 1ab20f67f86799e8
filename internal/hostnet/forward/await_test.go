// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package forward

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"
)

func TestAwait(t *testing.T) {
	t.Parallel()
	notYet := errors.New("not yet")
	t.Run("ReadyAfterTries", func(t *testing.T) {
		n := 0
		err := Await(t.Context(), func(context.Context) (bool, error) { n++; return n == 3, notYet },
			func(context.Context) error { return nil }, time.Microsecond, time.Millisecond)
		if err != nil || n != 3 {
			t.Errorf("Await = %v after %d tries, want nil after 3", err, n)
		}
	})
	t.Run("GoneEndsTheWait", func(t *testing.T) {
		gone := errors.New("the sandbox exited")
		n := 0
		err := Await(t.Context(), func(context.Context) (bool, error) { return false, notYet },
			func(context.Context) error { n++; return gone }, time.Microsecond, time.Millisecond)
		if !errors.Is(err, gone) || n != 1 {
			t.Errorf("Await = %v after %d looks, want %v after 1", err, n, gone)
		}
	})
	t.Run("TheEndOfCtxSaysWhy", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
		defer cancel()
		err := Await(ctx, func(context.Context) (bool, error) { return false, notYet },
			func(context.Context) error { return nil }, time.Millisecond, 5*time.Millisecond)
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "not yet") {
			t.Errorf("Await = %v, want the deadline with the last try's error", err)
		}
	})
}

// AwaitPing waits through refused connections for a listener that
// answers 200, and stops at once when alive says the sandbox is gone.
func TestAwaitPing(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // refused until it listens again
	dial := func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", addr)
	}
	tries := 0
	alive := func(context.Context) error {
		tries++
		if tries == 3 {
			ln2, err := net.Listen("tcp", addr)
			if err != nil {
				return err
			}
			t.Cleanup(func() { ln2.Close() })
			go func() {
				for {
					c, err := ln2.Accept()
					if err != nil {
						return
					}
					buf := make([]byte, 512)
					_, _ = c.Read(buf)
					_, _ = c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"))
					c.Close()
				}
			}()
		}
		return nil
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := AwaitPing(ctx, dial, alive, time.Millisecond, 5*time.Millisecond); err != nil {
		t.Fatalf("AwaitPing = %v", err)
	}
	if tries != 3 {
		t.Errorf("answered after %d looks, want 3", tries)
	}
	gone := errors.New("gone")
	if err := AwaitPing(ctx, func(context.Context) (net.Conn, error) { return nil, errors.New("refused") },
		func(context.Context) error { return gone }, time.Millisecond, 5*time.Millisecond); !errors.Is(err, gone) {
		t.Errorf("AwaitPing of a gone sandbox = %v, want %v", err, gone)
	}
}
