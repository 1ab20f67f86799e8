// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package lifecycle

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/errdefs"
	"github.com/corral-dev/corral/internal/sandbox"
)

// Records is where sandbox records, their event log and idempotency keys
// are kept. *store.Store (SQLite, one server) is one; a cluster-backed
// store shared by several servers is another (SharedRecords).
type Records interface {
	// InsertSandbox writes a new record with its idempotency key (if any)
	// and an event, atomically, and sets sb.Version; if the tenant already
	// used the key it writes nothing and returns the existing binding with
	// ErrAlreadyExists.
	InsertSandbox(ctx context.Context, sb *sandbox.Sandbox, idem *sandbox.Idempotency, ev *sandbox.Event) (*sandbox.Idempotency, error)
	// UpdateSandbox rewrites a record and appends ev, atomically. A
	// versioning store refuses a stale sb.Version with sandbox.ErrConflict and
	// sets sb.Version to the new revision.
	UpdateSandbox(ctx context.Context, sb *sandbox.Sandbox, ev *sandbox.Event) error
	// DeleteSandbox removes a record; an unknown one is not an error.
	DeleteSandbox(ctx context.Context, id string, ev *sandbox.Event) error
	LoadSandboxes(ctx context.Context) ([]*sandbox.Sandbox, error)
	Events(ctx context.Context, sandboxID string, after int64, limit int, typePrefix string) ([]sandbox.Event, error)
	LookupIdempotency(ctx context.Context, tenant, key string) (*sandbox.Idempotency, error)
	ReleaseIdempotency(ctx context.Context, tenant, key, sandboxID string) error
	PurgeIdempotency(ctx context.Context, before time.Time) error
}

// Snapshots keeps snapshot records, each with an event.
type Snapshots interface {
	PutSnapshot(ctx context.Context, sn *sandbox.Snapshot, ev *sandbox.Event) error
	DeleteSnapshot(ctx context.Context, id string, ev *sandbox.Event) error
	LoadSnapshots(ctx context.Context) ([]*sandbox.Snapshot, error)
}

// LocalStore is a server's own database: records, audit and snapshots
// (internal/store implements it).
type LocalStore interface {
	Records
	AuditLog
	Snapshots
}

// AuditLog is Records that keep audit events (an enforcer's egress
// decisions, secret reads) in the same event log.
type AuditLog interface {
	// AppendAudit adds the events, bounding each sandbox's audit and all
	// of it.
	AppendAudit(ctx context.Context, evs []sandbox.Event) error
}

// SharedRecords are records that other servers write too: the Manager
// follows every change, and nothing it holds in memory is authoritative.
type SharedRecords interface {
	Records
	// Follow calls changed with every record written (by any server,
	// this one included) and deleted with the ID of every record removed,
	// in the order the store applied them, until ctx ends. It returns once
	// the handlers are registered.
	Follow(ctx context.Context, changed func(*sandbox.Sandbox), deleted func(id string)) error
	// GetSandbox reads the newest stored revision of a record.
	GetSandbox(ctx context.Context, id string) (*sandbox.Sandbox, error)
}

// conflict is the error a user sees when another server changed the
// sandbox in the middle of an operation that could not simply be retried.
func conflict(id string) error {
	return errdefs.Wrap(errdefs.ErrFailedPrecondition, api.CodeSandboxConflict,
		"sandbox "+id+" was changed by another server at the same moment; retry", sandbox.ErrConflict)
}

// newer reports whether revision a follows revision b. Revisions that
// are numbers compare as numbers; any other difference counts as newer.
func newer(a, b string) bool {
	x, errA := strconv.ParseUint(a, 10, 64)
	y, errB := strconv.ParseUint(b, 10, 64)
	if errA == nil && errB == nil {
		return x > y
	}
	return a != b
}

// newEntry is the entry of a record no Create of this server is making.
func newEntry(sb *sandbox.Sandbox) *entry {
	e := &entry{sb: sb, created: make(chan struct{})}
	close(e.created)
	return e
}

