// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package quota

import "slices"

// Waiter is a request waiting in a Queue. Admitted is closed when it was
// let in: the room it asked for is reserved for it.
type Waiter struct {
	Tenant string
	// ID names the request's sandbox (the caller sets it).
	ID       string
	Need     Usage
	Admitted chan struct{}
	done     bool
}

// Queue holds waiting requests: first come first served within a tenant,
// round-robin across tenants. It is not safe for concurrent use: the
// caller holds its own lock around every call.
type Queue struct {
	byTenant map[string][]*Waiter
	// order is the tenants with waiters, in turn order; next is the
	// index of the tenant whose turn is next.
	order []string
	next  int
}

// NewQueue returns an empty Queue.
func NewQueue() *Queue { return &Queue{byTenant: map[string][]*Waiter{}} }

// Len is how many requests wait, in all or of tenant (when not "").
func (q *Queue) Len(tenant string) int {
	if tenant != "" {
		return len(q.byTenant[tenant])
	}
	n := 0
	for _, ws := range q.byTenant {
		n += len(ws)
	}
	return n
}

// Add queues a request of tenant needing need.
func (q *Queue) Add(tenant string, need Usage) *Waiter {
	w := &Waiter{Tenant: tenant, Need: need, Admitted: make(chan struct{})}
	if len(q.byTenant[tenant]) == 0 {
		// A tenant that starts waiting joins the round last: just before
		// the tenant whose turn is next.
		if q.next > 0 && q.next <= len(q.order) {
			q.order = slices.Insert(q.order, q.next, tenant)
			q.next++
		} else {
			q.order = append(q.order, tenant)
		}
	}
	q.byTenant[tenant] = append(q.byTenant[tenant], w)
	return w
}

// Remove takes w out (it gave up), unless it was admitted; it reports
// whether w was still waiting.
func (q *Queue) Remove(w *Waiter) bool {
	if w.done {
		return false
	}
	ws := q.byTenant[w.Tenant]
	i := slices.Index(ws, w)
	if i < 0 {
		return false
	}
	q.byTenant[w.Tenant] = slices.Delete(ws, i, i+1)
	w.done = true
	if len(q.byTenant[w.Tenant]) == 0 {
		q.dropTenant(w.Tenant)
	}
	return true
}

func (q *Queue) dropTenant(tenant string) {
	delete(q.byTenant, tenant)
	i := slices.Index(q.order, tenant)
	if i < 0 {
		return
	}
	q.order = slices.Delete(q.order, i, i+1)
	if i < q.next {
		q.next--
	}
	if q.next >= len(q.order) {
		q.next = 0
	}
}

// Verdict is what Dispatch's caller says of a waiter.
type Verdict int

const (
	// Admit lets the waiter in (the caller reserved its room).
	Admit Verdict = iota
	// Skip leaves it waiting: its tenant's own limits hold it back, and
	// the next tenant's turn comes.
	Skip
	// Stop ends the dispatch: there is no room for anyone (the server's
	// own capacity), and the waiter keeps its turn.
	Stop
)

// Dispatch offers each tenant's first waiter, in turn, to fits; an
// admitted waiter leaves the queue and its Admitted is closed. Rounds go
// on while some tenant's first waiter got in. A tenant whose first
// waiter does not fit blocks only its own waiters.
func (q *Queue) Dispatch(fits func(*Waiter) Verdict) int {
	admitted := 0
	for {
		progress := false
		for range len(q.order) {
			if len(q.order) == 0 {
				break
			}
			if q.next >= len(q.order) {
				q.next = 0
			}
			tenant := q.order[q.next]
			w := q.byTenant[tenant][0]
			switch fits(w) {
			case Stop:
				return admitted
			case Skip:
				q.next++
				continue
			}
			q.byTenant[tenant] = q.byTenant[tenant][1:]
			w.done = true
			close(w.Admitted)
			admitted++
			progress = true
			if len(q.byTenant[tenant]) == 0 {
				q.dropTenant(tenant)
			} else {
				q.next++
			}
		}
		if !progress || len(q.order) == 0 {
			return admitted
		}
	}
}
