// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package lifecycle

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/errdefs"
	"github.com/corral-dev/corral/internal/driver"
	"github.com/corral-dev/corral/internal/logctx"
	"github.com/corral-dev/corral/internal/sandbox"
	"github.com/corral-dev/corral/internal/secrets"
)

// DefaultEntrypoint runs when a request names none.
func DefaultEntrypoint() []string { return []string{"tail", "-f", "/dev/null"} }

// CreateRequest is a validated request for a new sandbox.
type CreateRequest struct {
	Tenant string
	// Pool is the warm pool of the template the create came from (its
	// key), if it keeps one.
	Pool string
	// IdempotencyKey and RequestHash make retries return the first result.
	IdempotencyKey string
	RequestHash    string

	// Exactly one of Image and SnapshotID is set.
	Image      *sandbox.Image
	ImageAuth  *driver.Image
	SnapshotID string
	Platform   *sandbox.Platform
	// Timeout is the time to live; 0 means the sandbox is cleaned up by hand.
	Timeout       time.Duration
	Resources     sandbox.Resources
	Env           map[string]string
	Metadata      map[string]string
	Entrypoint    []string
	NetworkPolicy json.RawMessage
	// CredentialProxy turns on the credential vault and its injecting
	// proxy (it needs NetworkPolicy).
	CredentialProxy bool
	Extensions      map[string]string
	// Volumes are checked for form (sandbox.ParseVolumes); Create
	// resolves host volumes against the server's allowed prefixes.
	Volumes []sandbox.Volume
}

// Create makes a sandbox and returns it Running. The record exists before
// the driver is called, and the driver's handle is persisted before Create
// returns, so a crash at any point leaves something recovery can finish.
// A client that goes away mid-create does not abort it: a retry with the
// same Idempotency-Key finds the result.
func (m *Manager) Create(ctx context.Context, req CreateRequest) (*sandbox.Sandbox, error) {
	req, err := m.admit(req)
	if err != nil {
		return nil, err
	}
	if req.IdempotencyKey != "" {
		if sb, found, err := m.replay(ctx, req); found {
			return sb, err
		}
	}
	spec, err := m.specFor(req)
	if err != nil {
		return nil, err
	}
	if err := m.quotaNeedsLimits(req); err != nil {
		return nil, err
	}
	releaseVolumes, err := m.admitVolumeBytes(ctx, req)
	if err != nil {
		return nil, err
	}
	defer releaseVolumes()
	id := sandbox.NewID()
	release, err := m.admitRoom(ctx, req.Tenant, id, "", createNeed(req), "create")
	if err != nil {
		return nil, err
	}
	defer func() { release() }()
	sb, warm := m.newRecord(req, id, &spec)
	if sb.ID != id {
		release = m.rekeyRoom(ctx, req.Tenant, id, sb.ID, release)
	}
	ctx = logctx.With(ctx, slog.String("sandbox_id", sb.ID))
	e := &entry{sb: sb, created: make(chan struct{})}
	// The entry is locked before anyone can see it, so operations on the new
	// sandbox wait until Create is done with it.
	e.op.Lock()
	defer e.op.Unlock()
	defer close(e.created)
	won, err := m.insert(ctx, req, e)
	release() // the record holds the room now, or there is none
	if won != nil || err != nil {
		return won, err
	}
	m.wakeReaper(sb.ID)
	return m.start(ctx, e, spec, warm)
}

// admit applies the server's limits and defaults to a create: the longest
// time to live, the resource defaults and maxima, the network policy of
// creates that give none.
func (m *Manager) admit(req CreateRequest) (CreateRequest, error) {
	if limit := m.cfg.MaxTimeout; limit > 0 && req.Timeout == 0 {
		return req, errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeInvalidParameter,
			"timeout is required: this server limits sandboxes to %d seconds", int64(limit/time.Second))
	} else if limit > 0 && req.Timeout > limit {
		return req, errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeInvalidParameter,
			"timeout %d exceeds the configured maximum of %d seconds", int64(req.Timeout/time.Second), int64(limit/time.Second))
	}
	res, err := m.cfg.Limits.Apply(req.Resources)
	if err != nil {
		return req, err
	}
	if req.Volumes, err = m.admitVolumes(req.Volumes); err != nil {
		return req, err
	}
	req.Resources = res
	if len(req.NetworkPolicy) == 0 && len(m.cfg.DefaultNetworkPolicy) > 0 {
		req.NetworkPolicy = m.cfg.DefaultNetworkPolicy
	}
	return req, nil
}

