// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package lifecycle

import (
	"context"
	"iter"
	"maps"
	"time"

	"github.com/corral-dev/corral/internal/driver"
	"github.com/corral-dev/corral/internal/sandbox"
)

// reapLoop expires sandboxes whose TTL passed and forgets terminal ones
// whose retention passed. It sleeps until the earliest such deadline and
// wakes early when a create, renew or state change moves one.
func (m *Manager) reapLoop(ctx context.Context) {
	for {
		next := m.reap(ctx, time.Now())
		timer := time.NewTimer(time.Until(next))
		select {
		case <-ctx.Done():
		case <-m.wake:
		case <-timer.C:
		}
		timer.Stop()
		if ctx.Err() != nil {
			return
		}
	}
}

// rescanEvery is how often the reaper looks at every sandbox, not only
// those whose deadline came or that changed: a change no wake-up named
// is caught within it.
const rescanEvery = time.Minute

// reap starts the expiry of every due sandbox, purges terminal sandboxes
// past retention, and returns when to look again. It looks at the
// sandboxes whose deadline came and those wakeReaper named since, not at
// every sandbox (but once per rescanEvery): its work on a create or a
// renew does not grow with the number of sandboxes.
func (m *Manager) reap(ctx context.Context, now time.Time) time.Time {
	var due, purge []*entry
	var warn []*sandbox.Sandbox
	m.mu.Lock()
	look := func(id string) {
		m.reapLooked++
		e, ok := m.sandboxes[id]
		if !ok {
			m.forgetReaped(id)
			return
		}
		at, d, p, w := m.reapOne(id, e, now)
		m.deadlines.set(id, at)
		if d {
			due = append(due, e)
		}
		if p {
			purge = append(purge, e)
		}
		if w != nil {
			warn = append(warn, w)
		}
	}
	if m.rescanAt.IsZero() || !now.Before(m.rescanAt) {
		m.rescanAt = now.Add(rescanEvery)
		for id := range m.sandboxes {
			look(id)
		}
		for _, ids := range []iter.Seq[string]{maps.Keys(m.deadlines.index), maps.Keys(m.warned), maps.Keys(m.denials)} {
			for id := range ids {
				if _, ok := m.sandboxes[id]; !ok {
					m.forgetReaped(id)
				}
			}
		}
		clear(m.reapDirty)
	} else {
		for id := range m.reapDirty {
			look(id)
		}
		clear(m.reapDirty)
		for {
			id, at := m.deadlines.first()
			if id == "" || now.Before(at) {
				break
			}
			m.deadlines.remove(id)
			look(id)
		}
	}
	next := m.rescanAt
	if _, at := m.deadlines.first(); !at.IsZero() && at.Before(next) {
		next = at
	}
	m.mu.Unlock()
	for _, sb := range warn {
		m.warnExpiring(ctx, sb)
	}
	for _, e := range due {
		m.spawn(func(ctx context.Context) { m.expire(ctx, e) })
	}
	for _, e := range purge {
		if err := m.remove(ctx, e, "forgotten"); err != nil {
			m.log.WarnContext(ctx, "forget terminal sandbox", "sandbox_id", m.current(e).ID, "err", err)
		}
	}
	return next
}

// forgetReaped drops what the reaper and the denial stream keep of a
// sandbox no longer in the table, m.mu held.
func (m *Manager) forgetReaped(id string) {
	m.deadlines.remove(id)
	delete(m.warned, id)
	delete(m.denials, id)
}

// reapOne is the reaper's look at one sandbox, m.mu held: whether its
// expiry is due, whether it is to be forgotten, whether to warn of its
// expiry, and when to look at it again (zero: only when it changes).
func (m *Manager) reapOne(id string, e *entry, now time.Time) (next time.Time, due, purge bool, warn *sandbox.Sandbox) {
	earliest := func(t time.Time) {
		if next.IsZero() || t.Before(next) {
			next = t
		}
	}
	sb := e.sb
	switch {
	case sb.Status.State.Terminal():
		forgetAt := sb.Status.LastTransitionAt.Add(m.cfg.RetainTerminated)
		if !now.Before(forgetAt) {
			purge = true
		} else {
			earliest(forgetAt)
		}
	case sb.Status.State == sandbox.StateStopping:
		// Retried by maintain.
	case sb.Status.State == sandbox.StatePaused:
		// A paused sandbox's time to live does not run down; one paused
		// past the retention is deleted.
		if r := m.cfg.PausedRetention; r > 0 {
			if at := sb.Status.LastTransitionAt.Add(r); !now.Before(at) {
				if !m.expiring[id] {
					m.expiring[id] = true
					due = true
				}
			} else {
				earliest(at)
			}
		}
	case sb.ExpiresAt.IsZero():
	case sb.Expired(now):
		if !m.expiring[id] {
			m.expiring[id] = true
			due = true
		}
	default:
		earliest(sb.ExpiresAt)
		if w := m.cfg.ExpiryWarning; w > 0 && !m.warned[id].Equal(sb.ExpiresAt) {
			if warnAt := sb.ExpiresAt.Add(-w); now.Before(warnAt) {
				earliest(warnAt)
			} else {
				m.warned[id] = sb.ExpiresAt
				warn = sb
			}
		}
	}
	return next, due, purge, warn
}

