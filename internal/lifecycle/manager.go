// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

// Package lifecycle owns what happens to sandboxes over time: create (intent
// persisted before the driver is called, the handle persisted before the
// caller hears back), pause and resume, renew, metadata, delete, snapshots,
// TTL expiry, watching for exits, and the recovery that runs when the server
// starts (recover every live sandbox through its handle, destroy half-made
// ones, sweep orphans, reap what expired while the server was down). It
// serves reads from memory, so creates in flight never slow a GET. It
// depends on the driver contract and the sandbox model, and keeps its
// records behind contracts of its own (Records, LocalStore,
// SharedRecords), which internal/store and internal/kube/records
// implement. internal/cli makes the Manager and internal/server calls it;
// outside tests no other package imports it (internal/archtest checks).
package lifecycle

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/errdefs"
	"github.com/corral-dev/corral/internal/driver"
	"github.com/corral-dev/corral/internal/logctx"
	"github.com/corral-dev/corral/internal/quota"
	"github.com/corral-dev/corral/internal/sandbox"
	"github.com/corral-dev/corral/internal/secrets"
)

// Config configures a Manager. Zero durations take the defaults named on
// each field.
type Config struct {
	// Driver runs the sandboxes; DriverName is recorded with each of them.
	Driver     driver.Driver
	DriverName string
	// Store is the server's own database (SQLite): it keeps snapshots
	// and, unless Records is set, everything else.
	Store LocalStore
	// Records, when set, keeps the sandbox records, their events and the
	// idempotency keys instead of Store; SharedRecords make the server
	// stateless (other servers share them).
	Records Records
	// Quotas keeps the tenants' quota overrides instead of Store (one
	// shared by replicas).
	Quotas QuotaStore
	Logger *slog.Logger
	// MaxTimeout bounds a sandbox's time to live; 0 means no bound.
	MaxTimeout time.Duration
	// AllowedHostPaths are the host directories (and what is beneath
	// them) host volumes may mount; none: host volumes are refused.
	AllowedHostPaths []string
	// SnapshotsUnsupported says, for users, why a runtime that takes no
	// snapshots takes none.
	SnapshotsUnsupported string
	// HostVolumesUnsupported says, for users, why a runtime that mounts
	// named volumes mounts no host volumes.
	HostVolumesUnsupported string
	// CreateTimeout bounds one driver Create (default 5m).
	CreateTimeout time.Duration
	// RecoveryTimeout is the one budget for recovery at start (default 2m).
	RecoveryTimeout time.Duration
	// MaintainInterval is how often orphans are swept and failed cleanups
	// retried (default 1m).
	MaintainInterval time.Duration
	// OrphanGrace protects backend objects younger than this from the
	// periodic orphan sweep (default 2m).
	OrphanGrace time.Duration
	// RetainTerminated is how long Terminated and Failed sandboxes stay
	// visible (default 1h).
	RetainTerminated time.Duration
	// IdempotencyTTL is how long an Idempotency-Key is remembered (default 24h).
	IdempotencyTTL time.Duration
	// Secrets, when set, lets sandboxes granted secrets (the extension
	// corral.dev/secrets) fetch them on demand.
	Secrets SecretSource
	// DefaultNetworkPolicy applies to creates without a networkPolicy;
	// nil leaves such sandboxes without any network.
	DefaultNetworkPolicy json.RawMessage
	// Limits are the server's defaults and maxima of sandbox resources.
	Limits sandbox.Limits
	// RenewOnAccessInterval is how often at most a sandbox that asked for
	// renew-on-access is renewed by requests to it (default 1m).
	RenewOnAccessInterval time.Duration
	// Storage bounds what a tenant keeps on the server's disks besides
	// its sandboxes: named volumes and snapshots.
	Storage StorageLimits
	// VolumeSizeUnsupported says, for users, why a runtime cannot bound a
	// named volume's size (empty: it can); such a runtime refuses
	// pvc.storage, and Storage.MaxVolumeBytes does not apply to it.
	VolumeSizeUnsupported string
	// Quota are the server's default quotas of every tenant (0: no
	// bound), its admission policy (default reject) and queue wait
	// (default 30s); snapshots' come from Storage. A tenant's overrides
	// (SetQuota) replace them.
	Quota quota.Limits
	// Capacity bounds the sandboxes the server runs for all tenants
	// together (0: no bound); creates and resumes past it are handled by
	// their tenant's policy, and queued ones are let in fairly.
	Capacity int64
	// Idle is the idle policy of sandboxes whose create gives none
	// (sandbox.ExtensionIdleTimeout); zero: none.
	Idle sandbox.IdlePolicy
	// IdleCheck is how often sandboxes are checked for idleness
	// (default 15s).
	IdleCheck time.Duration
	// AutoResumeTimeout bounds the resume of a paused sandbox a request
	// reached (default 30s).
	AutoResumeTimeout time.Duration
	// PausedRetention deletes sandboxes paused for longer (0: kept). A
	// paused sandbox's time to live does not run down.
	PausedRetention time.Duration
	// ExpiryWarning is how long before a sandbox's expiry the event
	// sandbox.expiring is published (default 1m; negative: never).
	ExpiryWarning time.Duration
	// Isolation are the isolation tiers creates may ask for with
	// extensions[corral.dev/isolation], the default first (empty: runc on
	// a runtime with tiers, driver.Tierer). New refuses a tier the driver
	// cannot run.
	Isolation []string
}