// specFor is what the driver is asked to run for req, but for the
// sandbox's identity and tokens (newRecord).
func (m *Manager) specFor(req CreateRequest) (driver.Spec, error) {
	spec := driver.Spec{
		Tenant: req.Tenant, Pool: req.Pool, Platform: driver.Platform{}, Entrypoint: req.Entrypoint, Env: req.Env,
		Resources: driver.Resources(req.Resources), Labels: req.Metadata, NetworkPolicy: req.NetworkPolicy,
		CredentialProxy: req.CredentialProxy, Volumes: req.Volumes,
	}
	if req.Image != nil {
		spec.Image = driver.Image{URI: req.Image.URI}
		if req.ImageAuth != nil {
			spec.Image.Username, spec.Image.Password = req.ImageAuth.Username, req.ImageAuth.Password
		}
	}
	if req.Platform != nil {
		spec.Platform = driver.Platform{OS: req.Platform.OS, Arch: req.Platform.Arch}
	}
	if req.SnapshotID != "" {
		ref, err := m.restorable(req.Tenant, req.SnapshotID)
		if err != nil {
			return spec, err
		}
		spec.Snapshot = ref
	}
	if len(spec.Entrypoint) == 0 {
		spec.Entrypoint = DefaultEntrypoint()
	}
	tier, err := m.tierFor(req.Extensions)
	if err != nil {
		return spec, err
	}
	spec.Isolation = tier
	grants, err := secrets.Grants(req.Extensions)
	if err != nil {
		return spec, err
	}
	events, err := secrets.WantsEvents(req.Extensions)
	if err != nil {
		return spec, errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeInvalidParameter, "%v", err)
	}
	if len(grants) > 0 || events {
		if tier == api.IsolationRunsc {
			// gVisor connects to no host Unix socket unless every sandbox
			// of it may (--host-uds): refused, rather than a socket that
			// silently never answers.
			return spec, errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeAPINotSupported,
				"extensions[%s] and [%s]: the secrets and events socket is not available to %s sandboxes; ask for %s isolation (extensions[%s])",
				secrets.Extension, secrets.ExtensionEvents, api.IsolationRunsc, api.IsolationRunc, api.ExtensionIsolation)
		}
		if m.cfg.Secrets == nil {
			return spec, errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeAPINotSupported, "extensions[%s] and [%s]: this server serves no secrets and events socket", secrets.Extension, secrets.ExtensionEvents)
		}
		spec.SecretsDir = m.cfg.Secrets.Dir()
	}
	return spec, nil
}

// newRecord is the new sandbox's record, Pending, with id (or the ID of
// the warm sandbox the driver hands this create: warm) and new tokens,
// which it also writes into spec.
func (m *Manager) newRecord(req CreateRequest, id string, spec *driver.Spec) (_ *sandbox.Sandbox, warm bool) {
	now := time.Now().UTC()
	if p, ok := m.d.(driver.Pooler); ok {
		if pid, ok := p.Claim(*spec); ok {
			id, warm = pid, true
		}
	}
	sb := &sandbox.Sandbox{
		ID: id, Tenant: req.Tenant, Image: req.Image, SnapshotID: req.SnapshotID, Platform: req.Platform,
		Entrypoint: spec.Entrypoint, Metadata: req.Metadata, Resources: req.Resources, Extensions: req.Extensions,
		NetworkPolicy: req.NetworkPolicy, CreatedAt: now, UpdatedAt: now, Driver: m.cfg.DriverName,
		ExecdToken: sandbox.NewToken(), EgressToken: sandbox.NewToken(),
		Status: sandbox.Status{State: sandbox.StatePending, Reason: sandbox.ReasonProvisioning,
			Message: "the runtime is starting the sandbox", LastTransitionAt: now},
	}
	if req.Timeout > 0 {
		sb.ExpiresAt = now.Add(req.Timeout)
	}
	spec.ID, spec.ExecdToken, spec.EgressToken = sb.ID, string(sb.ExecdToken), string(sb.EgressToken)
	spec.ExpiresAt = sb.ExpiresAt
	if spec.SecretsDir != "" {
		env := make(map[string]string, len(spec.Env)+3)
		maps.Copy(env, spec.Env)
		maps.Copy(env, m.cfg.Secrets.Env(sb.ID))
		spec.Env = env
	}
	return sb, warm
}

