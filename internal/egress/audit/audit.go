// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

// Package audit is an egress enforcer's decision log: every DNS answer
// and every new connection allowed or denied (and, with the vault, every
// credential injected), with the rule that decided. The last Capacity
// events are kept in memory, numbered, and readable from any position;
// readers can wait for the next one.
package audit

import (
	"sync"
	"time"
)

// Capacity is how many events a Log keeps.
const Capacity = 8192

// Kinds of events.
const (
	KindDNS        = "dns"
	KindConnection = "connection"
	KindCredential = "credential"
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
	mu     sync.Mutex
	events []Event // a ring of Capacity
	next   int64   // the Seq the next event gets
	wake   chan struct{}
}

// New returns an empty log for one enforcer run.
func New(sandboxID string) *Log {
	return &Log{epoch: time.Now().UnixNano(), sandboxID: sandboxID, next: 1, wake: make(chan struct{})}
}

// Epoch identifies this run.
func (l *Log) Epoch() int64 { return l.epoch }

// Append numbers and stores ev, and wakes waiting readers.
func (l *Log) Append(ev Event) Event {
	l.mu.Lock()
	defer l.mu.Unlock()
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