// StorageLimits are a server's bounds on what each tenant stores beyond
// its sandboxes' own disks (zero: no bound).
type StorageLimits struct {
	// MaxVolumeBytes is the largest named volume a create may make; a
	// named volume made without pvc.storage gets this size.
	MaxVolumeBytes int64
	// MaxSnapshots is how many snapshots a tenant may keep (Creating and
	// Ready ones).
	MaxSnapshots int
	// MaxSnapshotBytes is how many bytes a tenant's Ready snapshots may
	// hold, as the runtime reports them.
	MaxSnapshotBytes int64
}

// SecretSource is what a sandbox granted secrets is given: the directory
// of the socket it asks on, and its environment (ID, session key).
type SecretSource interface {
	Dir() string
	Env(id string) map[string]string
}

func (c *Config) setDefaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.CreateTimeout, 5*time.Minute)
	def(&c.RecoveryTimeout, 2*time.Minute)
	def(&c.MaintainInterval, time.Minute)
	def(&c.OrphanGrace, 2*time.Minute)
	def(&c.RetainTerminated, time.Hour)
	def(&c.IdempotencyTTL, 24*time.Hour)
	def(&c.RenewOnAccessInterval, time.Minute)
	def(&c.IdleCheck, 15*time.Second)
	def(&c.AutoResumeTimeout, 30*time.Second)
	if c.ExpiryWarning == 0 {
		c.ExpiryWarning = time.Minute
	}
	if c.Quota.Policy == "" {
		c.Quota.Policy = quota.PolicyReject
	}
	if c.Quota.QueueTimeout == 0 {
		c.Quota.QueueTimeout = 30 * time.Second
	}
	if c.Logger == nil {
		c.Logger = logctx.Discard()
	}
}

