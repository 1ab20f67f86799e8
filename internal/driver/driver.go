// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

// Package driver is the runtime contract: the Driver interface every
// backend (native OCI, Docker, Kubernetes, the in-memory fake) implements,
// the Spec it is given, the Handle the lifecycle manager persists to recover
// a sandbox after a restart, the small optional capability interfaces,
// and what every runtime words or sizes alike (ExitedDuringStart,
// RunscHostPids).
// The conformance suite in drivertest checks every implementation against
// this contract. Besides the standard library it imports only api, errdefs
// and internal/sandbox; lifecycle consumes it, concrete drivers implement
// it, and internal/cli wires one in: no other package under internal/
// imports a concrete driver (internal/archtest checks both).
package driver

import (
	"context"
	"encoding/json"
	"net/netip"
	"time"

	"github.com/corral-dev/corral/internal/sandbox"
)

// Driver runs sandboxes on one backend. Methods are safe for concurrent use,
// honour ctx, and return errors classified by package errdefs.
type Driver interface {
	// Create provisions and starts the sandbox and returns the handle the
	// caller must persist. It returns once the sandbox's execd answers. It
	// fails with ErrAlreadyExists if spec.ID is live. When it fails, or ctx
	// ends before it returns, it leaves no backend object behind.
	Create(ctx context.Context, spec Spec) (*Handle, error)
	// Recover re-attaches to a sandbox started by an earlier process (or an
	// earlier instance of the driver). It is a no-op for a sandbox already
	// tracked; ErrNotFound if the backend lost it.
	Recover(ctx context.Context, h *Handle) error
	// Inspect reports the backend's view of a sandbox; ErrNotFound if unknown.
	Inspect(ctx context.Context, id string) (Status, error)
	// Wait blocks until the sandbox's entrypoint exits, or ctx ends. It
	// returns ErrNotFound if the sandbox is unknown or vanishes.
	Wait(ctx context.Context, id string) (Exit, error)
	// Stop asks the entrypoint to exit, and kills it after grace. Idempotent:
	// stopping a stopped sandbox is nil; ErrNotFound if unknown.
	Stop(ctx context.Context, id string, grace time.Duration) error
	// Destroy removes every backend object of the sandbox. Idempotent; nil
	// for an unknown id.
	Destroy(ctx context.Context, id string) error
	// Endpoint returns a host-reachable address that forwards to port inside
	// the sandbox. ErrNotFound if unknown; ErrFailedPrecondition if stopped.
	Endpoint(ctx context.Context, id string, port int) (netip.AddrPort, error)
	// List reports every sandbox carrying our labels, tracked or not.
	List(ctx context.Context) ([]Listing, error)
}

// Pauser is implemented by drivers that can freeze a sandbox in place.
type Pauser interface {
	// Pause freezes every process of the sandbox. It returns once frozen.
	// ErrFailedPrecondition if the sandbox is not running.
	Pause(ctx context.Context, id string) error
	// Resume thaws a paused sandbox. It returns once running.
	// ErrFailedPrecondition if the sandbox is not paused.
	Resume(ctx context.Context, id string) error
}

// Consoler is implemented by drivers that keep what a sandbox's entrypoint
// printed (its stdout and stderr, bounded by the runtime).
type Consoler interface {
	// Console returns the last limit bytes of sandbox id's console output,
	// and whether there was more before them. ErrNotFound for an unknown
	// sandbox.
	Console(ctx context.Context, id string, limit int) (out []byte, truncated bool, err error)
}

// Snapshotter is implemented by drivers that can capture a sandbox's
// filesystem so that a new sandbox can start from it (Spec.Snapshot).
type Snapshotter interface {
	// Snapshot captures sandbox id under snapshotID and returns the
	// reference to persist. The sandbox keeps running.
	Snapshot(ctx context.Context, id, snapshotID string) (*SnapshotRef, error)
	// RemoveSnapshot deletes a snapshot's backend objects. Idempotent.
	RemoveSnapshot(ctx context.Context, ref *SnapshotRef) error
	// ListSnapshots reports every snapshot carrying our labels.
	ListSnapshots(ctx context.Context) ([]SnapshotRef, error)
}

// Isolator is implemented by drivers that run sandboxes in more than one
// isolation tier, or in one worth naming (docs/isolation.md): Isolation
// names the tier of the sandbox h is the handle of, such as
// api.IsolationRuncUserns. Without it, the driver's name is reported.
type Isolator interface {
	Isolation(h *Handle) string
}

// Tierer is implemented by drivers that run each sandbox in the
// isolation tier its Spec.Isolation names. Tiers reports the tiers this
// driver can run here (api.IsolationRunc, api.IsolationRunsc), and why
// each other known tier cannot run (unavailable, for the operator).
type Tierer interface {
	Tiers() (available []string, unavailable map[string]string)
}

