// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package lifecycle

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/errdefs"
	"github.com/corral-dev/corral/internal/quota"
	"github.com/corral-dev/corral/internal/sandbox"
)

// QuotaStore keeps tenants' quota overrides (internal/store implements
// it).
type QuotaStore interface {
	Quotas(ctx context.Context) (map[string]quota.Overrides, error)
	PutQuota(ctx context.Context, tenant string, o quota.Overrides) error
	DeleteQuota(ctx context.Context, tenant string) error
}

// quotaState is the admission's state; Manager.qmu guards it.
type quotaState struct {
	overrides map[string]quota.Overrides
	// reserved is room let in, by sandbox ID, until its request ends;
	// it counts while the sandbox's record does not hold the room.
	reserved map[string]reservation
	queue    *quota.Queue
	// creates are each tenant's creates of the last minute.
	creates map[string][]time.Time
	// stopped: the server is shutting down; nothing more waits.
	stopped bool
	kick    chan struct{}
}

// reservation is room let in for a request of tenant.
type reservation struct {
	tenant string
	need   quota.Usage
}

func newQuotaState() quotaState {
	return quotaState{overrides: map[string]quota.Overrides{}, reserved: map[string]reservation{}, queue: quota.NewQueue(),
		creates: map[string][]time.Time{}, kick: make(chan struct{}, 1)}
}

// quotaStore is the store of overrides, or nil.
func (m *Manager) quotaStore() QuotaStore {
	if m.cfg.Quotas != nil {
		return m.cfg.Quotas
	}
	qs, _ := m.st.(QuotaStore)
	return qs
}

// loadQuotas reads the overrides at start.
func (m *Manager) loadQuotas(ctx context.Context) error {
	qs := m.quotaStore()
	if qs == nil {
		return nil
	}
	all, err := qs.Quotas(ctx)
	if err != nil {
		return err
	}
	m.qmu.Lock()
	m.q.overrides = all
	m.qmu.Unlock()
	return nil
}

// limitsOf is a tenant's effective quotas. The caller holds qmu.
func (m *Manager) limitsOf(tenant string) quota.Limits {
	base := m.cfg.Quota
	base.Snapshots = int64(m.cfg.Storage.MaxSnapshots)
	base.SnapshotBytes = m.cfg.Storage.MaxSnapshotBytes
	return base.Apply(m.q.overrides[tenant])
}

// Limits returns a tenant's effective quotas.
func (m *Manager) Limits(tenant string) quota.Limits {
	m.qmu.Lock()
	defer m.qmu.Unlock()
	return m.limitsOf(tenant)
}

// QuotaStatus is a tenant's quotas, overrides and use.
func (m *Manager) QuotaStatus(ctx context.Context, tenant string) api.QuotaStatus {
	vol, _, err := m.volumeUse(ctx, tenant)
	if err != nil {
		m.log.WarnContext(ctx, "list a tenant's volumes for its quota", "tenant", tenant, "err", err)
	}
	m.qmu.Lock()
	defer m.qmu.Unlock()
	u, _ := m.usage(tenant)
	w := u.ToWire()
	if vol > 0 {
		w.VolumeBytes = sandbox.FormatBytes(vol)
	}
	w.Queued = int64(m.q.queue.Len(tenant))
	return api.QuotaStatus{Tenant: tenant, Limits: m.limitsOf(tenant).ToWire(), Overrides: m.q.overrides[tenant].Wire(), Usage: w}
}

// QuotaTenants are the tenants with overrides or sandboxes, sorted.
func (m *Manager) QuotaTenants() []string {
	set := map[string]bool{}
	m.qmu.Lock()
	for t := range m.q.overrides {
		set[t] = true
	}
	m.qmu.Unlock()
	m.mu.RLock()
	for _, e := range m.sandboxes {
		set[e.sb.Tenant] = true
	}
	m.mu.RUnlock()
	out := make([]string, 0, len(set))
	for t := range set {
		out = append(out, t)
	}
	slices.Sort(out)
	return out
}

