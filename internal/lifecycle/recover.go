// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package lifecycle

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/corral-dev/corral/errdefs"
	"github.com/corral-dev/corral/internal/driver"
	"github.com/corral-dev/corral/internal/sandbox"
)

// Start loads every record and reconciles it with the runtime, all within
// Config.RecoveryTimeout: live sandboxes are re-attached and watched,
// half-created ones are destroyed and reported Failed, interrupted deletes
// are finished, sandboxes that expired while the server was down are reaped,
// and backend objects with no record are removed. Call it before serving.
// Sandboxes it could not reach in time stay in their state with reason
// "recovering" and are retried in the background.
func (m *Manager) Start(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, m.cfg.RecoveryTimeout)
	defer cancel()
	started := time.Now()
	if err := m.loadQuotas(ctx); err != nil {
		return err
	}
	if m.shared != nil {
		// Followed first, so nothing written between the load and the
		// watch is missed.
		if err := m.shared.Follow(context.WithoutCancel(ctx), m.followed, m.unfollowed); err != nil {
			return err
		}
		// Other servers' events wake this one's stream followers.
		if fe, ok := m.rec.(EventFollower); ok {
			if err := fe.FollowEvents(context.WithoutCancel(ctx), m.eventsWritten); err != nil {
				return err
			}
		}
	}
	rows, err := m.rec.LoadSandboxes(ctx)
	if err != nil {
		return err
	}
	snaps, err := m.st.LoadSnapshots(ctx)
	if err != nil {
		return err
	}
	m.mu.Lock()
	for _, sb := range rows {
		if e, ok := m.sandboxes[sb.ID]; ok && !newer(sb.Version, e.sb.Version) || !m.gone[sb.ID].IsZero() {
			continue // followed already, or deleted since the load
		}
		m.tablePut(sb.ID, newEntry(sb))
	}
	for _, sn := range snaps {
		m.snapshots[sn.ID] = sn
	}
	entries := make([]*entry, 0, len(m.sandboxes))
	for _, e := range m.sandboxes {
		entries = append(entries, e)
	}
	m.mu.Unlock()

	for _, e := range entries {
		m.recoverEntry(ctx, e)
	}
	m.recoverSnapshots(ctx)
	m.sweepSnapshotOrphans(ctx)
	m.importUnknown(ctx)
	// Alone, nothing in the runtime without a record is anyone's; with
	// shared records a sibling may be creating one whose record has not
	// reached this server yet.
	grace := time.Duration(0)
	if m.shared != nil {
		grace = m.cfg.OrphanGrace
	}
	m.sweepOrphans(ctx, grace)
	// Expire what passed its TTL while the server was down, now.
	m.reap(ctx, time.Now())
	m.runQueued(ctx)
	m.log.InfoContext(ctx, "recovery finished", "sandboxes", len(rows), "snapshots", len(snaps),
		"duration_ms", time.Since(started).Milliseconds())
	return nil
}

// runQueued runs the expiries reap queued, synchronously, so that Start
// returns with expired sandboxes already gone. Watchers stay queued for Run.
func (m *Manager) runQueued(ctx context.Context) {
	m.mu.RLock()
	var due []*entry
	for id := range m.expiring {
		if e, ok := m.sandboxes[id]; ok {
			due = append(due, e)
		}
	}
	m.mu.RUnlock()
	for _, e := range due {
		m.expire(ctx, e)
	}
}

// recoverEntry reconciles one record with the runtime.
func (m *Manager) recoverEntry(ctx context.Context, e *entry) {
	e.op.Lock()
	defer e.op.Unlock()
	if !m.tracked(e) {
		return
	}
	sb := m.current(e)
	if m.busyElsewhere(sb) {
		return
	}
	if err := m.reconcile(ctx, e, sb); err != nil {
		m.log.WarnContext(ctx, "recover sandbox; will retry", "sandbox_id", sb.ID, "err", err)
		if sb.Status.State != sandbox.StateStopping && sb.Status.Reason != sandbox.ReasonRecovering {
			next := sb.Clone()
			_ = next.SetStatus(sb.Status.State, sandbox.ReasonRecovering, "the server is reconnecting to the runtime", time.Now().UTC())
			if err := m.commit(ctx, e, next, "recovering"); err != nil {
				m.log.ErrorContext(ctx, "record recovering sandbox", "sandbox_id", sb.ID, "err", err)
			}
		}
	}
}

// reconcile does the work of recoverEntry. The caller holds e.op.
func (m *Manager) reconcile(ctx context.Context, e *entry, sb *sandbox.Sandbox) error {
	state := sb.Status.State
	switch {
	case state.Terminal():
		return nil
	case sb.Driver != m.cfg.DriverName:
		next := sb.Clone()
		_ = next.SetStatus(sandbox.StateFailed, sandbox.ReasonLost,
			fmt.Sprintf("created on runtime %q; this server runs %q", sb.Driver, m.cfg.DriverName), time.Now().UTC())
		return m.commit(ctx, e, next, "lost")
	case state == sandbox.StateStopping:
		return m.stop(ctx, e, sb.Status.Reason, sb.Status.Message)
	case len(sb.Handle) == 0:
		// The server stopped between writing the intent and persisting the
		// handle: whatever the runtime made is unusable.
		if err := m.d.Destroy(ctx, sb.ID); err != nil {
			return err
		}
		next := sb.Clone()
		_ = next.SetStatus(sandbox.StateFailed, sandbox.ReasonInterrupted,
			"the server stopped while this sandbox was being created; it was removed", time.Now().UTC())
		return m.commit(ctx, e, next, "start_failed")
	}
	h, err := decodeHandle(sb)
	if err != nil {
		return err
	}
	err = m.d.Recover(ctx, h)
	if errors.Is(err, errdefs.ErrNotFound) {
		m.markLost(ctx, e, sb)
		return nil
	}
	if err != nil {
		return err
	}
	st, err := m.d.Inspect(ctx, sb.ID)
	if errors.Is(err, errdefs.ErrNotFound) {
		m.markLost(ctx, e, sb)
		return nil
	}
	if err != nil {
		return err
	}
	target := sandbox.StateRunning
	switch st.Phase {
	case driver.PhaseExited:
		exit := driver.Exit{Code: -1}
		if st.Exit != nil {
			exit = *st.Exit
		}
		m.recordExit(ctx, e, sb, exit)
		return nil
	case driver.PhasePaused:
		target = sandbox.StatePaused
	}
	if state != target || sb.Status.Reason == sandbox.ReasonRecovering {
		next := sb.Clone()
		next.Status.State = target // the runtime is the truth after a crash mid-pause
		next.Status.Reason, next.Status.Message = sandbox.ReasonRecovered, ""
		next.Status.LastTransitionAt = time.Now().UTC()
		if err := m.commit(ctx, e, next, "recovered"); err != nil {
			return err
		}
	}
	m.watch(sb.ID)
	return nil
}

