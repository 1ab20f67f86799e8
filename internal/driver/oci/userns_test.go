// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package oci

import (
	"testing"
)

// TestIDRangesAreNeverGivenTwice: a range held by a bundle on disk or
// taken since is not given again until released; the search starts at the
// server's own place and wraps around; ranges stay in systemd's container
// range.
func TestIDRangesAreNeverGivenTwice(t *testing.T) {
	first := usernsSlots - 2
	r := &idRanges{first: first, load: func() (map[int]string, error) {
		return map[int]string{first: "on-disk"}, nil
	}}
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
