// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package api

import (
	"encoding/json"
	"time"
)

// Event is one entry of a tenant's event stream (GET /v1/events, a
// corral extension) and the body of a webhook delivery. ID is the event's
// position in the server's log as a decimal number: stable, increasing,
// the stream's Last-Event-ID and a webhook receiver's deduplication key.
type Event struct {
	ID        string    `json:"id"`
	Type      string    `json:"type"`
	Time      time.Time `json:"time"`
	SandboxID string    `json:"sandboxId,omitempty"`
	// Source is EventSourceServer, or EventSourceSandbox for an event code
	// in the sandbox posted (its data is what the code sent).
	Source  string `json:"source"`
	State   string `json:"state,omitempty"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	// Metadata is the sandbox's metadata when the event happened.
	Metadata map[string]string `json:"metadata,omitempty"`
	Data     json.RawMessage   `json:"data,omitempty"`
}

// Where an event comes from.
const (
	EventSourceServer  = "server"
	EventSourceSandbox = "sandbox"
)

// Event types of the tenant stream and of webhooks.
const (
	EventSandboxCreated    = "sandbox.created"
	EventSandboxRunning    = "sandbox.running"
	EventSandboxPaused     = "sandbox.paused"
	EventSandboxResumed    = "sandbox.resumed"
	EventSandboxRenewed    = "sandbox.renewed"
	EventSandboxExpiring   = "sandbox.expiring"
	EventSandboxExpired    = "sandbox.expired"
	EventSandboxExited     = "sandbox.exited"
	EventSandboxTerminated = "sandbox.terminated"
	EventSandboxDeleted    = "sandbox.deleted"
	EventSandboxFailed     = "sandbox.failed"
	// EventSandboxIdle is published when a sandbox's idle timeout passed,
	// before it is paused or deleted; data has idleSeconds and action.
	EventSandboxIdle = "sandbox.idle"
	// EventSandboxForked is published on the source of a fork once every
	// fork runs; its data names them.
	EventSandboxForked   = "sandbox.forked"
	EventSnapshotReady   = "snapshot.ready"
	EventSnapshotFailed  = "snapshot.failed"
	EventSnapshotDeleted = "snapshot.deleted"
	// EventEgressDenied is a connection or name the sandbox's network
	// policy refused (sampled: at most about one a second per sandbox);
	// its data is the enforcer's decision.
	EventEgressDenied = "egress.denied"
	// EventApp is an event code in a sandbox posted on its socket
	// (source "sandbox"); data is {"name", "data"} as it was posted.
	EventApp = "app.event"
	// EventWebhookPing is the body of a webhook's test delivery only; it
	// is never in the stream.
	EventWebhookPing = "webhook.ping"
)

// EventTypes are the event types a stream filter or a webhook
// subscription may name.
var EventTypes = []string{
	EventSandboxCreated, EventSandboxRunning, EventSandboxPaused, EventSandboxResumed, EventSandboxRenewed,
	EventSandboxExpiring, EventSandboxExpired, EventSandboxExited, EventSandboxTerminated, EventSandboxDeleted,
	EventSandboxFailed, EventSandboxIdle, EventSandboxForked, EventSnapshotReady, EventSnapshotFailed, EventSnapshotDeleted,
	EventEgressDenied, EventQuotaRefused, EventQuotaQueued, EventApp,
}

// Webhook headers: the event's ID and type, the delivery's attempt
// (from 1), and the signature, "t=UNIX,v1=HEX" where HEX is the
// HMAC-SHA256, keyed by the subscription's secret, of "UNIX." followed
// by the body.
const (
	HeaderWebhookEventID   = "Corral-Event-Id"
	HeaderWebhookEventType = "Corral-Event-Type"
	HeaderWebhookAttempt   = "Corral-Delivery-Attempt"
	HeaderWebhookSignature = "Corral-Signature"
)

// WebhookRequest makes a subscription (POST /v1/webhooks). Types empty:
// every type. Secret empty: the server makes one (answered once).
type WebhookRequest struct {
	URL         string   `json:"url"`
	Types       []string `json:"types,omitempty"`
	Secret      string   `json:"secret,omitempty"`
	Description string   `json:"description,omitempty"`
}

// Webhook is a subscription. Secret is set only in the answer to its
// creation.
type Webhook struct {
	ID          string    `json:"id"`
	URL         string    `json:"url"`
	Types       []string  `json:"types"`
	Description string    `json:"description,omitempty"`
	Secret      string    `json:"secret,omitempty"`
	CreatedAt   time.Time `json:"createdAt"`
}

// WebhookList answers GET /v1/webhooks.
type WebhookList struct {
	Items []Webhook `json:"items"`
}

// Delivery states.
const (
	DeliveryPending   = "pending"
	DeliveryDelivered = "delivered"
	DeliveryDead      = "dead"
)

// WebhookDelivery is one event's delivery to a subscription: its state,
// attempts, and the last attempt's HTTP status (0: none answered) or
// error.
type WebhookDelivery struct {
	ID          int64      `json:"id"`
	EventID     string     `json:"eventId"`
	EventType   string     `json:"eventType"`
	State       string     `json:"state"`
	Attempts    int        `json:"attempts"`
	LastStatus  int        `json:"lastStatus,omitempty"`
	LastError   string     `json:"lastError,omitempty"`
	NextAt      *time.Time `json:"nextAttemptAt,omitempty"`
	CreatedAt   time.Time  `json:"createdAt"`
	UpdatedAt   time.Time  `json:"updatedAt"`
	DeliveredAt *time.Time `json:"deliveredAt,omitempty"`
}

// WebhookDeliveryList answers GET /v1/webhooks/{id}/deliveries, newest
// first.
type WebhookDeliveryList struct {
	Items []WebhookDelivery `json:"items"`
}

// Error codes of events and webhooks.
const (
	CodeWebhookNotFound       = "WEBHOOK::NOT_FOUND"
	CodeWebhookInvalidURL     = "WEBHOOK::INVALID_URL"
	CodeWebhookAddressRefused = "WEBHOOK::ADDRESS_NOT_ALLOWED"
	CodeWebhookLimit          = "WEBHOOK::LIMIT_EXCEEDED"
	CodeEventInvalidType      = "EVENT::INVALID_TYPE"
	CodeEventTooManyStreams   = "EVENT::TOO_MANY_STREAMS"
)
