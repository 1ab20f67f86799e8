// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

// Package audit is an egress enforcer's decision log: every DNS answer
// and every new connection allowed or denied (and, with the vault, every
// credential injected), with the rule that decided. The last Capacity
// events are kept in memory, numbered, and readable from any position;
// readers can wait for the next one.
package audit

import (
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Capacity is how many events a Log keeps.
const Capacity = 8192

// Rate and Burst bound the events a Log records per second: the sandbox
// decides how many decisions there are (a lookup per random name, a
// packet per port), and every recorded one travels to the server's
// database. Past the rate, events are counted, not kept, and the count
// is recorded as one KindSuppressed event before the next one that is.
const (
	Rate  = 100
	Burst = 1000
)

// Kinds of events.
const (
	KindDNS        = "dns"
	KindConnection = "connection"
	KindCredential = "credential"
	// KindSuppressed counts the decisions not recorded over the rate
	// (Target: how many).
	KindSuppressed = "suppressed"
)

// Event is one decision.
type Event struct {
	// Epoch identifies the enforcer run (its start, Unix ns); Seq counts
	// from 1 within it.
	Epoch     int64     `json:"epoch"`
	Seq       int64     `json:"seq"`
	Time      time.Time `json:"time"`
	SandboxID string    `json:"sandboxId,omitempty"`
	Kind      string    `json:"kind"`
	// Target is a domain name (dns) or ip:port (connection).
	Target   string `json:"target"`
	Protocol string `json:"protocol,omitempty"`
	// Name is the allowed name a connection's address was resolved for.
	Name     string   `json:"name,omitempty"`
	Decision string   `json:"decision"` // allow or deny
	Rule     string   `json:"rule"`     // what decided, in words
	Addrs    []string `json:"addrs,omitempty"`
	Error    string   `json:"error,omitempty"`
}

// Log is a bounded, numbered event log.
type Log struct {
	epoch     int64
	sandboxID string

	// mu guards the fields below.
	mu         sync.Mutex
	events     []Event // a ring of Capacity
	next       int64   // the Seq the next event gets
	wake       chan struct{}
	limit      *rate.Limiter
	suppressed int64
}

// New returns an empty log for one enforcer run.
func New(sandboxID string) *Log {
	return &Log{epoch: time.Now().UnixNano(), sandboxID: sandboxID, next: 1, wake: make(chan struct{}),
		limit: rate.NewLimiter(Rate, Burst)}
}

// Epoch identifies this run.
func (l *Log) Epoch() int64 { return l.epoch }

// Append numbers and stores ev, and wakes waiting readers. Over the rate
// it only counts ev, and returns it with Seq 0.
func (l *Log) Append(ev Event) Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.limit.Allow() {
		l.suppressed++
		return ev
	}
	if l.suppressed > 0 {
		l.store(Event{Kind: KindSuppressed, Target: strconv.FormatInt(l.suppressed, 10), Decision: "none",
			Rule: "decisions over the audit rate (" + strconv.Itoa(Rate) + "/s) that were not recorded"})
		l.suppressed = 0
	}
	return l.store(ev)
}

// store numbers and keeps ev; l.mu is held.
func (l *Log) store(ev Event) Event {
	ev.Epoch, ev.Seq, ev.SandboxID = l.epoch, l.next, l.sandboxID
	if ev.Time.IsZero() {
		ev.Time = time.Now().UTC()
	}
	l.next++
	if len(l.events) < Capacity {
		l.events = append(l.events, ev)
	} else {
		l.events[(ev.Seq-1)%Capacity] = ev
	}
	close(l.wake)
	l.wake = make(chan struct{})
	return ev
}

// Since returns the kept events with Seq > seq, oldest first, and a
// channel closed when the next event arrives.
func (l *Log) Since(seq int64) ([]Event, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	first := l.next - int64(len(l.events)) // the oldest kept Seq
	if seq < first-1 {
		seq = first - 1
	}
	var out []Event
	for s := seq + 1; s < l.next; s++ {
		out = append(out, l.events[(s-1)%Capacity])
	}
	return out, l.wake
}
