// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package lifecycle

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/errdefs"
	"github.com/corral-dev/corral/internal/sandbox"
)

// EventLog is Records that also keep each tenant's published events in
// one order (the tenant stream, GET /v1/events, and webhooks read it).
// Positions (Seq) only grow and are never reused, and an event becomes
// readable only after every event of a lower position has: a reader
// that resumes after position N misses nothing.
type EventLog interface {
	TenantEvents(ctx context.Context, q sandbox.EventQuery) ([]sandbox.Event, error)
	// LastSeq is the position of the newest event of any tenant (0: none).
	LastSeq(ctx context.Context) (int64, error)
}

// EventFollower is an EventLog other servers write too: FollowEvents
// calls changed after each change to it, by any server, until ctx ends.
type EventFollower interface {
	FollowEvents(ctx context.Context, changed func()) error
}

// kindOf is the published type of a record change, or "" for one that
// stays in the sandbox's own log (intermediate states, recovery).
func kindOf(evType string, sb *sandbox.Sandbox) string {
	switch evType {
	case "created":
		return api.EventSandboxCreated
	case "started":
		return api.EventSandboxRunning
	case "paused":
		return api.EventSandboxPaused
	case "resumed":
		return api.EventSandboxResumed
	case "renewed":
		return api.EventSandboxRenewed
	case "start_failed", "lost":
		return api.EventSandboxFailed
	case "exited":
		return api.EventSandboxExited
	case "terminated":
		if sb.Status.Reason == sandbox.ReasonTTLExpiry {
			return api.EventSandboxExpired
		}
		return api.EventSandboxTerminated
	case "deleted":
		return api.EventSandboxDeleted
	case "snapshot_ready":
		return api.EventSnapshotReady
	case "snapshot_failed":
		return api.EventSnapshotFailed
	case "snapshot_deleted":
		return api.EventSnapshotDeleted
	}
	return ""
}

// eventLog returns the records' event stream, or an error saying the
// records keep none.
func (m *Manager) eventLog() (EventLog, error) {
	if l, ok := m.rec.(EventLog); ok {
		return l, nil
	}
	return nil, errdefs.Newf(errdefs.ErrNotImplemented, api.CodeAPINotSupported,
		"the %s runtime's records keep no event stream yet", m.cfg.DriverName)
}

// TenantEvents reads published events (q.Tenant is the caller's).
func (m *Manager) TenantEvents(ctx context.Context, q sandbox.EventQuery) ([]sandbox.Event, error) {
	l, err := m.eventLog()
	if err != nil {
		return nil, err
	}
	return l.TenantEvents(ctx, q)
}

// LastEventSeq is the newest event's position: where a stream that asks
// for new events only starts.
func (m *Manager) LastEventSeq(ctx context.Context) (int64, error) {
	l, err := m.eventLog()
	if err != nil {
		return 0, err
	}
	return l.LastSeq(ctx)
}

// EventsChanged returns a channel closed at the next write of an event
// by this server, or (shared records that are an EventFollower) by any.
func (m *Manager) EventsChanged() <-chan struct{} {
	m.evMu.Lock()
	defer m.evMu.Unlock()
	return m.evCh
}

// eventsWritten wakes the followers of EventsChanged.
func (m *Manager) eventsWritten() {
	m.evMu.Lock()
	close(m.evCh)
	m.evCh = make(chan struct{})
	m.evMu.Unlock()
}

// publish appends events that change no record (a warning, a fork's
// result) to the log.
func (m *Manager) publish(ctx context.Context, evs ...sandbox.Event) {
	if err := m.appendEvents(ctx, evs); err != nil && !errors.Is(err, errdefs.ErrNotImplemented) {
		m.log.WarnContext(ctx, "publish events", "err", err)
	}
}

// appendEvents writes events that change no record and wakes the
// stream's followers; records that keep no such events say so.
func (m *Manager) appendEvents(ctx context.Context, evs []sandbox.Event) error {
	al, ok := m.rec.(AuditLog)
	if !ok {
		return errdefs.Newf(errdefs.ErrNotImplemented, api.CodeAPINotSupported, "the %s runtime's records keep no events", m.cfg.DriverName)
	}
	if err := al.AppendAudit(ctx, evs); err != nil {
		return err
	}
	m.eventsWritten()
	return nil
}

// published is an event of sb that changes no record, with data.
func published(sb *sandbox.Sandbox, kind string, data any) sandbox.Event {
	ev := sandbox.Event{
		At: time.Now().UTC(), Tenant: sb.Tenant, SandboxID: sb.ID, Type: kind, Kind: kind,
		State: sb.Status.State.String(), Metadata: sb.Metadata,
	}
	if data != nil {
		b, _ := json.Marshal(data)
		ev.Detail = string(b)
	}
	return ev
}

// warnExpiring publishes sandbox.expiring for sb, whose expiry is
// within the warning period; the caller marked it warned.
func (m *Manager) warnExpiring(ctx context.Context, sb *sandbox.Sandbox) {
	m.publish(ctx, published(sb, api.EventSandboxExpiring, map[string]any{"expiresAt": sb.ExpiresAt}))
}
