// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/errdefs"
	"github.com/corral-dev/corral/internal/sandbox"
)

// MaxFork is the most sandboxes one fork makes.
const MaxFork = 100

// forkParallel bounds the creates of one fork that run at once: beyond a
// few, creates on one machine only queue for its cores and disk.
const forkParallel = 8

// ForkRequest asks for Count new sandboxes that start from the file
// system a running sandbox has now.
type ForkRequest struct {
	Tenant    string
	SandboxID string
	Count     int
	// Metadata replaces the source's in the forks when set.
	Metadata map[string]string
	// Env is the forks' environment (the server does not keep the
	// source's).
	Env map[string]string
	// Timeout is each fork's time to live; 0 means the source's.
	Timeout time.Duration
}

// ForkResult is a fork that made every sandbox it was asked for.
type ForkResult struct {
	// SnapshotID is the snapshot the forks were made from; it is deleted
	// once they run (its layer stays while they do).
	SnapshotID string
	Sandboxes  []*sandbox.Sandbox
}

// Fork captures a running sandbox once, as a snapshot, and makes
// req.Count sandboxes from it, in parallel. It returns when every fork
// runs; if any cannot be made, the others are deleted and Fork fails:
// a caller gets all it asked for or nothing. Memory is not carried: a
// fork's processes are its entrypoint's, started afresh.
func (m *Manager) Fork(ctx context.Context, req ForkRequest) (*ForkResult, error) {
	if req.Count < 1 || req.Count > MaxFork {
		return nil, errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeInvalidParameter, "count must be 1 to %d", MaxFork)
	}
	snapper, err := m.snapshotter()
	if err != nil {
		return nil, err
	}
	e, err := m.lookup(ctx, req.Tenant, req.SandboxID)
	if err != nil {
		return nil, err
	}
	src := m.current(e)
	if src.Status.State != sandbox.StateRunning {
		return nil, errdefs.Newf(errdefs.ErrFailedPrecondition, api.CodeSnapshotInvalidSource,
			"sandbox %s is %s; only a Running sandbox can be forked", req.SandboxID, src.Status.State)
	}
	creates := make([]CreateRequest, req.Count)
	for i := range creates {
		creates[i] = m.forkCreate(src, req)
	}
	sn, err := m.acceptSnapshot(ctx, req.Tenant, req.SandboxID, "fork of "+req.SandboxID)
	if err != nil {
		return nil, err
	}
	// The capture and the creates outlive a client that goes away: what
	// they make is deleted below if the fork fails.
	bctx := context.WithoutCancel(ctx)
	sn, err = m.capture(bctx, snapper, sn)
	if err != nil {
		// A runtime's failure without a kind is the runtime's (an engine
		// that lost an image under it, a full disk): 503, not 500.
		kind := errdefs.KindOf(err)
		if kind == nil {
			kind = errdefs.ErrUnavailable
		}
		return nil, errdefs.Wrap(kind, errCode(err, api.CodeSnapshotCaptureFailed),
			fmt.Sprintf("sandbox %s could not be captured for the fork: %s", req.SandboxID, sn.Message), err)
	}
	out := &ForkResult{SnapshotID: sn.ID, Sandboxes: make([]*sandbox.Sandbox, req.Count)}
	errs := make([]error, req.Count)
	var wg sync.WaitGroup
	sem := make(chan struct{}, forkParallel)
	for i := range creates {
		creates[i].SnapshotID = sn.ID
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			out.Sandboxes[i], errs[i] = m.Create(bctx, creates[i])
		})
	}
	wg.Wait()
	err = errors.Join(errs...)
	if err != nil {
		for _, sb := range out.Sandboxes {
			if sb != nil {
				if derr := m.Delete(bctx, req.Tenant, sb.ID); derr != nil {
					m.log.WarnContext(ctx, "delete a fork after the fork failed", "sandbox_id", sb.ID, "err", derr)
				}
			}
		}
	}
	if derr := m.DeleteSnapshot(bctx, req.Tenant, sn.ID); derr != nil {
		m.log.WarnContext(ctx, "delete a fork's snapshot", "snapshot_id", sn.ID, "err", derr)
	}
	if err != nil {
		first := errs[firstError(errs)]
		return nil, errdefs.Wrap(errdefs.KindOf(first), errCode(first, api.CodeSandboxStartFailed),
			fmt.Sprintf("the fork of %s made none of its %d sandboxes: %s", req.SandboxID, req.Count, userMessage(first)), err)
	}
	ids := make([]string, len(out.Sandboxes))
	for i, sb := range out.Sandboxes {
		ids[i] = sb.ID
	}
	m.publish(bctx, published(src, api.EventSandboxForked, map[string]any{"snapshotId": sn.ID, "sandboxIds": ids}))
	return out, nil
}

func firstError(errs []error) int {
	for i, err := range errs {
		if err != nil {
			return i
		}
	}
	return 0
}

// forkCreate is the create of one fork of src: its image, entrypoint,
// limits, egress policy and extensions, the request's environment, and
// the request's metadata (else the source's) and time to live (else the
// one the source was given).
func (m *Manager) forkCreate(src *sandbox.Sandbox, req ForkRequest) CreateRequest {
	c := CreateRequest{
		Tenant: req.Tenant, Platform: src.Platform, Resources: src.Resources, Entrypoint: append([]string(nil), src.Entrypoint...),
		NetworkPolicy: src.NetworkPolicy, Extensions: maps.Clone(src.Extensions), Env: maps.Clone(req.Env),
		Metadata: maps.Clone(src.Metadata), Timeout: req.Timeout,
	}
	if req.Metadata != nil {
		c.Metadata = maps.Clone(req.Metadata)
	}
	if c.Timeout == 0 && !src.ExpiresAt.IsZero() {
		c.Timeout = src.ExpiresAt.Sub(src.CreatedAt).Round(time.Second)
		if m.cfg.MaxTimeout > 0 {
			c.Timeout = min(c.Timeout, m.cfg.MaxTimeout)
		}
	}
	return c
}