// expire destroys a sandbox whose TTL passed, unless a renew got there first.
func (m *Manager) expire(ctx context.Context, e *entry) {
	e.op.Lock()
	defer e.op.Unlock()
	sb := m.current(e)
	defer func() {
		m.mu.Lock()
		delete(m.expiring, sb.ID)
		m.mu.Unlock()
	}()
	now := time.Now()
	reason, msg := sandbox.ReasonTTLExpiry, "the sandbox expired at "+sb.ExpiresAt.Format(time.RFC3339)
	switch {
	case !m.tracked(e) || sb.Status.State.Terminal():
		return
	case sb.Status.State == sandbox.StatePaused:
		at := sb.Status.LastTransitionAt.Add(m.cfg.PausedRetention)
		if m.cfg.PausedRetention <= 0 || now.Before(at) {
			return
		}
		reason, msg = sandbox.ReasonPausedRetention, "the sandbox was paused for longer than the server keeps paused sandboxes ("+m.cfg.PausedRetention.String()+")"
	case !sb.Expired(now):
		return
	}
	if err := m.stop(ctx, e, reason, msg); err != nil {
		m.log.WarnContext(ctx, "expire sandbox", "sandbox_id", sb.ID, "err", err)
	}
}

// maintainLoop periodically sweeps orphans, retries unfinished destroys and
// recoveries, and forgets old idempotency keys.
func (m *Manager) maintainLoop(ctx context.Context) {
	t := time.NewTicker(m.cfg.MaintainInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		m.maintain(ctx, m.cfg.OrphanGrace)
	}
}

func (m *Manager) maintain(ctx context.Context, grace time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, max(m.cfg.MaintainInterval, time.Minute))
	defer cancel()
	m.mu.RLock()
	var retry []*entry
	for _, e := range m.sandboxes {
		if (e.sb.Status.State == sandbox.StateStopping || e.sb.Status.Reason == sandbox.ReasonRecovering) && !m.busyElsewhere(e.sb) {
			retry = append(retry, e)
		}
	}
	m.mu.RUnlock()
	for _, e := range retry {
		m.recoverEntry(ctx, e)
	}
	// Before sweeping: what another process with this server's identity
	// made is imported, not destroyed.
	m.importUnknown(ctx)
	m.sweepOrphans(ctx, grace)
	m.sweepSnapshotOrphans(ctx)
	m.forgetGone()
	if err := m.rec.PurgeIdempotency(ctx, time.Now().Add(-m.cfg.IdempotencyTTL)); err != nil {
		m.log.WarnContext(ctx, "purge idempotency keys", "err", err)
	}
}

// sweepOrphans destroys backend objects that no live record owns and that
// are older than grace.
func (m *Manager) sweepOrphans(ctx context.Context, grace time.Duration) {
	ls, err := m.d.List(ctx)
	if err != nil {
		m.log.WarnContext(ctx, "list sandboxes for orphan sweep", "err", err)
		return
	}
	now := time.Now()
	for _, l := range ls {
		m.mu.RLock()
		e, ok := m.sandboxes[l.ID]
		owned := ok && !e.sb.Status.State.Terminal() || m.unimported[l.ID]
		m.mu.RUnlock()
		if owned || now.Sub(l.CreatedAt) < grace {
			continue
		}
		if err := m.d.Destroy(ctx, l.ID); err != nil {
			m.log.WarnContext(ctx, "remove orphan", "sandbox_id", l.ID, "err", err)
			continue
		}
		m.log.WarnContext(ctx, "orphan removed", "sandbox_id", l.ID, "tenant", l.Tenant)
	}
}

// sweepSnapshotOrphans removes backend snapshots that no record knows: a
// capture the engine finished after the server that asked for it was
// killed and recovery had already failed it and removed what existed then.
func (m *Manager) sweepSnapshotOrphans(ctx context.Context) {
	s, ok := m.d.(driver.Snapshotter)
	if !ok {
		return
	}
	refs, err := s.ListSnapshots(ctx)
	if err != nil {
		m.log.WarnContext(ctx, "list snapshots for orphan sweep", "err", err)
		return
	}
	for i := range refs {
		ref := &refs[i]
		m.mu.RLock()
		sn, known := m.snapshots[ref.ID]
		m.mu.RUnlock()
		// Known: only an interrupted capture's image may have come late (a
		// failed capture's leftovers went with its failure).
		if known && (sn.State != sandbox.SnapshotFailed || sn.Reason != sandbox.ReasonSnapshotInterrupted) {
			continue
		}
		if err := s.RemoveSnapshot(ctx, ref); err != nil {
			m.log.WarnContext(ctx, "remove orphan snapshot", "snapshot_id", ref.ID, "err", err)
			continue
		}
		m.log.WarnContext(ctx, "orphan snapshot removed", "snapshot_id", ref.ID)
	}
}
