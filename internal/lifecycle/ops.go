// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/errdefs"
	"github.com/corral-dev/corral/internal/driver"
	"github.com/corral-dev/corral/internal/sandbox"
)

// opTimeout bounds one driver operation started by a request.
const opTimeout = 2 * time.Minute

func invalidState(sb *sandbox.Sandbox, want string) error {
	return errdefs.Newf(errdefs.ErrFailedPrecondition, api.CodeSandboxInvalidState,
		"sandbox %s is %s; %s", sb.ID, sb.Status.State, want)
}

// Pause freezes a Running sandbox and returns once it is Paused.
func (m *Manager) Pause(ctx context.Context, tenant, id string) error {
	p, ok := m.d.(driver.Pauser)
	e, err := m.lookup(ctx, tenant, id)
	if err != nil {
		return err
	}
	e.op.Lock()
	defer e.op.Unlock()
	sb := m.current(e)
	if sb.Status.State != sandbox.StateRunning {
		return invalidState(sb, "only a Running sandbox can be paused")
	}
	if !ok {
		return errdefs.Newf(errdefs.ErrFailedPrecondition, api.CodeAPINotSupported, "the %s runtime cannot pause sandboxes", m.cfg.DriverName)
	}
	return m.flip(ctx, e, sb, flipper{
		via: sandbox.StatePausing, to: sandbox.StatePaused, back: sandbox.StateRunning,
		ok: sandbox.ReasonPaused, failed: sandbox.ReasonPauseFailed, verb: "pause", do: p.Pause, event: "paused",
	})
}

// Resume thaws a Paused sandbox and returns once it is Running. It
// needs room in its tenant's quotas, as a create does.
func (m *Manager) Resume(ctx context.Context, tenant, id string) error {
	p, ok := m.d.(driver.Pauser)
	e, err := m.lookup(ctx, tenant, id)
	if err != nil {
		return err
	}
	if sb := m.current(e); sb.Status.State == sandbox.StatePaused && ok {
		release, err := m.admitRoom(ctx, tenant, id, sb.Version, resumeNeed(sb), "resume "+id)
		if err != nil {
			return err
		}
		defer release()
	}
	e.op.Lock()
	defer e.op.Unlock()
	sb := m.current(e)
	if sb.Status.State != sandbox.StatePaused {
		return invalidState(sb, "only a Paused sandbox can be resumed")
	}
	if !ok {
		return errdefs.Newf(errdefs.ErrFailedPrecondition, api.CodeAPINotSupported, "the %s runtime cannot resume sandboxes", m.cfg.DriverName)
	}
	return m.flip(ctx, e, sb, flipper{
		via: sandbox.StateResuming, to: sandbox.StateRunning, back: sandbox.StatePaused,
		ok: sandbox.ReasonResumed, failed: sandbox.ReasonResumeFailed, verb: "resume", do: p.Resume, event: "resumed",
		adjust: func(done *sandbox.Sandbox, now time.Time) { pausedExpiry(sb, done, now) },
	})
}

// flipper describes a pause or a resume.
type flipper struct {
	via, to, back sandbox.State
	ok, failed    string
	verb          string // what the API says could not be done
	do            func(context.Context, string) error
	event         string
	// adjust changes the record the flip ends with (nil: nothing).
	adjust func(done *sandbox.Sandbox, now time.Time)
}

