// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package oci

import (
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/corral-dev/corral/internal/logctx"
)

// testRanges is an allocator of the server with data directory dir under
// base, its stage base/corral (one per host), its sandboxes on disk on.
func testRanges(t *testing.T, base, dir string, first int, on map[int]string) *idRanges {
	t.Helper()
	bundles := filepath.Join(base, dir, "run", "bundles")
	if err := os.MkdirAll(bundles, 0o700); err != nil {
		t.Fatal(err)
	}
	r := &idRanges{first: first, stage: filepath.Join(base, "corral"), bundles: bundles, log: logctx.Discard(),
		load: func() (map[int]string, error) { return maps.Clone(on), nil }}
	t.Cleanup(r.close)
	return r
}

// TestIDRangesAreNeverGivenTwice: a range held by a bundle on disk or
// taken since is not given again until released; the search starts at the
// server's own place and wraps around; ranges stay in systemd's container
// range.
func TestIDRangesAreNeverGivenTwice(t *testing.T) {
	t.Parallel()
	first := usernsSlots - 2
	r := testRanges(t, t.TempDir(), "data", first, map[int]string{first: "on-disk"})
	seen := map[int]bool{first: true}
	var order []int
	for i := range 4 {
		slot, err := r.take("s" + string(rune('a'+i)))
		if err != nil {
			t.Fatal(err)
		}
		if seen[slot] {
			t.Fatalf("range %d given twice", slot)
		}
		seen[slot] = true
		order = append(order, slot)
	}
	if order[0] != first+1 || order[1] != 0 || order[2] != 1 {
		t.Errorf("ranges taken in the order %v, want %d, 0, 1...", order, first+1)
	}
	r.release("sb")
	if slot, _ := r.take("again"); slot != 0 {
		t.Errorf("a released range was not reused first: got %d", slot)
	}
	for _, slot := range []int{0, usernsSlots - 1} {
		lo, hi := uint64(slotHost(slot)), uint64(slotHost(slot))+usernsSize-1
		if lo < 0x80000 || hi > 0x6FFFFFFF {
			t.Errorf("range %d is host IDs %d-%d, outside systemd's container range", slot, lo, hi)
		}
	}
	if firstSlot("/var/lib/corral") == firstSlot("/srv/corral") {
		t.Errorf("two data directories start their search at one range")
	}
}

