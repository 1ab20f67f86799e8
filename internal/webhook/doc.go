// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

// Package webhook delivers a tenant's events to the URLs it subscribed:
// subscriptions (validated, each with a signing secret), a durable
// outbox (deliveries are rows of the server's store, made from the event
// log past each subscription's cursor, so what was recorded while the
// server was down or before a crash is delivered after it starts),
// at-least-once delivery with the event's ID for deduplication, retries
// with exponential backoff and full jitter, dead letters after
// Config.MaxAttempts, and an HMAC-SHA256 signature over the timestamp
// and the body. A receiver's address is checked when the connection is
// made, not only when the name is subscribed: the dialer's control hook
// sees the address the name resolved to at delivery, so a name that
// resolves to a metadata, private or loopback address later (DNS
// rebinding) is refused like one that did at once. The server's store
// implements Store; internal/cli wires the Service to the lifecycle's
// event log and internal/server serves it.
package webhook
