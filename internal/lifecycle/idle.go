// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package lifecycle

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"time"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/errdefs"
	"github.com/corral-dev/corral/internal/sandbox"
)

// idleClient asks execd for its activity; short timeouts, no proxies.
var idleClient = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}

// idlePolicy is sb's idle policy: its extensions over the server's
// default (a policy that no longer parses is the default).
func (m *Manager) idlePolicy(sb *sandbox.Sandbox) sandbox.IdlePolicy {
	p, err := sandbox.ParseIdle(sb.Extensions, m.cfg.Idle)
	if err != nil {
		return m.cfg.Idle
	}
	return p
}

// idleLoop pauses or deletes sandboxes left idle for their idle timeout.
func (m *Manager) idleLoop(ctx context.Context) {
	t := time.NewTicker(m.cfg.IdleCheck)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		m.checkIdle(ctx, time.Now())
	}
}

// checkIdle looks at every Running sandbox with an idle timeout. What the
// server saw (its start or resume, requests it forwarded) is enough to
// call most of them active; the others' execd says when it was last used
// and whether anything runs.
func (m *Manager) checkIdle(ctx context.Context, now time.Time) {
	type cand struct {
		e      *entry
		sb     *sandbox.Sandbox
		policy sandbox.IdlePolicy
		last   time.Time
	}
	var cs []cand
	m.mu.RLock()
	for _, e := range m.sandboxes {
		sb := e.sb
		if sb.Status.State != sandbox.StateRunning {
			continue
		}
		p := m.idlePolicy(sb)
		if p.Timeout <= 0 {
			continue
		}
		last := sb.Status.LastTransitionAt
		if a := e.active.Load(); a > last.UnixNano() {
			last = time.Unix(0, a)
		}
		if now.Sub(last) >= p.Timeout {
			cs = append(cs, cand{e, sb, p, last})
		}
	}
	m.mu.RUnlock()
	for _, c := range cs {
		act, err := m.execdActivity(ctx, c.sb)
		if err != nil {
			m.log.DebugContext(ctx, "ask execd for activity", "sandbox_id", c.sb.ID, "err", err)
			continue // unknown is not idle
		}
		if act.InFlight > 0 || act.Running > 0 {
			c.e.active.Store(now.UnixNano())
			continue
		}
		if act.LastActivity.After(c.last) {
			c.last = act.LastActivity
			c.e.active.Store(act.LastActivity.UnixNano())
		}
		if idle := now.Sub(c.last); idle >= c.policy.Timeout {
			m.spawn(func(ctx context.Context) { m.actOnIdle(ctx, c.sb, c.policy, idle) })
		}
	}
}

// execdActivity asks sb's execd when it was last used.
func (m *Manager) execdActivity(ctx context.Context, sb *sandbox.Sandbox) (*api.ExecdActivity, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	addr, err := m.d.Endpoint(ctx, sb.ID, api.ExecdPort)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr.String()+api.PathExecdActivity, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set(api.HeaderExecdToken, string(sb.ExecdToken))
	resp, err := idleClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("execd answered %d", resp.StatusCode)
	}
	var out api.ExecdActivity
	if err := json.NewDecoder(io.LimitReader(resp.Body, 4096)).Decode(&out); err != nil {
		return nil, err
	}
	return &out, nil
}

// actOnIdle pauses or deletes an idle sandbox, and says so.
func (m *Manager) actOnIdle(ctx context.Context, sb *sandbox.Sandbox, p sandbox.IdlePolicy, idle time.Duration) {
	m.publish(ctx, published(sb, api.EventSandboxIdle, map[string]any{"idleSeconds": int64(idle / time.Second), "action": p.Action}))
	var err error
	switch p.Action {
	case sandbox.IdleDelete:
		err = m.Delete(ctx, sb.Tenant, sb.ID)
	default:
		err = m.Pause(ctx, sb.Tenant, sb.ID)
	}
	if err != nil {
		m.log.WarnContext(ctx, "act on an idle sandbox", "sandbox_id", sb.ID, "action", p.Action, "err", err)
		return
	}
	m.log.InfoContext(ctx, "idle sandbox handled", "sandbox_id", sb.ID, "action", p.Action, "idle", idle.Round(time.Second).String())
}

// Reach resolves a sandbox port for a request the server forwards or
// hands out (the proxy, the endpoint route), counting it as activity. A
// Paused sandbox is resumed first unless it opted out (auto-resume),
// within AutoResumeTimeout; one that cannot be is a 503 saying why.
func (m *Manager) Reach(ctx context.Context, tenant, id string, port int) (netip.AddrPort, *sandbox.Sandbox, error) {
	e, err := m.lookup(ctx, tenant, id)
	if err != nil {
		return netip.AddrPort{}, nil, err
	}
	e.active.Store(time.Now().UnixNano())
	if sb := m.current(e); sb.AutoResume() && (sb.Status.State == sandbox.StatePaused || sb.Status.State == sandbox.StatePausing) {
		if err := m.autoResume(ctx, tenant, id); err != nil {
			return netip.AddrPort{}, nil, err
		}
		e.active.Store(time.Now().UnixNano())
	}
	return m.Endpoint(ctx, tenant, id, port)
}

// autoResume resumes a paused sandbox for a request that reached it.
func (m *Manager) autoResume(ctx context.Context, tenant, id string) error {
	ctx, cancel := context.WithTimeout(ctx, m.cfg.AutoResumeTimeout)
	defer cancel()
	for {
		err := m.Resume(ctx, tenant, id)
		if err == nil {
			m.log.InfoContext(ctx, "sandbox resumed by a request", "sandbox_id", id)
			return nil
		}
		e, lerr := m.lookup(ctx, tenant, id)
		if lerr != nil {
			return lerr
		}
		switch sb := m.current(e); sb.Status.State {
		case sandbox.StateRunning:
			return nil // another request resumed it
		case sandbox.StatePausing, sandbox.StateResuming:
			// In the middle of a flip: wait for it to settle.
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
				continue
			}
		}
		reason := userMessage(err)
		if ctx.Err() != nil {
			reason = fmt.Sprintf("it did not resume within %v", m.cfg.AutoResumeTimeout)
		}
		return errdefs.Wrap(errdefs.ErrUnavailable, api.CodeSandboxAutoResumeFailed,
			fmt.Sprintf("sandbox %s is paused and could not be resumed for this request: %s", id, reason), err)
	}
}

// pausedExpiry moves a resumed sandbox's expiry by the time it spent
// paused: a paused sandbox's time to live does not run down.
func pausedExpiry(paused, done *sandbox.Sandbox, now time.Time) {
	if paused.ExpiresAt.IsZero() || paused.Status.State != sandbox.StatePaused {
		return
	}
	if d := now.Sub(paused.Status.LastTransitionAt); d > 0 {
		done.ExpiresAt = paused.ExpiresAt.Add(d)
	}
}