// flip moves sb through f.via to f.to, or back to f.back if the driver
// refuses. The caller holds e.op.
func (m *Manager) flip(ctx context.Context, e *entry, sb *sandbox.Sandbox, f flipper) error {
	dctx, cancel := backgroundCtx(ctx, opTimeout)
	defer cancel()
	mid := sb.Clone()
	_ = mid.SetStatus(f.via, f.ok, "", time.Now().UTC())
	if err := m.commit(dctx, e, mid, f.via.String()); err != nil {
		return err
	}
	if err := f.do(dctx, sb.ID); err != nil {
		err = runtimeError(f.verb, err, changeKinds)
		back := mid.Clone()
		_ = back.SetStatus(f.back, f.failed, userMessage(err), time.Now().UTC())
		if cerr := m.commit(dctx, e, back, f.failed); cerr != nil {
			return errors.Join(err, cerr)
		}
		return fmt.Errorf("sandbox %s: %w", sb.ID, err)
	}
	done := mid.Clone()
	now := time.Now().UTC()
	_ = done.SetStatus(f.to, f.ok, "", now)
	if f.adjust != nil {
		f.adjust(done, now)
	}
	return m.commit(dctx, e, done, f.event)
}

// Renew moves a sandbox's expiry to at and returns the new expiry.
func (m *Manager) Renew(ctx context.Context, tenant, id string, at time.Time) (time.Time, error) {
	return retryConflicts(func() (time.Time, error) { return m.renew(ctx, tenant, id, at) })
}

func (m *Manager) renew(ctx context.Context, tenant, id string, at time.Time) (time.Time, error) {
	e, err := m.lookup(ctx, tenant, id)
	if err != nil {
		return time.Time{}, err
	}
	e.op.Lock()
	defer e.op.Unlock()
	sb := m.current(e)
	now := time.Now().UTC()
	switch {
	case sb.Status.State.Terminal() || sb.Status.State == sandbox.StateStopping:
		return time.Time{}, invalidState(sb, "its expiration can no longer change")
	case sb.ExpiresAt.IsZero():
		return time.Time{}, errdefs.Newf(errdefs.ErrFailedPrecondition, api.CodeInvalidExpiration,
			"sandbox %s does not have automatic expiration enabled (it was created without a timeout)", id)
	case !at.After(now):
		return time.Time{}, errdefs.New(errdefs.ErrInvalidArgument, api.CodeInvalidExpiration,
			"New expiration time must be in the future.")
	case m.cfg.MaxTimeout > 0 && at.Sub(now) > m.cfg.MaxTimeout:
		return time.Time{}, errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeInvalidExpiration,
			"new expiration is more than the configured maximum of %d seconds away", int64(m.cfg.MaxTimeout/time.Second))
	}
	next := sb.Clone()
	next.ExpiresAt, next.UpdatedAt = at.UTC(), now
	if err := m.commit(ctx, e, next, "renewed"); err != nil {
		return time.Time{}, err
	}
	// The record first, then the backend's copy, fenced by the record's
	// time: a renew that lost a race never overwrites the winner's. A
	// failure here is returned; renewing again repairs it.
	if x, ok := m.d.(driver.Expirer); ok {
		if err := x.SetExpiry(ctx, id, next.ExpiresAt, driver.Change{Version: next.Version, At: now}); err != nil {
			return time.Time{}, err
		}
	}
	m.wakeReaper(id)
	return next.ExpiresAt, nil
}

// PatchMetadata applies an RFC 7396 merge patch to a sandbox's metadata.
func (m *Manager) PatchMetadata(ctx context.Context, tenant, id string, patch map[string]*string) (*sandbox.Sandbox, error) {
	return retryConflicts(func() (*sandbox.Sandbox, error) { return m.patchMetadata(ctx, tenant, id, patch) })
}

