// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

// Package memtrim gives an idle process's spare heap back to the system.
// Go keeps the heap it has grown to (at least its 4 MiB minimum goal)
// and a small idle process seldom collects, so what a burst of work
// allocated stays resident. For a sandbox's execd, of which a machine
// runs thousands that mostly wait, that retained heap is a large part of
// what an idle sandbox costs, and it counts against the sandbox's own
// memory limit. Only internal/cli uses it.
package memtrim

import (
	"context"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// Slack is how much garbage and free heap a process may keep before a
// check collects and returns it.
const Slack = 256 << 10

// Run checks every interval until ctx ends: when the heap holds more than
// Slack of garbage (allocated since the last collection) and free pages
// the runtime still keeps, it collects and returns the free pages to the
// system. An idle process pays for one collection and then nothing but
// the checks, which read runtime counters.
func Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if Spare() > Slack {
				debug.FreeOSMemory()
			}
		}
	}
}

// Spare is the heap this process could give back: what is allocated
// beyond what the last collection found live, plus free pages not yet
// returned.
func Spare() uint64 {
	s := []metrics.Sample{
		{Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/gc/heap/live:bytes"},
		{Name: "/memory/classes/heap/free:bytes"},
	}
	metrics.Read(s)
	for _, x := range s {
		if x.Value.Kind() != metrics.KindUint64 {
			return 0
		}
	}
	objects, live, free := s[0].Value.Uint64(), s[1].Value.Uint64(), s[2].Value.Uint64()
	return max(objects, live) - live + free
}