// Volumer is implemented by drivers that mount volumes (Spec.Volumes)
// and keep tenants' named volumes. A named volume is its tenant's: the
// same name of another tenant is another volume.
type Volumer interface {
	// ListVolumes reports tenant's named volumes and the sandboxes that
	// mount each.
	ListVolumes(ctx context.Context, tenant string) ([]VolumeInfo, error)
	// RemoveVolume deletes tenant's named volume and what it holds:
	// ErrNotFound if it has none of that name, ErrFailedPrecondition
	// while a sandbox mounts it.
	RemoveVolume(ctx context.Context, tenant, name string) error
}

// VolumeInfo is one named volume.
type VolumeInfo struct {
	Name      string
	CreatedAt time.Time
	InUseBy   []string
	// SizeBytes is the size it was made with (0: none of its own).
	SizeBytes int64
}

// Pooler is implemented by drivers that keep sandboxes started ahead of
// time (a warm pool). Claim reserves one that can become spec and returns
// its ID; the caller then calls Create with spec.ID set to that ID, which
// only personalises the waiting sandbox (tenant, labels, environment,
// entrypoint, limits, access token). ok is false when none suits, and the
// caller creates as usual. A claimed ID that Create is never called for
// is destroyed when the driver closes. Claim only takes from the driver's
// memory and never blocks, so it takes no context.
type Pooler interface {
	Claim(spec Spec) (id string, ok bool)
}

// PoolSizer is a Pooler whose warm pools change while it runs (a
// template's warm pool). SetPool keeps n warm sandboxes made from spec
// (its image and platform) under key, for creates whose Spec.Pool is key;
// 0 drops the pool and its warm sandboxes. Ready is how many are ready.
// Warmable says why a create of spec could not take a warm sandbox (what
// must be made with the sandbox), or nil.
type PoolSizer interface {
	Pooler
	SetPool(key string, spec Spec, n int)
	Ready(key string) int
	Warmable(spec Spec) error
}

// Expirer is implemented by drivers whose backend deletes a sandbox at
// its expiry by itself (the kube driver: the controller deletes the
// Sandbox resource), so that expiry holds even while no server runs. The
// lifecycle manager's reaper enforces expiry for every driver; SetExpiry
// keeps the backend's copy current when a sandbox is renewed. The backend
// keeps the expiry of the latest change of the record, so renews made at
// once through several servers end with it agreeing with the record,
// whatever order they arrive in.
type Expirer interface {
	SetExpiry(ctx context.Context, id string, at time.Time, of Change) error
}

// Change identifies one change of a sandbox's record: the record's
// revision where the store versions records (a decimal number that grows
// with every change, comparable across servers), else the time it was
// made.
type Change struct {
	Version string
	At      time.Time
}

// Importer is implemented by drivers whose backend keeps what the
// lifecycle manager needs to rebuild its record of a sandbox (the kube
// driver: the Sandbox resource and its Secret). At start the manager
// imports the running sandboxes the backend lists and it has no record of
// — its database was lost — instead of removing them as orphans.
type Importer interface {
	// Import reads sandbox id back from the backend; ErrNotFound if it is
	// gone or not running.
	Import(ctx context.Context, id string) (*Imported, error)
}

// Imported is a sandbox as its backend knows it.
type Imported struct {
	// Spec has ID, Tenant, Image.URI, Entrypoint, Labels (the user's
	// metadata), Resources, ExecdToken and ExpiresAt.
	Spec      Spec
	CreatedAt time.Time
	Handle    *Handle
}

// Spec is everything a driver needs to create one sandbox.
type Spec struct {
	ID     string
	Tenant string
	// Pool is the warm pool a create may take a sandbox from (a
	// template's); empty: its image's, if the runtime keeps one.
	Pool  string
	Image Image
	// Snapshot, when set, is the captured filesystem to start from instead
	// of Image.
	Snapshot   *SnapshotRef
	Platform   Platform
	Entrypoint []string
	Env        map[string]string
	Resources  Resources
	// Labels are user metadata; drivers add the corral.dev/ labels.
	Labels map[string]string
	// ExecdToken is handed to the sandbox's execd as its access token.
	ExecdToken string
	// EgressToken authenticates the sandbox's egress API.
	EgressToken string
	// CredentialProxy gives the sandbox a credential vault: its own CA,
	// trusted inside, and an injecting proxy in its egress enforcer.
	CredentialProxy bool
	// SecretsDir, when set, is mounted read-only at /run/corral: the
	// socket the sandbox fetches its granted secrets on.
	SecretsDir string
	// Volumes are mounted in the sandbox, in order: host volumes already
	// resolved (Volume.Resolved), named volumes by the tenant's name.
	Volumes []sandbox.Volume
	// NetworkPolicy is the egress policy as JSON; nil means the runtime's
	// configured default.
	NetworkPolicy json.RawMessage
	// ExpiresAt is when the sandbox expires; zero means never. Drivers
	// that implement Expirer record it with the backend.
	ExpiresAt time.Time
	// Isolation is the isolation tier (api.IsolationRunc or
	// api.IsolationRunsc) for drivers that implement Tierer; empty means
	// runc.
	Isolation string
}

