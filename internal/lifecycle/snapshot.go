// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package lifecycle

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/errdefs"
	"github.com/corral-dev/corral/internal/driver"
	"github.com/corral-dev/corral/internal/sandbox"
)

// snapshotTimeout bounds one capture.
const snapshotTimeout = 15 * time.Minute

func snapshotNotFound(id string) error {
	return errdefs.Newf(errdefs.ErrNotFound, api.CodeSnapshotNotFound, "snapshot %s not found", id)
}

func (m *Manager) snapshotter() (driver.Snapshotter, error) {
	s, ok := m.d.(driver.Snapshotter)
	if !ok {
		why := m.cfg.SnapshotsUnsupported
		if why == "" {
			why = "it does not implement them"
		}
		return nil, errdefs.Newf(errdefs.ErrNotImplemented, api.CodeAPINotSupported, "the %s runtime cannot take snapshots or forks: %s", m.cfg.DriverName, why)
	}
	return s, nil
}

func (m *Manager) putSnapshot(ctx context.Context, sn *sandbox.Snapshot, evType string) error {
	ev := m.snapshotEvent(sn, evType)
	ev.State, ev.Reason, ev.Message = sn.State.String(), sn.Reason, sn.Message
	if err := m.st.PutSnapshot(ctx, sn, ev); err != nil {
		return err
	}
	if ev.Kind != "" {
		m.eventsWritten()
	}
	m.mu.Lock()
	m.snapshots[sn.ID] = sn.Clone()
	m.mu.Unlock()
	return nil
}

// snapshotEvent is an event of sn: published with the snapshot's ID and
// name, and its sandbox's metadata if the sandbox is still known.
func (m *Manager) snapshotEvent(sn *sandbox.Snapshot, evType string) *sandbox.Event {
	ev := &sandbox.Event{At: time.Now().UTC(), Tenant: sn.Tenant, SandboxID: sn.SandboxID, Type: evType}
	if ev.Kind = kindOf(evType, nil); ev.Kind != "" {
		b, _ := json.Marshal(map[string]string{"snapshotId": sn.ID, "name": sn.Name})
		ev.Detail = string(b)
		if e := m.liveEntry(sn.SandboxID); e != nil {
			ev.Metadata = m.current(e).Metadata
		}
	}
	return ev
}

// CreateSnapshot starts capturing a Running sandbox and returns the snapshot
// in state Creating; the capture goes on in the background.
func (m *Manager) CreateSnapshot(ctx context.Context, tenant, sandboxID, name string) (*sandbox.Snapshot, error) {
	snapper, err := m.snapshotter()
	if err != nil {
		return nil, err
	}
	e, err := m.lookup(ctx, tenant, sandboxID)
	if err != nil {
		return nil, err
	}
	sb := m.current(e)
	if sb.Status.State != sandbox.StateRunning {
		return nil, errdefs.Newf(errdefs.ErrFailedPrecondition, api.CodeSnapshotInvalidSource,
			"sandbox %s is %s; only a Running sandbox can be snapshotted", sandboxID, sb.Status.State)
	}
	sn, err := m.acceptSnapshot(ctx, tenant, sandboxID, name)
	if err != nil {
		return nil, err
	}
	m.spawn(func(ctx context.Context) { m.capture(ctx, snapper, sn) })
	return sn.Clone(), nil
}

// acceptSnapshot records a new snapshot of a sandbox, Creating.
func (m *Manager) acceptSnapshot(ctx context.Context, tenant, sandboxID, name string) (*sandbox.Snapshot, error) {
	m.snapQuota.Lock()
	defer m.snapQuota.Unlock()
	lim := m.Limits(tenant)
	count, bytes := m.snapshotUse(tenant, "")
	if lim.Snapshots > 0 && int64(count) >= lim.Snapshots {
		return nil, errdefs.Newf(errdefs.ErrResourceExhausted, api.CodeSnapshotQuota,
			"this tenant keeps %d snapshots, the most its quota allows (snapshots; the server's default is --max-snapshots); delete one first", count)
	}
	if lim.SnapshotBytes > 0 && bytes >= lim.SnapshotBytes {
		return nil, errdefs.Newf(errdefs.ErrResourceExhausted, api.CodeSnapshotQuota,
			"this tenant's snapshots hold %s, the most its quota allows (%s, snapshotBytes; the server's default is --max-snapshot-bytes); delete one first",
			sandbox.FormatBytes(bytes), sandbox.FormatBytes(lim.SnapshotBytes))
	}
	now := time.Now().UTC()
	sn := &sandbox.Snapshot{
		ID: sandbox.NewID(), Tenant: tenant, SandboxID: sandboxID, Name: name, State: sandbox.SnapshotCreating,
		Reason: sandbox.ReasonSnapshotAccepted, LastTransitionAt: now, CreatedAt: now, Driver: m.cfg.DriverName,
	}
	if err := m.putSnapshot(ctx, sn, "snapshot_accepted"); err != nil {
		return nil, err
	}
	return sn, nil
}