// Manager runs the lifecycle of every sandbox of one server.
type Manager struct {
	cfg     Config
	isoMemo isolationMemo
	log     *slog.Logger
	d       driver.Driver
	st      LocalStore
	rec     Records
	// shared is rec when other servers write it too.
	shared SharedRecords
	// adm keeps admission claims when other servers admit too.
	adm SharedAdmission
	// volMu serializes the volume-bytes checks; volHeld is the bytes of
	// the named volumes creates are making, by tenant key and name.
	volMu   sync.Mutex
	volHeld map[string]int64

	// mu guards the maps below and the records they point to. Records are
	// replaced, never modified in place, so a clone taken under RLock is
	// consistent.
	mu        sync.RWMutex
	sandboxes map[string]*entry
	snapshots map[string]*sandbox.Snapshot
	// snapQuota serializes the quota check and the record of a new
	// snapshot, and of a captured one's size.
	snapQuota sync.Mutex
	// expiring holds IDs whose expiry is being handled.
	expiring map[string]bool
	// unimported holds backend sandboxes an Importer could not read back;
	// orphan sweeps leave them alone.
	unimported map[string]bool
	// watching holds the IDs an exit watcher runs for.
	watching map[string]bool
	// gone holds, with shared records, the IDs whose records were deleted
	// and when: a read that raced the deletion must not bring one back.
	gone map[string]time.Time
	// misses bounds the reads of the shared store for sandboxes this
	// server has no record of.
	misses *secrets.Rate
	// warned holds, per sandbox, the expiry it was warned of.
	warned map[string]time.Time
	// denials samples each sandbox's egress denials for the stream.
	denials map[string]*secrets.Rate

	// evCh is closed, and replaced, when this server writes an event.
	evMu sync.Mutex
	evCh chan struct{}

	// qmu guards q, the admission's state: checking a request against
	// its tenant's quotas and reserving its room happen under it.
	qmu sync.Mutex
	q   quotaState
	// stopping is closed when the server shuts down (StopQueue).
	stopping chan struct{}

	// tasks holds background work queued for Run to start.
	tasksMu sync.Mutex
	tasks   []func(context.Context)
	kick    chan struct{}
	wake    chan struct{}

	// tally is what the table's records hold, under mu.
	tally tally

	// The reaper's state, under mu: each sandbox's next deadline, those
	// named by wakeReaper since it last looked, when it next looks at
	// all of them, and how many looks it made (for tests).
	deadlines  deadlineHeap
	reapDirty  map[string]struct{}
	rescanAt   time.Time
	reapLooked int
}

// entry is one sandbox: its current record and the lock that serializes
// operations changing it.
type entry struct {
	op sync.Mutex
	sb *sandbox.Sandbox
	// accessRenewed is when a request last renewed the sandbox (unix ns).
	accessRenewed atomic.Int64
	// active is when a request last reached the sandbox through the
	// server (unix ns).
	active atomic.Int64
	// created is closed when the Create that made this entry has finished.
	created chan struct{}
}

// New returns a Manager. Call Start, then Run.
func New(cfg Config) (*Manager, error) {
	if cfg.Driver == nil || cfg.Store == nil || cfg.DriverName == "" {
		return nil, errors.New("lifecycle: Driver, DriverName and Store are required")
	}
	cfg.setDefaults()
	if err := cfg.Quota.CheckDefaults(); err != nil {
		return nil, fmt.Errorf("lifecycle: quotas: %w", err)
	}
	if err := checkIsolation(&cfg); err != nil {
		return nil, err
	}
	m := &Manager{
		cfg: cfg, log: cfg.Logger, d: cfg.Driver, st: cfg.Store, rec: cfg.Records,
		sandboxes:  map[string]*entry{},
		snapshots:  map[string]*sandbox.Snapshot{},
		expiring:   map[string]bool{},
		unimported: map[string]bool{},
		watching:   map[string]bool{},
		gone:       map[string]time.Time{},
		misses:     secrets.NewRate(20, 50),
		warned:     map[string]time.Time{},
		denials:    map[string]*secrets.Rate{},
		evCh:       make(chan struct{}),
		q:          newQuotaState(),
		volHeld:    map[string]int64{},
		stopping:   make(chan struct{}),
		kick:       make(chan struct{}, 1),
		wake:       make(chan struct{}, 1),
		reapDirty:  map[string]struct{}{},
	}
	if m.rec == nil {
		m.rec = cfg.Store
	}
	m.shared, _ = m.rec.(SharedRecords)
	if m.shared != nil {
		m.adm, _ = m.rec.(SharedAdmission)
	}
	return m, nil
}

// DriverName is the name of the runtime sandboxes run on.
func (m *Manager) DriverName() string { return m.cfg.DriverName }

// Capabilities reports the optional driver capabilities.
func (m *Manager) Capabilities() (pause, snapshot bool) {
	_, pause = m.d.(driver.Pauser)
	_, snapshot = m.d.(driver.Snapshotter)
	return pause, snapshot
}