// TestIDRangesAreHostWide: two servers of one host (other data
// directories, one stage) never give one range twice, whatever order they
// take in; a released range is the other server's to take; a stopped
// server's ranges stay its sandboxes' while their bundles exist, are taken
// over once those are gone, and are taken again when it restarts.
func TestIDRangesAreHostWide(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	const first = 7
	a, b := testRanges(t, base, "a", first, nil), testRanges(t, base, "b", first, nil)
	slots := map[string]int{}
	owner := map[int]string{}
	take := func(r *idRanges, id string) int {
		t.Helper()
		slot, err := r.take(id)
		if err != nil {
			t.Fatalf("take(%s): %v", id, err)
		}
		if prev, ok := owner[slot]; ok {
			t.Fatalf("take(%s) = range %d, which %s has", id, slot, prev)
		}
		if err := os.Mkdir(filepath.Join(r.bundles, id), 0o700); err != nil {
			t.Fatal(err)
		}
		r.settle(slot)
		if len(r.held) != 0 {
			t.Fatalf("with its bundle made, the server still holds %d slot files", len(r.held))
		}
		slots[id], owner[slot] = slot, id
		return slot
	}
	destroy := func(r *idRanges, id string) {
		t.Helper()
		if err := os.Remove(filepath.Join(r.bundles, id)); err != nil {
			t.Fatal(err)
		}
		r.release(id)
		delete(owner, slots[id])
	}
	slotFile := func(slot int) string { return filepath.Join(base, "corral", "slots", strconv.Itoa(slot)) }

	for i := range 4 {
		take(a, "a"+strconv.Itoa(i))
		take(b, "b"+strconv.Itoa(i))
	}
	if slots["a0"] != first || slots["b0"] != first+1 {
		t.Errorf("the first takes got ranges %d and %d, want %d and %d", slots["a0"], slots["b0"], first, first+1)
	}

	destroy(a, "a0")
	if _, err := os.Lstat(slotFile(slots["a0"])); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a released range's slot file: %v, want it gone", err)
	}
	if got := take(b, "b4"); got != slots["a0"] {
		t.Errorf("after a release, the other server took range %d, want the released %d", got, slots["a0"])
	}

	// Server a stops (or crashes); its sandboxes run on.
	a.close()
	if got := take(b, "b5"); got == slots["a1"] || got == slots["a2"] || got == slots["a3"] {
		t.Errorf("range %d of a sandbox whose server stopped was given again", got)
	}
	// a1 was destroyed before its server could release its range (a
	// crash in between): its slot is stale.
	if err := os.Remove(filepath.Join(a.bundles, "a1")); err != nil {
		t.Fatal(err)
	}
	delete(owner, slots["a1"])
	// A child another test forked before a closed may still hold a copy of
	// the slot's lock until it execs: that moment is waited out (no new
	// copy can be made once a has closed it).
	waitUnlocked(t, slotFile(slots["a1"]))
	if got := take(b, "b6"); got != slots["a1"] {
		t.Errorf("a stale range was not taken over: got %d, want %d", got, slots["a1"])
	}

	// Between taking a range and making its bundle, a server holds the
	// slot file locked: no other server takes it as stale then.
	pending, err := b.take("pending")
	if err != nil {
		t.Fatal(err)
	}
	if got := take(a, "a-during"); got == pending {
		t.Errorf("range %d, taken by a server that is making its bundle, was taken over", got)
	}
	b.release("pending")

	// Server a restarts and knows its sandboxes' ranges again, holding no
	// descriptor for them: their bundles keep them.
	a2 := testRanges(t, base, "a", first, map[int]string{slots["a2"]: "a2", slots["a3"]: "a3"})
	if err := a2.retake(); err != nil {
		t.Fatal(err)
	}
	if len(a2.used) != 2 || len(a2.held) != 0 {
		t.Errorf("the restarted server knows %d ranges and holds %d slot files, want 2 and 0", len(a2.used), len(a2.held))
	}
	if got := take(b, "b7"); got == slots["a2"] || got == slots["a3"] {
		t.Errorf("range %d of a restarted server's sandbox was taken over", got)
	}
	// a3's bundle is gone (destroyed) before its server released the
	// range: the range is stale and may be taken; the late release then
	// leaves the new owner's slot file alone.
	if err := os.Remove(filepath.Join(a2.bundles, "a3")); err != nil {
		t.Fatal(err)
	}
	delete(owner, slots["a3"])
	if got := take(b, "b7b"); got != slots["a3"] {
		t.Errorf("a destroyed sandbox's range was not taken over: got %d, want %d", got, slots["a3"])
	}
	a2.release("a3")
	if b, err := os.ReadFile(slotFile(slots["a3"])); err != nil || !strings.Contains(string(b), "b7b") {
		t.Errorf("a late release of a stale range touched its new owner's slot file: %q, %v", b, err)
	}
	take(a2, "a4")
	destroy(a2, "a2")
	if got := take(b, "b8"); got != slots["a2"] {
		t.Errorf("after the restarted server's release, the other took range %d, want %d", got, slots["a2"])
	}
}

// waitUnlocked waits until no process holds the flock of path (five
// seconds at most).
func waitUnlocked(t *testing.T, path string) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		f, err := os.Open(path)
		if err != nil {
			return
		}
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			_ = unix.Flock(int(f.Fd()), unix.LOCK_UN)
		}
		f.Close()
		if err == nil {
			return
		}
	}
}