// capture has the driver capture sn and records it Ready, or Failed
// with why; it returns the snapshot as recorded, and the capture's error.
func (m *Manager) capture(ctx context.Context, snapper driver.Snapshotter, sn *sandbox.Snapshot) (*sandbox.Snapshot, error) {
	ctx, cancel := context.WithTimeout(ctx, snapshotTimeout)
	defer cancel()
	ref, err := snapper.Snapshot(ctx, sn.SandboxID, sn.ID)
	// The size check and the Ready record are one step: two captures
	// cannot both fit in the room left for one.
	m.snapQuota.Lock()
	defer m.snapQuota.Unlock()
	done := sn.Clone()
	done.LastTransitionAt = time.Now().UTC()
	evType := "snapshot_ready"
	if err == nil {
		err = m.fitsQuota(sn, ref)
	}
	if err == nil {
		done.Ref, err = json.Marshal(ref)
	}
	if err != nil {
		m.log.WarnContext(ctx, "snapshot capture failed", "sandbox_id", sn.SandboxID, "snapshot_id", sn.ID, "err", err)
		done.State, done.Reason, done.Message, evType = sandbox.SnapshotFailed, sandbox.ReasonSnapshotFailed, userMessage(err), "snapshot_failed"
		_ = snapper.RemoveSnapshot(ctx, &driver.SnapshotRef{ID: sn.ID, Driver: m.cfg.DriverName})
	} else {
		done.State, done.Reason = sandbox.SnapshotReady, sandbox.ReasonSnapshotReady
	}
	if perr := m.putSnapshot(context.WithoutCancel(ctx), done, evType); perr != nil {
		m.log.ErrorContext(ctx, "record snapshot", "snapshot_id", sn.ID, "err", perr)
		if err == nil {
			err = perr
		}
	}
	return done, err
}

// snapshotUse is how many snapshots tenant keeps (Creating and Ready) and
// the bytes its Ready ones hold, leaving out snapshot except.
func (m *Manager) snapshotUse(tenant, except string) (count int, bytes int64) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	for _, sn := range m.snapshots {
		if sn.Tenant != tenant || sn.ID == except {
			continue
		}
		switch sn.State {
		case sandbox.SnapshotCreating:
			count++
		case sandbox.SnapshotReady:
			count++
			var ref driver.SnapshotRef
			if json.Unmarshal(sn.Ref, &ref) == nil {
				bytes += ref.Bytes
			}
		}
	}
	return count, bytes
}

// fitsQuota refuses a captured snapshot that would take its tenant's
// snapshots past the server's byte bound.
func (m *Manager) fitsQuota(sn *sandbox.Snapshot, ref *driver.SnapshotRef) error {
	limit := m.Limits(sn.Tenant).SnapshotBytes
	if limit <= 0 {
		return nil
	}
	if _, used := m.snapshotUse(sn.Tenant, sn.ID); used+ref.Bytes > limit {
		return errdefs.Newf(errdefs.ErrResourceExhausted, api.CodeSnapshotQuota,
			"the snapshot holds %s; with this tenant's other snapshots (%s) that is more than its quota allows (%s, snapshotBytes; the server's default is --max-snapshot-bytes)",
			sandbox.FormatBytes(ref.Bytes), sandbox.FormatBytes(used), sandbox.FormatBytes(limit))
	}
	return nil
}

// GetSnapshot returns a tenant's snapshot.
func (m *Manager) GetSnapshot(_ context.Context, tenant, id string) (*sandbox.Snapshot, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	sn, ok := m.snapshots[id]
	if !ok || sn.Tenant != tenant {
		return nil, snapshotNotFound(id)
	}
	return sn.Clone(), nil
}