func notFound(id string) error {
	return errdefs.Newf(errdefs.ErrNotFound, api.CodeSandboxNotFound, "sandbox %s not found", id)
}

// lookup returns the entry of a tenant's sandbox. Another tenant's sandbox
// is not found, exactly like a missing one. With shared records, a
// sandbox another server created a moment ago may not have reached this
// one yet: it is read from the store before being called missing.
func (m *Manager) lookup(ctx context.Context, tenant, id string) (*entry, error) {
	if tenant == "" {
		// No request without a principal gets here (the proxy route checks
		// a token first); should one, it owns nothing.
		return nil, notFound(id)
	}
	e := m.entryOf(tenant, id)
	if e == nil && m.readThrough(ctx, id) {
		e = m.entryOf(tenant, id)
	}
	if e == nil {
		return nil, notFound(id)
	}
	return e, nil
}

// entryOf returns the entry of a tenant's sandbox, or nil.
func (m *Manager) entryOf(tenant, id string) *entry {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if e, ok := m.sandboxes[id]; ok && e.sb.Tenant == tenant {
		return e
	}
	return nil
}

// current returns a clone of e's record.
func (m *Manager) current(e *entry) *sandbox.Sandbox {
	return m.record(e).Clone()
}

// record is e's record, shared (see Shared).
func (m *Manager) record(e *entry) *sandbox.Sandbox {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return e.sb
}

// commit persists next with ev and then makes it the current record of e.
// When another server changed the record first (shared records), e takes
// the newest revision and the error says to retry.
func (m *Manager) commit(ctx context.Context, e *entry, next *sandbox.Sandbox, evType string) error {
	ev := eventFor(next, evType)
	if err := m.rec.UpdateSandbox(ctx, next, ev); err != nil {
		if errors.Is(err, sandbox.ErrConflict) && m.shared != nil {
			m.refresh(ctx, next.ID)
			return conflict(next.ID)
		}
		if errors.Is(err, errdefs.ErrNotFound) && m.shared != nil {
			m.unfollowed(next.ID) // another server removed it
		}
		return err
	}
	m.mu.Lock()
	if e.sb.Version == "" || !newer(e.sb.Version, next.Version) {
		m.setRecord(e, next)
	}
	m.mu.Unlock()
	m.wakeReaper(next.ID)
	m.quotaKick()
	if ev.Kind != "" {
		m.eventsWritten()
	}
	// logctx.Handler writes sandbox_id once, whether ctx carries it or not.
	m.log.InfoContext(ctx, "sandbox event", "event", evType, "sandbox_id", next.ID, "state", next.Status.State.String(), "reason", next.Status.Reason)
	return nil
}

// remove deletes e's record from the store and from memory.
func (m *Manager) remove(ctx context.Context, e *entry, evType string) error {
	sb := m.current(e)
	ev := eventFor(sb, evType)
	if err := m.rec.DeleteSandbox(ctx, sb.ID, ev); err != nil {
		return err
	}
	if ev.Kind != "" {
		m.eventsWritten()
	}
	m.mu.Lock()
	if m.sandboxes[sb.ID] == e {
		m.tableDelete(sb.ID)
	}
	m.mu.Unlock()
	m.log.InfoContext(ctx, "sandbox event", "event", evType, "sandbox_id", sb.ID)
	return nil
}

func eventFor(sb *sandbox.Sandbox, evType string) *sandbox.Event {
	ev := &sandbox.Event{
		At: time.Now().UTC(), Tenant: sb.Tenant, SandboxID: sb.ID, Type: evType,
		State: sb.Status.State.String(), Reason: sb.Status.Reason, Message: sb.Status.Message,
		Kind: kindOf(evType, sb),
	}
	if ev.Kind != "" {
		ev.Metadata = sb.Metadata
	}
	return ev
}