// SetQuota replaces a tenant's overrides (none: the server's defaults).
func (m *Manager) SetQuota(ctx context.Context, tenant string, o quota.Overrides, clear bool) error {
	qs := m.quotaStore()
	if qs == nil {
		return errdefs.Newf(errdefs.ErrNotImplemented, api.CodeAPINotSupported, "this server keeps no per-tenant quotas")
	}
	var err error
	if clear {
		err = qs.DeleteQuota(ctx, tenant)
	} else {
		err = qs.PutQuota(ctx, tenant, o)
	}
	if err != nil {
		return err
	}
	m.qmu.Lock()
	if clear {
		delete(m.q.overrides, tenant)
	} else {
		m.q.overrides[tenant] = o
	}
	m.qmu.Unlock()
	m.quotaKick()
	return nil
}

// recordUsage is what tenant's records hold, and how many sandboxes
// hold room on the server in all: the tally, kept as records change.
func (m *Manager) recordUsage(tenant string) (quota.Usage, int64) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.tally.byTenant[tenant], m.tally.holding
}

// usage is what tenant holds (its records and reservations) and how
// many sandboxes the server runs in all. The caller holds qmu.
func (m *Manager) usage(tenant string) (quota.Usage, int64) {
	u, all := m.recordUsage(tenant)
	// A reservation stops counting as its sandbox's record starts to: the
	// create's record enters the table while its request still runs, a
	// resumed one holds the room from Resuming on.
	m.mu.RLock()
	for id, r := range m.q.reserved {
		n := r.need
		if e := m.sandboxes[id]; e != nil {
			if quota.Holds(e.sb.Status.State) {
				n.Running, n.CPUMillis, n.MemoryBytes = 0, 0, 0
			}
			if quota.Counts(e.sb.Status.State) {
				n.Sandboxes = 0
			}
		}
		all += n.Running
		if r.tenant == tenant {
			u = u.Add(n)
		}
	}
	m.mu.RUnlock()
	cutoff := time.Now().Add(-time.Minute)
	ts := m.q.creates[tenant]
	i, _ := slices.BinarySearchFunc(ts, cutoff, func(a, b time.Time) int { return a.Compare(b) })
	m.q.creates[tenant] = ts[i:]
	u.Creates = int64(len(ts) - i)
	return u, all
}

// exceeded returns what need would pass for tenant, or nil, and whether
// it is the server's capacity (which holds every tenant back). The
// caller holds qmu.
func (m *Manager) exceeded(tenant string, need quota.Usage) (*quota.Exceeded, bool) {
	u, all := m.usage(tenant)
	if x := m.limitsOf(tenant).Check(u, need); x != nil {
		if x.Limit == "createsPerMinute" && len(m.q.creates[tenant]) > 0 {
			x.RetryAfter = time.Until(m.q.creates[tenant][0].Add(time.Minute))
		}
		return x, false
	}
	if c := m.cfg.Capacity; c > 0 && need.Running > 0 && all+need.Running > c {
		return &quota.Exceeded{Limit: "capacity", Max: c, Used: all, Asked: need.Running}, true
	}
	return nil, false
}

// reserve holds need for tenant's request for sandbox id until release.
// The caller holds qmu.
func (m *Manager) reserve(tenant, id string, need quota.Usage) {
	m.q.reserved[id] = reservation{tenant: tenant, need: need}
	if need.Creates > 0 {
		m.q.creates[tenant] = append(m.q.creates[tenant], time.Now())
	}
}

// releaser returns the release of sandbox id's reservation, to call once
// its request is done.
func (m *Manager) releaser(id string) func() {
	done := false
	return func() {
		if done {
			return
		}
		done = true
		m.qmu.Lock()
		delete(m.q.reserved, id)
		m.qmu.Unlock()
		m.quotaKick()
	}
}

// rekeyRoom moves the room held for sandbox from to sandbox to (a create
// that took a warm sandbox of another ID), here and, with shared records,
// among the servers' claims, so that it stops counting once to's record
// holds it; it returns the release to call instead of release.
func (m *Manager) rekeyRoom(ctx context.Context, tenant, from, to string, release func()) func() {
	m.qmu.Lock()
	if r, ok := m.q.reserved[from]; ok {
		delete(m.q.reserved, from)
		m.q.reserved[to] = r
	}
	m.qmu.Unlock()
	if m.adm != nil {
		if err := m.adm.Rebind(ctx, tenant, from, to); err != nil {
			m.log.WarnContext(ctx, "rename an admission claim", "sandbox_id", to, "err", err)
		}
	}
	done := false
	return func() {
		if done {
			return
		}
		done = true
		release()
		m.releaser(to)()
		if m.adm != nil && m.liveEntry(to) == nil {
			if err := m.adm.Unclaim(context.WithoutCancel(ctx), tenant, to); err != nil {
				m.log.WarnContext(ctx, "drop an admission claim", "sandbox_id", to, "err", err)
			}
		}
	}
}

