// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package audit

import (
	"strconv"
	"testing"

	"golang.org/x/time/rate"
)

func TestLogKeepsTheNewestAndNumbersThem(t *testing.T) {
	l := New("sb")
	l.limit = rate.NewLimiter(rate.Inf, 0)
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

// A sandbox that makes decisions without end (random names, sprayed
// ports) gets them counted past the rate, not kept.
func TestLogCountsWhatIsOverTheRate(t *testing.T) {
	l := New("sb")
	kept := 0
	for range 50 * Burst {
		if l.Append(Event{Kind: KindDNS, Target: "flood"}).Seq != 0 {
			kept++
		}
	}
	if kept < Burst || kept > Burst+Rate {
		t.Fatalf("%d of %d events were kept; want the burst of %d (and what the rate refilled)", kept, 50*Burst, Burst)
	}
	// The next one kept says how many were not (the refills during the
	// flood each said so for what came before them).
	l.limit = rate.NewLimiter(rate.Inf, 0)
	l.Append(Event{Kind: KindDNS, Target: "after"})
	evs, _ := l.Since(0)
	if last := evs[len(evs)-1]; last.Target != "after" || evs[len(evs)-2].Kind != KindSuppressed {
		t.Fatalf("after the flood: %+v", evs[len(evs)-2:])
	}
	dropped := 0
	for _, ev := range evs {
		if ev.Kind == KindSuppressed {
			n, err := strconv.Atoi(ev.Target)
			if err != nil {
				t.Fatalf("a suppressed event's count = %q", ev.Target)
			}
			dropped += n
		}
	}
	if dropped != 50*Burst-kept {
		t.Errorf("suppressed events count %d, want %d", dropped, 50*Burst-kept)
	}
}