// Get returns a tenant's sandbox. With shared records, one in the middle
// of a transition is read from the store: another server may have just
// finished it (a create answered Running there is not Pending here).
func (m *Manager) Get(ctx context.Context, tenant, id string) (*sandbox.Sandbox, error) {
	sb, err := m.Shared(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	return sb.Clone(), nil
}

// Shared is Get without the copy: the record as the table holds it,
// which the caller must not change. A record in the table is never
// changed in place (a change replaces it), so while the pointer is the
// same the content is: a reader may keep what it made of one (the GET
// answer's encoding) until Shared returns another.
func (m *Manager) Shared(ctx context.Context, tenant, id string) (*sandbox.Sandbox, error) {
	e, err := m.lookup(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	if sb := m.record(e); m.shared == nil || !transitional(sb.Status.State) {
		return sb, nil
	}
	m.refresh(ctx, id)
	if e, err = m.lookup(ctx, tenant, id); err != nil {
		return nil, err
	}
	return m.record(e), nil
}

// Events returns up to limit entries of a sandbox's event log after seq
// (lifecycle transitions and egress decisions), oldest first; typePrefix
// filters by type ("egress" selects egress.dns, egress.connection...).
func (m *Manager) Events(ctx context.Context, tenant, id string, after int64, limit int, typePrefix string) ([]sandbox.Event, error) {
	if _, err := m.lookup(ctx, tenant, id); err != nil {
		return nil, err
	}
	return m.rec.Events(ctx, id, after, limit, typePrefix)
}

// AppendAudit adds audit events (egress decisions, secret reads) to the
// sandboxes' event log, where Events reads them: the Manager is the log's
// one writer. It fills in each event's tenant, and publishes egress
// denials to the tenant's stream, sampled (denialRate per sandbox).
// Records that keep no audit drop them: the cluster's, whose runtime
// (Kubernetes) has neither a secrets socket nor enforcers this server
// follows.
func (m *Manager) AppendAudit(ctx context.Context, evs []sandbox.Event) error {
	al, ok := m.rec.(AuditLog)
	if !ok {
		return nil
	}
	published := false
	for i := range evs {
		ev := &evs[i]
		e := m.liveEntry(ev.SandboxID)
		if e == nil {
			continue
		}
		sb := m.current(e)
		if ev.Tenant == "" {
			ev.Tenant = sb.Tenant
		}
		if strings.HasPrefix(ev.Type, "egress.") && ev.Reason == "deny" && m.denialSampled(sb.ID) {
			ev.Kind, ev.Metadata = api.EventEgressDenied, sb.Metadata
			published = true
		}
	}
	if err := al.AppendAudit(ctx, evs); err != nil {
		return err
	}
	if published {
		m.eventsWritten()
	}
	return nil
}

// denialRate bounds the egress denials of one sandbox published to its
// tenant's stream: a sandbox probing the network must not flood it. All
// of them stay in the sandbox's own log.
const (
	denialRate  = 1
	denialBurst = 10
)

// denialSampled reports whether the next egress denial of id is
// published.
func (m *Manager) denialSampled(id string) bool {
	m.mu.Lock()
	r, ok := m.denials[id]
	if !ok {
		r = secrets.NewRate(denialRate, denialBurst)
		m.denials[id] = r
	}
	m.mu.Unlock()
	return r.Allow()
}

// SecretGrants tells the secrets socket about sandbox id: its tenant,
// the secrets it was granted and whether it runs. No tenant check: the
// caller proved with the session key that it is this sandbox.
func (m *Manager) SecretGrants(id string) (secrets.Sandbox, bool) {
	m.mu.RLock()
	e, ok := m.sandboxes[id]
	m.mu.RUnlock()
	if !ok {
		return secrets.Sandbox{}, false
	}
	sb := m.current(e)
	grants, _ := secrets.Grants(sb.Extensions)
	events, _ := secrets.WantsEvents(sb.Extensions)
	return secrets.Sandbox{Tenant: sb.Tenant, Grants: grants, Running: sb.Status.State == sandbox.StateRunning, Events: events}, true
}

// PostAppEvent publishes an event code in sandbox id posted on its
// socket (the caller proved with the session key that it is that
// sandbox, and checked the body's form).
func (m *Manager) PostAppEvent(ctx context.Context, id string, ev secrets.AppEvent) error {
	e := m.liveEntry(id)
	if e == nil {
		return notFound(id)
	}
	return m.appendEvents(ctx, []sandbox.Event{published(m.current(e), api.EventApp, ev)})
}

// Filter selects sandboxes in List. Empty fields select everything.
type Filter struct {
	States   []sandbox.State
	Metadata map[string]string
	// Page counts from 1; PageSize is at least 1.
	Page     int
	PageSize int
}

// List returns one page of a tenant's sandboxes matching f, newest first,
// and the number of matches.
func (m *Manager) List(_ context.Context, tenant string, f Filter) ([]*sandbox.Sandbox, int) {
	m.mu.RLock()
	var matches []*sandbox.Sandbox
	for _, e := range m.sandboxes {
		sb := e.sb
		if sb.Tenant != tenant {
			continue
		}
		if len(f.States) > 0 && !slices.Contains(f.States, sb.Status.State) {
			continue
		}
		if !sandbox.MatchesMetadata(sb.Metadata, f.Metadata) {
			continue
		}
		matches = append(matches, sb)
	}
	m.mu.RUnlock()
	slices.SortFunc(matches, func(a, b *sandbox.Sandbox) int {
		if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
			return c
		}
		return cmp.Compare(b.ID, a.ID)
	})
	total := len(matches)
	page, size := max(f.Page, 1), max(f.PageSize, 1)
	start := min((page-1)*size, total)
	end := min(start+size, total)
	out := make([]*sandbox.Sandbox, 0, end-start)
	for _, sb := range matches[start:end] {
		out = append(out, sb.Clone())
	}
	return out, total
}

// Isolation names the isolation tier sb runs in (docs/isolation.md), from
// its runtime's handle; "" before the runtime made it.
func (m *Manager) Isolation(sb *sandbox.Sandbox) string {
	if len(sb.Handle) == 0 {
		return ""
	}
	iso, ok := m.d.(driver.Isolator)
	if !ok {
		return m.cfg.DriverName
	}
	return m.isoMemo.get(sb.Handle, func() string {
		var h driver.Handle
		if err := json.Unmarshal(sb.Handle, &h); err != nil {
			return ""
		}
		return iso.Isolation(&h)
	})
}

// IsolationCounts returns how many sandboxes not yet ended run in each
// isolation tier, all tenants together.
func (m *Manager) IsolationCounts() map[string]int {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := map[string]int{}
	for _, e := range m.sandboxes {
		if !e.sb.Status.State.Terminal() {
			if iso := m.Isolation(e.sb); iso != "" {
				out[iso]++
			}
		}
	}
	return out
}

// Counts returns how many sandboxes are in each state, all tenants together.
func (m *Manager) Counts() map[sandbox.State]int {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := map[sandbox.State]int{}
	for _, e := range m.sandboxes {
		out[e.sb.Status.State]++
	}
	return out
}

// spawn queues fn to run in its own goroutine owned by Run.
func (m *Manager) spawn(fn func(context.Context)) {
	m.tasksMu.Lock()
	m.tasks = append(m.tasks, fn)
	m.tasksMu.Unlock()
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

// wakeReaper makes the reaper look at sandbox id again (its deadlines
// may have moved) and recompute its next deadline.
func (m *Manager) wakeReaper(id string) {
	m.mu.Lock()
	m.reapDirty[id] = struct{}{}
	m.mu.Unlock()
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// Run runs background work (exit watchers, the TTL reaper, orphan sweeps,
// retries) until ctx ends, then waits for all of it. Sandboxes keep running.
func (m *Manager) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	wg.Go(func() { m.reapLoop(ctx) })
	wg.Go(func() { m.maintainLoop(ctx) })
	wg.Go(func() { m.quotaLoop(ctx) })
	wg.Go(func() { m.idleLoop(ctx) })
	for {
		m.tasksMu.Lock()
		tasks := m.tasks
		m.tasks = nil
		m.tasksMu.Unlock()
		for _, fn := range tasks {
			wg.Go(func() { fn(ctx) })
		}
		select {
		case <-ctx.Done():
			wg.Wait()
			return nil
		case <-m.kick:
		}
	}
}

func decodeHandle(sb *sandbox.Sandbox) (*driver.Handle, error) {
	if len(sb.Handle) == 0 {
		return nil, nil
	}
	var h driver.Handle
	if err := json.Unmarshal(sb.Handle, &h); err != nil {
		return nil, fmt.Errorf("sandbox %s: corrupt handle: %w", sb.ID, err)
	}
	return &h, nil
}

// backgroundCtx detaches ctx from its caller's cancellation and bounds it,
// for work that must finish even when the request that started it is gone.
func backgroundCtx(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), d)
}

