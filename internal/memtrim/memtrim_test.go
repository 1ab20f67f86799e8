// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package memtrim

import (
	"context"
	"runtime"
	"testing"
	"time"
)

var sink [][]byte

// TestRunGivesGarbageBack: what a burst allocated and dropped counts as
// spare, and Run collects it and returns the pages, then stops with its
// context.
func TestRunGivesGarbageBack(t *testing.T) {
	// A collection first, so the next one (at the 4 MiB minimum goal) is
	// not due while 2 MiB of garbage is made.
	runtime.GC()
	for range 32 {
		sink = [][]byte{make([]byte, 64<<10)}
	}
	sink = nil
	if s := Spare(); s < 1<<20 {
		t.Fatalf("Spare() = %d after 2 MiB of garbage, want at least 1 MiB", s)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		Run(ctx, 10*time.Millisecond)
		close(done)
	}()
	deadline := time.Now().Add(30 * time.Second)
	for Spare() > Slack {
		if time.Now().After(deadline) {
			t.Fatalf("Spare() = %d after 30 s of Run, want at most %d", Spare(), Slack)
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
}
