// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/corral-dev/corral/errdefs"
	"github.com/corral-dev/corral/internal/driver"
	"github.com/corral-dev/corral/internal/sandbox"
)

// watch starts a goroutine that waits for the sandbox's entrypoint to
// exit, unless one already does.
func (m *Manager) watch(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.watching[id] {
		return
	}
	m.watching[id] = true
	m.spawn(func(ctx context.Context) {
		defer func() {
			m.mu.Lock()
			delete(m.watching, id)
			m.mu.Unlock()
		}()
		m.waitExit(ctx, id)
	})
}

func (m *Manager) waitExit(ctx context.Context, id string) {
	backoff := time.Second
	for {
		exit, err := m.d.Wait(ctx, id)
		switch {
		case ctx.Err() != nil:
			return
		case err == nil:
			m.onExit(ctx, id, exit)
			return
		case errors.Is(err, errdefs.ErrNotFound):
			m.onLost(ctx, id)
			return
		}
		m.log.WarnContext(ctx, "wait for sandbox failed; retrying", "sandbox_id", id, "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, time.Minute)
	}
}

// liveEntry returns the entry of id if it is in a state an exit can change.
func (m *Manager) liveEntry(id string) *entry {
	m.mu.RLock()
	defer m.mu.RUnlock()
	e, ok := m.sandboxes[id]
	if !ok {
		return nil
	}
	return e
}

func exitChangesState(s sandbox.State) bool {
	switch s {
	case sandbox.StateRunning, sandbox.StatePaused, sandbox.StatePausing, sandbox.StateResuming, sandbox.StatePending:
		return true
	}
	return false
}

// onExit records that the entrypoint ended and frees the backend objects.
func (m *Manager) onExit(ctx context.Context, id string, exit driver.Exit) {
	e := m.liveEntry(id)
	if e == nil {
		return
	}
	e.op.Lock()
	defer e.op.Unlock()
	sb := m.current(e)
	if !exitChangesState(sb.Status.State) || !m.tracked(e) {
		return
	}
	m.recordExit(ctx, e, sb, exit)
}

// recordExit moves sb to Terminated or Failed and frees its backend objects.
// The caller holds e.op.
func (m *Manager) recordExit(ctx context.Context, e *entry, sb *sandbox.Sandbox, exit driver.Exit) {
	id := sb.ID
	next := sb.Clone()
	now := time.Now().UTC()
	msg := fmt.Sprintf("the entrypoint exited with code %d", exit.Code)
	if exit.Reason != "" {
		msg += " (" + exit.Reason + ")"
	}
	if exit.Code == 0 {
		_ = next.SetStatus(sandbox.StateTerminated, sandbox.ReasonExited, msg, now)
	} else {
		_ = next.SetStatus(sandbox.StateFailed, sandbox.ReasonExitedError, msg, now)
	}
	if err := m.commit(ctx, e, next, "exited"); err != nil {
		m.log.ErrorContext(ctx, "record exit", "sandbox_id", id, "err", err)
		return
	}
	if err := m.d.Destroy(ctx, id); err != nil {
		// The orphan sweep removes what is left of terminal sandboxes.
		m.log.WarnContext(ctx, "destroy after exit", "sandbox_id", id, "err", err)
	}
}

// onLost records that the runtime no longer has the sandbox.
func (m *Manager) onLost(ctx context.Context, id string) {
	e := m.liveEntry(id)
	if e == nil {
		return
	}
	e.op.Lock()
	defer e.op.Unlock()
	sb := m.current(e)
	if !exitChangesState(sb.Status.State) || !m.tracked(e) {
		return
	}
	m.markLost(ctx, e, sb)
}

// markLost moves sb to Failed because the runtime lost it. The caller holds e.op.
func (m *Manager) markLost(ctx context.Context, e *entry, sb *sandbox.Sandbox) {
	next := sb.Clone()
	_ = next.SetStatus(sandbox.StateFailed, sandbox.ReasonLost, "the runtime no longer has this sandbox", time.Now().UTC())
	if err := m.commit(ctx, e, next, "lost"); err != nil {
		m.log.ErrorContext(ctx, "record lost sandbox", "sandbox_id", sb.ID, "err", err)
		return
	}
	if err := m.d.Destroy(ctx, sb.ID); err != nil {
		m.log.WarnContext(ctx, "destroy leftovers of lost sandbox", "sandbox_id", sb.ID, "err", err)
	}
}