// Console returns the end (at most limit bytes) of what a sandbox's
// entrypoint printed, and whether there was more. A sandbox whose backend
// is gone (a Terminated one) has nothing left to read.
func (m *Manager) Console(ctx context.Context, tenant, id string, limit int) (out []byte, truncated bool, err error) {
	if _, err := m.lookup(ctx, tenant, id); err != nil {
		return nil, false, err
	}
	c, ok := m.d.(driver.Consoler)
	if !ok {
		return nil, false, errdefs.Newf(errdefs.ErrNotImplemented, api.CodeDiagnosticsNotImplemented,
			"the %s runtime keeps no console output", m.cfg.DriverName)
	}
	out, truncated, err = c.Console(ctx, id, limit)
	if errors.Is(err, errdefs.ErrNotFound) {
		return nil, false, nil
	}
	return out, truncated, runtimeError("read the console of", err, []error{errdefs.ErrUnavailable})
}

// LastEvents returns a sandbox's latest events (at most limit, oldest
// first) that keep reports true of, and whether there were more.
func (m *Manager) LastEvents(ctx context.Context, tenant, id string, limit int, keep func(*sandbox.Event) bool) (_ []sandbox.Event, truncated bool, err error) {
	if _, err := m.lookup(ctx, tenant, id); err != nil {
		return nil, false, err
	}
	var last []sandbox.Event
	for after := int64(0); ; {
		page, err := m.rec.Events(ctx, id, after, 1000, "")
		if err != nil {
			return nil, false, err
		}
		for i := range page {
			if keep(&page[i]) {
				last = append(last, page[i])
			}
		}
		if len(last) > limit {
			truncated = true
			last = append(last[:0], last[len(last)-limit:]...)
		}
		if len(page) < 1000 {
			return last, truncated, nil
		}
		after = page[len(page)-1].Seq
	}
}