func (m *Manager) patchMetadata(ctx context.Context, tenant, id string, patch map[string]*string) (*sandbox.Sandbox, error) {
	e, err := m.lookup(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	e.op.Lock()
	defer e.op.Unlock()
	sb := m.current(e)
	md, err := sandbox.MergePatch(sb.Metadata, patch)
	if err != nil {
		return nil, err
	}
	if len(patch) == 0 {
		return sb, nil
	}
	next := sb.Clone()
	next.Metadata, next.UpdatedAt = md, time.Now().UTC()
	if len(md) == 0 {
		next.Metadata = nil
	}
	if err := m.commit(ctx, e, next, "metadata_patched"); err != nil {
		return nil, err
	}
	return next.Clone(), nil
}

// Delete destroys a sandbox and forgets it. It returns once the runtime has
// removed everything; if the runtime fails, the sandbox stays Stopping and
// the removal is retried in the background.
func (m *Manager) Delete(ctx context.Context, tenant, id string) error {
	_, err := retryConflicts(func() (struct{}, error) { return struct{}{}, m.delete(ctx, tenant, id) })
	return err
}

func (m *Manager) delete(ctx context.Context, tenant, id string) error {
	e, err := m.lookup(ctx, tenant, id)
	if err != nil {
		return err
	}
	e.op.Lock()
	defer e.op.Unlock()
	if !m.tracked(e) {
		return notFound(id)
	}
	dctx, cancel := backgroundCtx(ctx, opTimeout)
	defer cancel()
	return m.stop(dctx, e, sandbox.ReasonUserDelete, "deleted by the user")
}

// tracked reports whether e is still the live entry of its sandbox (a
// concurrent delete may have removed it while the caller waited for e.op).
func (m *Manager) tracked(e *entry) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.sandboxes[e.sb.ID] == e
}

// stop destroys e's backend objects. reason user_delete then forgets the
// sandbox; any other reason leaves it Terminated for the retention period.
// The caller holds e.op.
func (m *Manager) stop(ctx context.Context, e *entry, reason, message string) error {
	sb := m.current(e)
	if !sb.Status.State.Terminal() && sb.Status.State != sandbox.StateStopping {
		next := sb.Clone()
		_ = next.SetStatus(sandbox.StateStopping, reason, message, time.Now().UTC())
		if err := m.commit(ctx, e, next, "stopping"); err != nil {
			return err
		}
		sb = next
	}
	if err := m.d.Destroy(ctx, sb.ID); err != nil {
		m.log.WarnContext(ctx, "destroy failed; will retry", "sandbox_id", sb.ID, "err", err)
		return runtimeError("delete", fmt.Errorf("sandbox %s: destroy: %w", sb.ID, err), changeKinds)
	}
	if reason == sandbox.ReasonUserDelete {
		return m.remove(ctx, e, "deleted")
	}
	if sb.Status.State.Terminal() {
		return nil
	}
	next := sb.Clone()
	_ = next.SetStatus(sandbox.StateTerminated, sb.Status.Reason, sb.Status.Message, time.Now().UTC())
	return m.commit(ctx, e, next, "terminated")
}

// Endpoint returns a host-reachable address for a port of a sandbox, and the
// sandbox as it was when resolved.
func (m *Manager) Endpoint(ctx context.Context, tenant, id string, port int) (netip.AddrPort, *sandbox.Sandbox, error) {
	e, err := m.lookup(ctx, tenant, id)
	if err != nil {
		return netip.AddrPort{}, nil, err
	}
	sb := m.current(e)
	switch sb.Status.State {
	case sandbox.StateRunning, sandbox.StatePaused, sandbox.StatePausing, sandbox.StateResuming:
	default:
		return netip.AddrPort{}, nil, invalidState(sb, "only a Running or Paused sandbox has endpoints")
	}
	addr, err := m.d.Endpoint(ctx, id, port)
	if err != nil {
		return netip.AddrPort{}, nil, runtimeError(fmt.Sprintf("reach port %d of", port), fmt.Errorf("sandbox %s port %d: %w", id, port, err), endpointKind)
	}
	return addr, sb, nil
}

// ByID returns any tenant's sandbox; the proxy route uses it to check a
// sandbox's own access token.
func (m *Manager) ByID(id string) (*sandbox.Sandbox, error) {
	e := m.liveEntry(id)
	if e == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if m.readThrough(ctx, id) {
			e = m.liveEntry(id)
		}
	}
	if e == nil {
		return nil, notFound(id)
	}
	return m.current(e), nil
}