// insert makes e's sandbox known: in the table, then in the records with
// the request's Idempotency-Key. When a concurrent create with the same
// key won, won is what that create made.
func (m *Manager) insert(ctx context.Context, req CreateRequest, e *entry) (won *sandbox.Sandbox, err error) {
	sb := e.sb
	var idem *sandbox.Idempotency
	if req.IdempotencyKey != "" {
		idem = &sandbox.Idempotency{Tenant: req.Tenant, Key: req.IdempotencyKey, RequestHash: req.RequestHash, SandboxID: sb.ID, CreatedAt: sb.CreatedAt}
	}
	// In the table before the record is: a concurrent create with the
	// same key that finds the key in the store must find the sandbox here
	// too (it then waits on the entry until this create is done).
	m.mu.Lock()
	m.tablePut(sb.ID, e)
	m.mu.Unlock()
	// The store sets the revision on a copy, which then replaces the
	// record in the table: a record there is never changed in place (reads
	// clone it, and other servers' writes of it may arrive meanwhile).
	stored := sb.Clone()
	prev, err := m.rec.InsertSandbox(ctx, stored, idem, eventFor(sb, "created"))
	if err == nil {
		m.mu.Lock()
		if e.sb == sb {
			m.setRecord(e, stored)
		}
		m.mu.Unlock()
		return nil, nil
	}
	m.mu.Lock()
	if m.sandboxes[sb.ID] == e {
		m.tableDelete(sb.ID)
	}
	m.mu.Unlock()
	if prev == nil {
		return nil, err
	}
	// A concurrent request with the same key won the race.
	won, found, err := m.replay(ctx, req)
	if !found {
		return nil, errdefs.Newf(errdefs.ErrUnavailable, api.CodeSandboxRuntimeUnavailable,
			"a concurrent create with Idempotency-Key %q could not reach the runtime; retry", req.IdempotencyKey)
	}
	if won == nil && err == nil {
		return nil, errdefs.Newf(errdefs.ErrUnavailable, api.CodeSandboxRuntimeUnavailable,
			"a concurrent create with Idempotency-Key %q left nothing; retry", req.IdempotencyKey)
	}
	return won, err
}

// start has the driver run e's sandbox and records it Running, or Failed
// with what went wrong. The driver runs on a context of its own: a client
// that disconnects must not leave a half-made sandbox.
func (m *Manager) start(ctx context.Context, e *entry, spec driver.Spec, warm bool) (*sandbox.Sandbox, error) {
	dctx, cancel := backgroundCtx(ctx, m.cfg.CreateTimeout)
	defer cancel()
	h, err := m.d.Create(dctx, spec)
	if err == nil {
		var hb []byte
		if hb, err = json.Marshal(h); err == nil {
			next := m.current(e)
			next.Handle = hb
			msg := ""
			if warm {
				msg = "started from a warm sandbox"
			}
			_ = next.SetStatus(sandbox.StateRunning, sandbox.ReasonStarted, msg, time.Now().UTC())
			if err = m.commit(dctx, e, next, "started"); err == nil {
				m.watch(next.ID)
				return next.Clone(), nil
			}
		}
	}
	return nil, m.failCreate(ctx, e, err)
}