// RenewOnAccess is called for each request the server forwards to sb: a
// sandbox created with access.renew.extend.seconds N has its expiry
// extended to max(now + N, its expiry), at most once per
// RenewOnAccessInterval. The renewal runs in the background and never
// fails the request; one that cannot be made is logged. It reports
// whether it started one.
func (m *Manager) RenewOnAccess(sb *sandbox.Sandbox) bool {
	e := m.liveEntry(sb.ID)
	if e == nil {
		return false
	}
	now := time.Now()
	e.active.Store(now.UnixNano())
	extend := sb.RenewOnAccess()
	if extend == 0 {
		return false
	}
	last := e.accessRenewed.Load()
	if now.UnixNano()-last < int64(m.cfg.RenewOnAccessInterval) || !e.accessRenewed.CompareAndSwap(last, now.UnixNano()) {
		return false
	}
	if m.cfg.MaxTimeout > 0 {
		extend = min(extend, m.cfg.MaxTimeout)
	}
	at := now.Add(extend)
	if !at.After(m.current(e).ExpiresAt) {
		return false
	}
	m.spawn(func(ctx context.Context) {
		if _, err := m.Renew(ctx, sb.Tenant, sb.ID, at); err != nil {
			m.log.WarnContext(ctx, "renew on access", "sandbox_id", sb.ID, "err", err)
		}
	})
	return true
}
