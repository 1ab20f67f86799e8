// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package quota

import (
	"strings"
	"testing"
	"time"

	"github.com/corral-dev/corral/api"
)

// TestQueueIsFair: tenant A's 50 waiting creates hold tenant B's one
// back by one turn at most, and each tenant's own are served in order.
func TestQueueIsFair(t *testing.T) {
	q := NewQueue()
	var as []*Waiter
	for range 50 {
		as = append(as, q.Add("a", Usage{Running: 1}))
	}
	b := q.Add("b", Usage{Running: 1})
	var served []*Waiter
	for i := 0; q.Len("") > 0 && i < 100; i++ {
		// One slot frees at a time: each dispatch lets one in.
		one := false
		q.Dispatch(func(w *Waiter) Verdict {
			if one {
				return Stop
			}
			one = true
			served = append(served, w)
			return Admit
		})
	}
	if len(served) != 51 {
		t.Fatalf("served %d", len(served))
	}
	bAt := -1
	for i, w := range served {
		if w == b {
			bAt = i
		}
	}
	if bAt < 0 || bAt > 1 {
		t.Errorf("tenant b's create was let in %d-th, after %d of a's", bAt+1, bAt)
	}
	next := 0
	for _, w := range served {
		if w.Tenant == "a" {
			if w != as[next] {
				t.Fatalf("a's creates out of order")
			}
			next++
		}
		select {
		case <-w.Admitted:
		default:
			t.Error("a served waiter's Admitted is open")
		}
	}
}

// TestQueueBlockedTenantBlocksOnlyItself: a tenant whose first waiter
// does not fit leaves the others' turns alone.
func TestQueueBlockedTenantBlocksOnlyItself(t *testing.T) {
	q := NewQueue()
	a1 := q.Add("a", Usage{Running: 5})
	q.Add("a", Usage{Running: 1})
	b1 := q.Add("b", Usage{Running: 1})
	c1 := q.Add("c", Usage{Running: 1})
	n := q.Dispatch(func(w *Waiter) Verdict {
		if w.Tenant == "a" {
			return Skip
		}
		return Admit
	})
	if n != 2 || q.Len("a") != 2 || q.Len("b") != 0 || q.Len("c") != 0 {
		t.Errorf("admitted %d; left a:%d b:%d c:%d", n, q.Len("a"), q.Len("b"), q.Len("c"))
	}
	for _, w := range []*Waiter{b1, c1} {
		select {
		case <-w.Admitted:
		default:
			t.Errorf("%s was not admitted", w.Tenant)
		}
	}
	if !q.Remove(a1) || q.Remove(a1) || q.Len("a") != 1 {
		t.Errorf("remove: left %d", q.Len("a"))
	}
	if q.Remove(b1) {
		t.Error("an admitted waiter was removed")
	}
}

func TestCheckNamesTheLimit(t *testing.T) {
	l := Limits{Running: 2, Sandboxes: 3, CPUMillis: 2000, MemoryBytes: 4 << 30, CreatesPerMinute: 10}
	for _, c := range []struct {
		u, need Usage
		want    string
	}{
		{Usage{Running: 1, Sandboxes: 1}, Usage{Running: 1, Sandboxes: 1}, ""},
		{Usage{Running: 2, Sandboxes: 2}, Usage{Running: 1, Sandboxes: 1}, "running"},
		{Usage{Running: 0, Sandboxes: 3}, Usage{Running: 1, Sandboxes: 1}, "sandboxes"},
		{Usage{Running: 2, Sandboxes: 3}, Usage{Running: 0, Sandboxes: 0}, ""}, // a need of nothing passes nothing
		{Usage{CPUMillis: 1500}, Usage{Running: 1, CPUMillis: 1000}, "cpu"},
		{Usage{MemoryBytes: 3 << 30}, Usage{MemoryBytes: 2 << 30}, "memory"},
		{Usage{Creates: 10}, Usage{Creates: 1}, "createsPerMinute"},
	} {
		x := l.Check(c.u, c.need)
		got := ""
		if x != nil {
			got = x.Limit
		}
		if got != c.want {
			t.Errorf("Check(%+v, %+v) = %q, want %q", c.u, c.need, got, c.want)
		}
	}
	if x := l.Check(Usage{MemoryBytes: 3 << 30}, Usage{MemoryBytes: 2 << 30}); !strings.Contains(x.Message("t1"), "4Gi") || !x.Pausable {
		t.Errorf("message %q", x.Message("t1"))
	}
}

func TestOverridesFromWire(t *testing.T) {
	i := func(v int64) *int64 { return &v }
	s := func(v string) *string { return &v }
	o, err := FromWire(api.QuotaRequest{Running: i(3), CPU: s("1.5"), Memory: s("2Gi"), Policy: s(PolicyPauseOldest), QueueTimeoutSeconds: i(30)})
	if err != nil {
		t.Fatal(err)
	}
	l := Limits{Running: 10, Sandboxes: 20, Policy: PolicyReject}.Apply(o)
	if l.Running != 3 || l.Sandboxes != 20 || l.CPUMillis != 1500 || l.MemoryBytes != 2<<30 || l.Policy != PolicyPauseOldest || l.QueueTimeout != 30*time.Second {
		t.Errorf("limits = %+v", l)
	}
	w := o.Wire()
	if *w.CPU != "1500m" || *w.Memory != "2Gi" || w.Sandboxes != nil {
		t.Errorf("wire = %+v", w)
	}
	for name, in := range map[string]api.QuotaRequest{
		"running":             {Running: i(-1)},
		"sandboxes":           {Sandboxes: i(2_000_000)},
		"cpu":                 {CPU: s("lots")},
		"memory":              {Memory: s("-1Gi")},
		"policy":              {Policy: s("drop")},
		"queueTimeoutSeconds": {QueueTimeoutSeconds: i(3600)},
	} {
		if _, err := FromWire(in); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: %v", name, err)
		}
	}
}