// SnapshotFilter selects snapshots in ListSnapshots.
type SnapshotFilter struct {
	SandboxID string
	States    []sandbox.SnapshotState
	Page      int
	PageSize  int
}

// ListSnapshots returns one page of a tenant's snapshots, newest first, and
// the number of matches.
func (m *Manager) ListSnapshots(_ context.Context, tenant string, f SnapshotFilter) ([]*sandbox.Snapshot, int) {
	m.mu.RLock()
	var matches []*sandbox.Snapshot
	for _, sn := range m.snapshots {
		if sn.Tenant != tenant || f.SandboxID != "" && sn.SandboxID != f.SandboxID {
			continue
		}
		if len(f.States) > 0 && !slices.Contains(f.States, sn.State) {
			continue
		}
		matches = append(matches, sn.Clone())
	}
	m.mu.RUnlock()
	slices.SortFunc(matches, func(a, b *sandbox.Snapshot) int {
		if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
			return c
		}
		return cmp.Compare(b.ID, a.ID)
	})
	total := len(matches)
	page, size := max(f.Page, 1), max(f.PageSize, 1)
	start := min((page-1)*size, total)
	end := min(start+size, total)
	return matches[start:end], total
}

// DeleteSnapshot removes a snapshot. A snapshot still being captured cannot
// be deleted.
func (m *Manager) DeleteSnapshot(ctx context.Context, tenant, id string) error {
	sn, err := m.GetSnapshot(ctx, tenant, id)
	if err != nil {
		return err
	}
	if sn.State == sandbox.SnapshotCreating {
		return errdefs.Newf(errdefs.ErrFailedPrecondition, api.CodeSnapshotNotReady, "snapshot %s is still being created", id)
	}
	sn.State, sn.Reason, sn.LastTransitionAt = sandbox.SnapshotDeleting, "snapshot_deleting", time.Now().UTC()
	if err := m.putSnapshot(ctx, sn, "snapshot_deleting"); err != nil {
		return err
	}
	dctx, cancel := backgroundCtx(ctx, opTimeout)
	defer cancel()
	return m.removeSnapshot(dctx, sn)
}

func (m *Manager) removeSnapshot(ctx context.Context, sn *sandbox.Snapshot) error {
	if s, ok := m.d.(driver.Snapshotter); ok {
		ref := &driver.SnapshotRef{ID: sn.ID, Driver: sn.Driver}
		if len(sn.Ref) > 0 {
			if err := json.Unmarshal(sn.Ref, ref); err != nil {
				return fmt.Errorf("snapshot %s: corrupt reference: %w", sn.ID, err)
			}
		}
		if err := s.RemoveSnapshot(ctx, ref); err != nil {
			return runtimeError("delete the snapshot of", fmt.Errorf("snapshot %s: %w", sn.ID, err), changeKinds)
		}
	}
	ev := m.snapshotEvent(sn, "snapshot_deleted")
	if err := m.st.DeleteSnapshot(ctx, sn.ID, ev); err != nil {
		return err
	}
	m.eventsWritten()
	m.mu.Lock()
	delete(m.snapshots, sn.ID)
	m.mu.Unlock()
	return nil
}

// restorable returns the reference of a tenant's Ready snapshot.
func (m *Manager) restorable(tenant, id string) (*driver.SnapshotRef, error) {
	if _, err := m.snapshotter(); err != nil {
		return nil, err
	}
	m.mu.RLock()
	sn, ok := m.snapshots[id]
	m.mu.RUnlock()
	if !ok || sn.Tenant != tenant {
		// A bad reference in a create is the request's fault: 400, as the
		// contract lists no 404 for POST /sandboxes.
		return nil, errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeSnapshotNotFound, "snapshot %s not found", id)
	}
	if sn.State != sandbox.SnapshotReady {
		return nil, errdefs.Newf(errdefs.ErrFailedPrecondition, api.CodeSnapshotNotReady, "snapshot %s is %s, not Ready", id, sn.State)
	}
	if sn.Driver != m.cfg.DriverName {
		return nil, errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeSnapshotInvalidSource,
			"snapshot %s was taken by the %s runtime; this server runs the %s runtime, which cannot restore it", id, sn.Driver, m.cfg.DriverName)
	}
	var ref driver.SnapshotRef
	if err := json.Unmarshal(sn.Ref, &ref); err != nil {
		return nil, fmt.Errorf("snapshot %s: corrupt reference: %w", id, err)
	}
	return &ref, nil
}
