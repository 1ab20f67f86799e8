// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package sandbox

import (
	"errors"
	"time"
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
}

// Idempotency binds a create's Idempotency-Key to the sandbox it made.
type Idempotency struct {
	Tenant      string
	Key         string
	RequestHash string
	SandboxID   string
	CreatedAt   time.Time
}