// dispatch lets in the waiters there is room for, fairly. The caller
// holds qmu.
func (m *Manager) dispatch() {
	m.q.queue.Dispatch(func(w *quota.Waiter) quota.Verdict {
		x, capacity := m.exceeded(w.Tenant, w.Need)
		switch {
		case x == nil:
			m.reserve(w.Tenant, w.ID, w.Need)
			return quota.Admit
		case capacity:
			return quota.Stop
		}
		return quota.Skip
	})
}

// quotaKick wakes the dispatcher: room may have freed.
func (m *Manager) quotaKick() {
	select {
	case m.q.kick <- struct{}{}:
	default:
	}
}

// quotaLoop lets waiters in when room frees, and at least every second
// while some wait (a minute's creates age out with no event).
func (m *Manager) quotaLoop(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			m.StopQueue()
			return
		case <-m.q.kick:
		case <-t.C:
			if m.shared != nil {
				// Other servers change the overrides too.
				if err := m.loadQuotas(ctx); err != nil && ctx.Err() == nil {
					m.log.WarnContext(ctx, "read the quota overrides", "err", err)
				}
			}
		}
		m.qmu.Lock()
		if m.q.queue.Len("") > 0 {
			m.dispatch()
		}
		m.qmu.Unlock()
	}
}

// StopQueue answers every waiting create and resume with 503 and
// queues no more: the server is shutting down. Clients retry (with the
// same Idempotency-Key) once it is back.
func (m *Manager) StopQueue() {
	m.qmu.Lock()
	defer m.qmu.Unlock()
	if !m.q.stopped {
		m.q.stopped = true
		close(m.stopping)
	}
}

// admitRoom holds room for a request of tenant for sandbox id (at record
// revision base, for a resume) needing need, under the tenant's policy,
// on this server and, with shared records, among every server's claims.
func (m *Manager) admitRoom(ctx context.Context, tenant, id, base string, need quota.Usage, what string) (func(), error) {
	local := func() (func(), error) { return m.admitQuota(ctx, tenant, id, need, what) }
	if m.adm == nil {
		return local()
	}
	return m.claimShared(ctx, tenant, id, base, need, what, local)
}

// admitQuota holds room for a request of tenant for sandbox id needing
// need, under the tenant's policy, on this server, and returns its
// release (call it once the request is done; the room counts through
// the sandbox's record from the moment the record holds it).
func (m *Manager) admitQuota(ctx context.Context, tenant, id string, need quota.Usage, what string) (release func(), err error) {
	for paused := 0; ; {
		m.qmu.Lock()
		if m.q.stopped {
			m.qmu.Unlock()
			return nil, interrupted()
		}
		lim := m.limitsOf(tenant)
		w := m.q.queue.Add(tenant, need)
		w.ID = id
		m.dispatch()
		select {
		case <-w.Admitted:
			m.qmu.Unlock()
			return m.releaser(id), nil
		default:
		}
		x, _ := m.exceeded(tenant, need)
		if x == nil {
			// Room, but others wait first.
			x = &quota.Exceeded{Limit: "capacity", Max: m.cfg.Capacity, Asked: need.Running}
			_, x.Used = m.usage(tenant)
		}
		switch {
		case lim.Policy == quota.PolicyQueue && lim.QueueTimeout > 0:
			m.qmu.Unlock()
			m.publish(ctx, quotaEvent(tenant, api.EventQuotaQueued, x, what))
			return m.await(ctx, w, tenant, x, lim.QueueTimeout)
		case lim.Policy == quota.PolicyPauseOldest && x.Pausable && paused < 100:
			m.q.queue.Remove(w)
			victim := m.oldestRunning(tenant)
			m.qmu.Unlock()
			if victim == "" {
				return nil, m.refuse(ctx, tenant, x, what, false)
			}
			if err := m.Pause(ctx, tenant, victim); err != nil {
				m.log.WarnContext(ctx, "pause the oldest sandbox for room", "sandbox_id", victim, "err", err)
				return nil, m.refuse(ctx, tenant, x, what, false)
			}
			m.log.InfoContext(ctx, "paused the tenant's least recently active sandbox for room", "sandbox_id", victim, "limit", x.Limit)
			paused++
		default:
			m.q.queue.Remove(w)
			m.qmu.Unlock()
			return nil, m.refuse(ctx, tenant, x, what, false)
		}
	}
}

