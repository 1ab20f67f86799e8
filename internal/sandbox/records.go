// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package sandbox

import (
	"encoding/json"
	"errors"
	"strconv"
	"time"

	"github.com/corral-dev/corral/api"
)

// What the lifecycle keeps beside its records, whichever store keeps them
// (SQLite on one server, the cluster's Secrets for replicas).

// ErrConflict is what a store that versions records (a cluster-backed
// one) returns when a record changed since the revision an update was
// computed from.
var ErrConflict = errors.New("the record changed since it was read")

// Event is one entry of the event log.
type Event struct {
	Seq       int64
	At        time.Time
	Tenant    string
	SandboxID string
	// Type is a short verb: created, started, paused, deleted, expired...
	Type    string
	State   string
	Reason  string
	Message string
	// Detail is structured JSON, or empty.
	Detail string
	// Kind is the event's type in its tenant's stream (api.Event*), or
	// empty for an event that stays in the sandbox's own log.
	Kind string
	// Metadata is the sandbox's metadata when the event happened (kept
	// with published events only).
	Metadata map[string]string
}

// Public is the event as its tenant's stream and webhooks show it.
func (ev *Event) Public() api.Event {
	out := api.Event{
		ID: strconv.FormatInt(ev.Seq, 10), Type: ev.Kind, Time: ev.At, SandboxID: ev.SandboxID,
		Source: api.EventSourceServer, State: ev.State, Reason: ev.Reason, Message: ev.Message, Metadata: ev.Metadata,
	}
	if ev.Detail != "" && json.Valid([]byte(ev.Detail)) {
		out.Data = json.RawMessage(ev.Detail)
	}
	if ev.Kind == api.EventApp {
		out.Source = api.EventSourceSandbox
	}
	return out
}

// Idempotency binds a create's Idempotency-Key to the sandbox it made.
type Idempotency struct {
	Tenant      string
	Key         string
	RequestHash string
	SandboxID   string
	CreatedAt   time.Time
}

// EventQuery selects published events: of Tenant, after position After,
// at most Limit, of the Kinds named (none: all) and of SandboxID (empty:
// all), oldest first.
type EventQuery struct {
	Tenant    string
	After     int64
	Limit     int
	Kinds     []string
	SandboxID string
}