// followed takes a record another server (or this one) wrote: it becomes
// the current record unless a newer one is held, and a running sandbox
// gets an exit watcher.
func (m *Manager) followed(sb *sandbox.Sandbox) {
	m.mu.Lock()
	e, ok := m.sandboxes[sb.ID]
	switch {
	case !m.gone[sb.ID].IsZero():
		m.mu.Unlock()
		return
	case !ok:
		m.tablePut(sb.ID, newEntry(sb))
	case newer(sb.Version, e.sb.Version):
		m.setRecord(e, sb)
	default:
		m.mu.Unlock()
		return
	}
	m.mu.Unlock()
	m.wakeReaper(sb.ID)
	if len(sb.Handle) > 0 && exitChangesState(sb.Status.State) {
		m.watch(sb.ID)
	}
}

// unfollowed forgets a record another server (or this one) removed, for
// good: IDs are never reused, so a stale read of it is ignored.
func (m *Manager) unfollowed(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.tableDelete(id)
	m.gone[id] = time.Now()
}

// forgetGone drops tombstones older than an hour (maintenance): by then
// no read that raced the deletion is still in flight.
func (m *Manager) forgetGone() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for id, at := range m.gone {
		if time.Since(at) > time.Hour {
			delete(m.gone, id)
		}
	}
}

// refresh makes the stored revision of id current.
func (m *Manager) refresh(ctx context.Context, id string) {
	sb, err := m.shared.GetSandbox(ctx, id)
	switch {
	case errors.Is(err, errdefs.ErrNotFound):
		m.unfollowed(id)
	case err != nil:
		m.log.WarnContext(ctx, "re-read sandbox from the shared store", "sandbox_id", id, "err", err)
	default:
		m.followed(sb)
	}
}

// readThrough reads from the shared store a sandbox this server has no
// record of (created through another server a moment ago) and reports
// whether it tried. The reads are rate-limited: the proxy's token check
// reaches here without an API key, and a flood of made-up IDs must not
// become API-server load.
func (m *Manager) readThrough(ctx context.Context, id string) bool {
	if m.shared == nil || !sandbox.PlausibleID(id) || !m.misses.Allow() {
		return false
	}
	m.refresh(ctx, id)
	return true
}

// busyElsewhere reports whether sb, in shared records, is in the middle of
// a transition that another server may be making (a create, pause, resume
// or delete in progress): recovery leaves it alone until that server had
// time to finish, so that it does not undo a create it cannot see.
func (m *Manager) busyElsewhere(sb *sandbox.Sandbox) bool {
	if m.shared == nil {
		return false
	}
	return transitional(sb.Status.State) && time.Since(sb.UpdatedAt) < m.cfg.CreateTimeout+time.Minute
}

// transitional reports whether s is a state an operation in progress
// will leave.
func transitional(s sandbox.State) bool {
	switch s {
	case sandbox.StatePending, sandbox.StatePausing, sandbox.StateResuming, sandbox.StateStopping:
		return true
	}
	return false
}

// retryConflicts runs op again, up to ten times in all, while another
// server's concurrent change makes it fail with a conflict, after a short
// random pause that grows (servers racing in step would otherwise collide
// again).
func retryConflicts[T any](op func() (T, error)) (T, error) {
	for i := 0; ; i++ {
		v, err := op()
		if i == 9 || !errors.Is(err, sandbox.ErrConflict) {
			return v, err
		}
		time.Sleep(time.Duration(1+rand.IntN(10*(i+1))) * time.Millisecond)
	}
}

// awaitRecord waits a little for a record another server is about to
// write (it claimed an idempotency key first).
func (m *Manager) awaitRecord(ctx context.Context, tenant, id string) (*entry, error) {
	for range 50 {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if e, err := m.lookup(ctx, tenant, id); err == nil {
			return e, nil
		}
	}
	return nil, notFound(id)
}

// awaitSettled waits until the record of id leaves Pending, however long
// the server making it takes (bounded by its create timeout), reading the
// store: the answer to a repeated create made elsewhere.
func (m *Manager) awaitSettled(ctx context.Context, id string) error {
	deadline := time.Now().Add(m.cfg.CreateTimeout + time.Minute)
	for {
		if e := m.liveEntry(id); e == nil || m.current(e).Status.State != sandbox.StatePending {
			return nil
		}
		if time.Now().After(deadline) {
			return errdefs.Newf(errdefs.ErrUnavailable, api.CodeSandboxRuntimeUnavailable, "sandbox %s is still being created; retry", id)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		m.refresh(ctx, id)
	}
}