// await waits for w to be let in, until timeout, ctx's end or shutdown.
func (m *Manager) await(ctx context.Context, w *quota.Waiter, tenant string, x *quota.Exceeded, timeout time.Duration) (func(), error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	var err error
	select {
	case <-w.Admitted:
		return m.releaser(w.ID), nil
	case <-ctx.Done():
		err = ctx.Err()
	case <-t.C:
	case <-m.stopping:
		err = interrupted()
	}
	m.qmu.Lock()
	removed := m.q.queue.Remove(w)
	if !removed {
		// Let in at the last moment: give the room back.
		m.qmu.Unlock()
		m.releaser(w.ID)()
	} else {
		m.dispatch() // w may have held others of its tenant back
		m.qmu.Unlock()
	}
	if err != nil {
		return nil, err
	}
	return nil, m.refuse(ctx, tenant, x, "", true)
}

func interrupted() error {
	return errdefs.New(errdefs.ErrUnavailable, api.CodeQuotaQueueInterrupted,
		"the server is shutting down; this request was waiting for room and was not made: retry (with the same Idempotency-Key) once it is back")
}

// refuse publishes quota.refused and returns the 429.
func (m *Manager) refuse(ctx context.Context, tenant string, x *quota.Exceeded, what string, queued bool) error {
	m.publish(context.WithoutCancel(ctx), quotaEvent(tenant, api.EventQuotaRefused, x, what))
	return quota.Refuse(tenant, x, queued)
}

// quotaEvent is a quota event of a tenant (no sandbox).
func quotaEvent(tenant, kind string, x *quota.Exceeded, what string) sandbox.Event {
	ev := published(&sandbox.Sandbox{Tenant: tenant}, kind, map[string]any{"limit": x.Limit, "max": x.Max, "used": x.Used, "request": what})
	ev.State, ev.Message = "", x.Message(tenant)
	return ev
}

// oldestRunning is the tenant's Running sandbox least recently active
// (its last start, resume or proxied request), or "".
func (m *Manager) oldestRunning(tenant string) string {
	type cand struct {
		id     string
		active int64
	}
	var cs []cand
	m.mu.RLock()
	for id, e := range m.sandboxes {
		if e.sb.Tenant != tenant || e.sb.Status.State != sandbox.StateRunning {
			continue
		}
		cs = append(cs, cand{id, max(e.sb.Status.LastTransitionAt.UnixNano(), e.active.Load())})
	}
	m.mu.RUnlock()
	if len(cs) == 0 {
		return ""
	}
	return slices.MinFunc(cs, func(a, b cand) int { return cmp.Or(cmp.Compare(a.active, b.active), cmp.Compare(a.id, b.id)) }).id
}

// createNeed is what a create asks of its tenant's quotas.
func createNeed(req CreateRequest) quota.Usage {
	return quota.Usage{Running: 1, Sandboxes: 1, CPUMillis: req.Resources.CPUMillis, MemoryBytes: req.Resources.MemoryBytes, Creates: 1}
}

// quotaNeedsLimits refuses a create without a cpu (or memory) limit from
// a tenant whose quota bounds the sum of them: unbounded, it would
// escape the quota.
func (m *Manager) quotaNeedsLimits(req CreateRequest) error {
	lim := m.Limits(req.Tenant)
	switch {
	case lim.CPUMillis > 0 && req.Resources.CPUMillis == 0:
		return errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeInvalidResourceLimit,
			"resourceLimits.cpu is required: tenant %s's quota bounds the cpu of its running sandboxes", req.Tenant)
	case lim.MemoryBytes > 0 && req.Resources.MemoryBytes == 0:
		return errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeInvalidResourceLimit,
			"resourceLimits.memory is required: tenant %s's quota bounds the memory of its running sandboxes", req.Tenant)
	}
	return nil
}

// resumeNeed is what resuming sb asks of its tenant's quotas.
func resumeNeed(sb *sandbox.Sandbox) quota.Usage {
	return quota.Usage{Running: 1, CPUMillis: sb.Resources.CPUMillis, MemoryBytes: sb.Resources.MemoryBytes}
}
