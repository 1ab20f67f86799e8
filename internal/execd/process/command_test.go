// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package process

import (
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"
)

func TestRetention(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tb, err := NewTable(dir, Retention{MaxCommands: 2, MaxBytes: 1 << 20, MaxAge: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for range 4 {
		c, err := tb.Start(Spec{Script: "echo hi"})
		if err != nil {
			t.Fatal(err)
		}
		<-c.Done()
		ids = append(ids, c.ID)
		time.Sleep(2 * time.Millisecond)
	}
	running, err := tb.Start(Spec{Script: "sleep 5"})
	if err != nil {
		t.Fatal(err)
	}
	tb.Collect()
	for i, id := range ids {
		_, kept := tb.Get(id)
		_, statErr := os.Stat(filepath.Join(dir, id))
		if wantKept := i >= 2; kept != wantKept || (statErr == nil) != wantKept {
			t.Errorf("command %d: kept %v, dir exists %v; want %v", i, kept, statErr == nil, wantKept)
		}
	}
	if _, ok := tb.Get(running.ID); !ok {
		t.Errorf("a running command was collected")
	}
	// A byte budget removes the oldest finished output first.
	tb2, _ := NewTable(t.TempDir(), Retention{MaxCommands: 100, MaxBytes: 1500})
	var big []*Command
	for range 3 {
		c, _ := tb2.Start(Spec{Script: "head -c 1000 /dev/zero"})
		<-c.Done()
		for c.Log.Size() < 1000 {
			time.Sleep(time.Millisecond)
		}
		big = append(big, c)
		time.Sleep(2 * time.Millisecond)
	}
	tb2.Collect()
	if _, ok := tb2.Get(big[2].ID); !ok {
		t.Errorf("the newest output was collected")
	}
	if _, ok := tb2.Get(big[0].ID); ok {
		t.Errorf("output over the byte budget was kept")
	}
	if err := tb.Close(); err != nil {
		t.Fatal(err)
	}
	if err := tb2.Close(); err != nil {
		t.Fatal(err)
	}
}

// What a command wrote before it exited is all in its output when the
// stream settles, even when execd's readers are not scheduled for longer
// than the settling quiet (a loaded machine: here one CPU for execd and
// goroutines that never yield it willingly).
func TestOutputBeforeExitSurvivesStarvedReaders(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	tb, err := NewTable(t.TempDir(), Retention{MaxCommands: 1000, MaxBytes: 64 << 20, MaxAge: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var spin sync.WaitGroup
	for range 8 {
		spin.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				for i := 0; i < 1e6; i++ {
				}
			}
		})
	}
	defer func() { close(stop); spin.Wait() }()
	var cmds []*Command
	for range 300 {
		c, err := tb.Start(Spec{Script: "echo ok"})
		if err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, c)
	}
	short := 0
	for _, c := range cmds {
		<-c.Done()
		if c.Log.Size() != 3 {
			short++
		}
	}
	if short > 0 {
		t.Errorf("%d of %d commands had settled without the output they wrote before exiting", short, len(cmds))
	}
}
