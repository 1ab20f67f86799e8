// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package audit

import "testing"

func TestLogKeepsTheNewestAndNumbersThem(t *testing.T) {
	l := New("sb")
	evs, wake := l.Since(0)
	if len(evs) != 0 {
		t.Fatalf("empty log returned %v", evs)
	}
	for i := range Capacity + 10 {
		ev := l.Append(Event{Kind: KindDNS, Target: "x"})
		if ev.Seq != int64(i+1) || ev.SandboxID != "sb" || ev.Epoch != l.Epoch() || ev.Time.IsZero() {
			t.Fatalf("appended %+v", ev)
		}
	}
	select {
	case <-wake:
	default:
		t.Error("an append did not wake a waiting reader")
	}
	evs, _ = l.Since(0)
	if len(evs) != Capacity || evs[0].Seq != 11 || evs[len(evs)-1].Seq != Capacity+10 {
		t.Errorf("after overflow: %d events from %d to %d", len(evs), evs[0].Seq, evs[len(evs)-1].Seq)
	}
	evs, _ = l.Since(Capacity + 5)
	if len(evs) != 5 || evs[0].Seq != Capacity+6 {
		t.Errorf("since %d: %+v", Capacity+5, evs)
	}
	if evs, _ = l.Since(Capacity + 10); len(evs) != 0 {
		t.Errorf("since the last: %d events", len(evs))
	}
}