// recoverSnapshots fails captures that a restart interrupted and finishes
// interrupted deletes.
func (m *Manager) recoverSnapshots(ctx context.Context) {
	m.mu.RLock()
	var todo []*sandbox.Snapshot
	for _, sn := range m.snapshots {
		if sn.State == sandbox.SnapshotCreating || sn.State == sandbox.SnapshotDeleting {
			todo = append(todo, sn.Clone())
		}
	}
	m.mu.RUnlock()
	for _, sn := range todo {
		if sn.State == sandbox.SnapshotDeleting {
			if err := m.removeSnapshot(ctx, sn); err != nil {
				m.log.WarnContext(ctx, "finish snapshot delete", "snapshot_id", sn.ID, "err", err)
			}
			continue
		}
		if s, ok := m.d.(driver.Snapshotter); ok {
			_ = s.RemoveSnapshot(ctx, &driver.SnapshotRef{ID: sn.ID, Driver: sn.Driver})
		}
		sn.State, sn.Reason = sandbox.SnapshotFailed, sandbox.ReasonSnapshotInterrupted
		sn.Message, sn.LastTransitionAt = "the server stopped while the snapshot was being captured", time.Now().UTC()
		if err := m.putSnapshot(ctx, sn, "snapshot_failed"); err != nil {
			m.log.WarnContext(ctx, "record interrupted snapshot", "snapshot_id", sn.ID, "err", err)
		}
	}
}

// importUnknown rebuilds the records of running backend sandboxes this
// server has none of, when the driver can read them back (Importer): a
// server whose database was lost keeps its sandboxes, and two processes
// given one server identity adopt, rather than destroy, each other's. One
// that cannot be imported is kept out of the orphan sweeps until the next
// attempt.
func (m *Manager) importUnknown(ctx context.Context) {
	imp, ok := m.d.(driver.Importer)
	if !ok {
		return
	}
	ls, err := m.d.List(ctx)
	if err != nil {
		m.log.WarnContext(ctx, "list sandboxes to import", "err", err)
		return
	}
	failed := map[string]bool{}
	defer func() {
		m.mu.Lock()
		m.unimported = failed
		m.mu.Unlock()
	}()
	for _, l := range ls {
		m.mu.RLock()
		_, known := m.sandboxes[l.ID]
		m.mu.RUnlock()
		if known {
			continue
		}
		in, err := imp.Import(ctx, l.ID)
		if errors.Is(err, errdefs.ErrNotFound) {
			continue // ended: the sweep removes it
		}
		if err == nil {
			err = m.insertImported(ctx, in)
		}
		if err != nil {
			m.log.WarnContext(ctx, "import sandbox; it is kept, not swept", "sandbox_id", l.ID, "err", err)
			failed[l.ID] = true
			continue
		}
		m.log.InfoContext(ctx, "sandbox imported from the runtime", "sandbox_id", l.ID, "tenant", in.Spec.Tenant)
	}
}

// insertImported records an imported sandbox as Running and watches it.
func (m *Manager) insertImported(ctx context.Context, in *driver.Imported) error {
	hb, err := json.Marshal(in.Handle)
	if err != nil {
		return err
	}
	now := time.Now().UTC()
	sp := in.Spec
	sb := &sandbox.Sandbox{
		ID: sp.ID, Tenant: sp.Tenant, Image: &sandbox.Image{URI: sp.Image.URI}, Entrypoint: sp.Entrypoint, Metadata: sp.Labels,
		Resources: sandbox.Resources(sp.Resources),
		CreatedAt: in.CreatedAt.UTC(), ExpiresAt: sp.ExpiresAt.UTC(), Driver: m.cfg.DriverName, Handle: hb,
		ExecdToken: sandbox.Token(sp.ExecdToken), EgressToken: sandbox.NewToken(), UpdatedAt: now,
		Status: sandbox.Status{State: sandbox.StateRunning, Reason: sandbox.ReasonRecovered,
			Message: "imported from the runtime: this server had no record of it", LastTransitionAt: now},
	}
	if sp.ExpiresAt.IsZero() {
		sb.ExpiresAt = time.Time{}
	}
	if _, err := m.rec.InsertSandbox(ctx, sb, nil, eventFor(sb, "imported")); err != nil {
		return err
	}
	e := newEntry(sb)
	m.mu.Lock()
	m.tablePut(sb.ID, e)
	m.mu.Unlock()
	m.recoverEntry(ctx, e)
	return nil
}