// Image names an image and optional registry credentials.
type Image struct {
	URI      string
	Username string
	Password string
}

// Platform is the requested OS and architecture; empty means the host's.
type Platform struct {
	OS   string
	Arch string
}

// Resources are limits; zero fields mean the driver's default.
type Resources struct {
	CPUMillis   int64
	MemoryBytes int64
	Pids        int64
	// DiskBytes bounds what the sandbox writes to its root file system
	// (0: no bound of its own).
	DiskBytes int64
}

// Handle is what the lifecycle manager persists to recover a sandbox after
// a restart.
type Handle struct {
	// ID is the sandbox ID; it is also stamped on the backend object.
	ID string `json:"id"`
	// Driver is the driver that wrote State.
	Driver string `json:"driver"`
	// Version is the schema of State; a driver reads every older version.
	Version int `json:"version"`
	// State is driver-private: container ID, pid and start time, pod UID...
	State json.RawMessage `json:"state,omitempty"`
}

// SnapshotRef identifies a snapshot on the backend.
type SnapshotRef struct {
	ID      string            `json:"id"`
	Driver  string            `json:"driver"`
	Version int               `json:"version"`
	State   json.RawMessage   `json:"state,omitempty"`
	Labels  map[string]string `json:"labels,omitempty"`
	// Bytes is what the snapshot holds on the backend's disk (0: not
	// known); the server bounds each tenant's total.
	Bytes int64 `json:"bytes,omitempty"`
}

// Phase is the backend's coarse view of a sandbox.
type Phase int

// The phases a driver reports.
const (
	PhaseCreating Phase = iota + 1
	PhaseRunning
	PhasePaused
	PhaseExited
)

func (p Phase) String() string {
	switch p {
	case PhaseCreating:
		return "creating"
	case PhaseRunning:
		return "running"
	case PhasePaused:
		return "paused"
	case PhaseExited:
		return "exited"
	}
	return "unknown"
}

// Status is what Inspect reports.
type Status struct {
	Phase     Phase
	StartedAt time.Time
	// Exit is set when Phase is PhaseExited.
	Exit *Exit
}

// Exit describes how a sandbox's entrypoint ended.
type Exit struct {
	// Code is the exit status, or 128+signal when killed by a signal.
	Code int
	At   time.Time
	// Reason is a short explanation when the backend has one ("OOMKilled").
	Reason string
}

// Listing is one backend object found by List.
type Listing struct {
	ID        string
	Tenant    string
	CreatedAt time.Time
	Labels    map[string]string
}

// Policed reports whether the sandbox has an egress policy its runtime
// must enforce (an absent policy and a JSON null both mean none).
func (s Spec) Policed() bool {
	return len(s.NetworkPolicy) > 0 && string(s.NetworkPolicy) != "null"
}

// BackendLabels returns the labels a driver stamps on the objects of spec.
func BackendLabels(spec Spec) map[string]string {
	l := make(map[string]string, len(spec.Labels)+3)
	for k, v := range spec.Labels {
		l[k] = v
	}
	l[sandbox.LabelSandboxID] = spec.ID
	l[sandbox.LabelManaged] = "true"
	l[sandbox.LabelTenant] = spec.Tenant
	return l
}

// Tail is an io.Writer that keeps the last Max bytes written to it, for
// a Consoler that reads a stream of unknown length in bounded memory.
type Tail struct {
	Max int
	buf []byte
	// Truncated: more than Max bytes were written.
	Truncated bool
}

func (t *Tail) Write(p []byte) (int, error) {
	n := len(p)
	if len(p) >= t.Max {
		t.Truncated = t.Truncated || len(p) > t.Max || len(t.buf) > 0
		t.buf = append(t.buf[:0], p[len(p)-t.Max:]...)
		return n, nil
	}
	if over := len(t.buf) + len(p) - t.Max; over > 0 {
		t.Truncated = true
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	t.buf = append(t.buf, p...)
	return n, nil
}

// Bytes are the bytes kept.
func (t *Tail) Bytes() []byte { return t.buf }