// failCreate records why a create failed, removes whatever the driver left
// and returns the error for the caller.
func (m *Manager) failCreate(ctx context.Context, e *entry, cause error) error {
	ctx, cancel := backgroundCtx(ctx, opTimeout)
	defer cancel()
	sb := m.current(e)
	msg := userMessage(cause)
	m.log.WarnContext(ctx, "sandbox start failed", "sandbox_id", sb.ID, "err", cause)
	if err := m.d.Destroy(ctx, sb.ID); err != nil {
		m.log.WarnContext(ctx, "destroy after failed start", "sandbox_id", sb.ID, "err", err)
	}
	kind := errdefs.KindOf(cause)
	if r, ok := refuse(cause, createKinds); ok && !errdefs.UserFacing(cause) {
		kind = r.kind
	} else if !slices.Contains(createKinds, kind) {
		kind = nil
	}
	reason := sandbox.ReasonStartFailed
	if kind == errdefs.ErrUnavailable {
		reason = sandbox.ReasonRuntimeUnavailable
	}
	next := sb.Clone()
	_ = next.SetStatus(sandbox.StateFailed, reason, msg, time.Now().UTC())
	if err := m.commit(ctx, e, next, "start_failed"); err != nil {
		m.log.ErrorContext(ctx, "record failed start", "sandbox_id", sb.ID, "err", err)
	}
	if kind == nil {
		if errors.Is(cause, context.DeadlineExceeded) {
			kind = errdefs.ErrUnavailable
			msg = "the runtime did not start the sandbox in time"
		}
	}
	return &errdefs.Error{Kind: kind, Code: errCode(cause, api.CodeSandboxStartFailed),
		Message: fmt.Sprintf("sandbox %s failed to start: %s", sb.ID, msg), Cause: cause}
}

// replay answers a create whose Idempotency-Key is known. found is false
// when the key is new.
func (m *Manager) replay(ctx context.Context, req CreateRequest) (_ *sandbox.Sandbox, found bool, _ error) {
	prev, err := m.rec.LookupIdempotency(ctx, req.Tenant, req.IdempotencyKey)
	if errors.Is(err, errdefs.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, true, err
	}
	if prev.RequestHash != req.RequestHash {
		return nil, true, errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeIdempotencyKeyMismatch,
			"Idempotency-Key %q was used for a different request", req.IdempotencyKey)
	}
	e, err := m.lookup(ctx, req.Tenant, prev.SandboxID)
	if m.shared != nil && errors.Is(err, errdefs.ErrNotFound) {
		// Another server claimed the key a moment ago and is about to
		// write the record.
		e, err = m.awaitRecord(ctx, req.Tenant, prev.SandboxID)
	}
	if err != nil {
		return nil, true, errdefs.Newf(errdefs.ErrFailedPrecondition, api.CodeSandboxInvalidState,
			"the sandbox %s created with Idempotency-Key %q no longer exists", prev.SandboxID, req.IdempotencyKey)
	}
	// Give the same answer as the first request: wait for it to finish
	// (on another server: until its record leaves Pending).
	select {
	case <-e.created:
	case <-ctx.Done():
		return nil, true, ctx.Err()
	}
	if m.shared != nil {
		if err := m.awaitSettled(ctx, prev.SandboxID); err != nil {
			return nil, true, err
		}
	}
	sb := m.current(e)
	if sb.Status.State == sandbox.StateFailed && sb.Status.Reason == sandbox.ReasonRuntimeUnavailable {
		// The first try never reached the runtime: this one tries again.
		if err := m.rec.ReleaseIdempotency(ctx, req.Tenant, req.IdempotencyKey, sb.ID); err != nil {
			return nil, true, err
		}
		return nil, false, nil
	}
	if sb.Status.State == sandbox.StateFailed && sb.Status.Reason == sandbox.ReasonStartFailed {
		return nil, true, errdefs.Newf(errdefs.ErrFailedPrecondition, api.CodeSandboxStartFailed,
			"sandbox %s failed to start: %s", sb.ID, sb.Status.Message)
	}
	return sb, true, nil
}
