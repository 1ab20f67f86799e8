// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package lifecycle

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/internal/quota"
)

// SharedAdmission keeps the admission claims of the servers sharing
// records (internal/kube/records implements it), so that two of them
// cannot both let in the last of a tenant's room.
type SharedAdmission interface {
	// Claim adds c to tenant's claims if admit passes, given the tenant's
	// other claims still kept; the claims of two servers are checked one
	// after the other. It returns admit's error, or the store's.
	Claim(ctx context.Context, tenant string, c quota.Claim, admit func(others []quota.Claim) error) error
	// Rebind renames a claim: its create took a sandbox of another ID.
	Rebind(ctx context.Context, tenant, from, to string) error
	// Unclaim drops a claim whose request failed before a record held
	// the room.
	Unclaim(ctx context.Context, tenant, id string) error
}

// errRefused is a shared claim's refusal by admit.
var errRefused = errors.New("refused")

// claimShared claims need for sandbox id of tenant among every server's
// claims, under the tenant's policy, after this server let it in
// (local): with shared records, another server may have let in the
// same room at the same moment. It returns the release to call once a
// record holds the room (or the request failed).
func (m *Manager) claimShared(ctx context.Context, tenant, id, base string, need quota.Usage, what string, local func() (func(), error)) (func(), error) {
	lim := m.Limits(tenant)
	deadline := time.Now().Add(lim.QueueTimeout)
	queued := false
	for paused := 0; ; {
		release, err := local()
		if err != nil {
			return nil, err
		}
		var x *quota.Exceeded
		c := quota.Claim{ID: id, Base: base, Need: need, At: time.Now().UTC()}
		err = m.adm.Claim(ctx, tenant, c, func(others []quota.Claim) error {
			if x = m.sharedExceeded(tenant, need, others); x != nil {
				return errRefused
			}
			return nil
		})
		if err == nil {
			return func() {
				release()
				if base == "" && m.liveEntry(id) == nil {
					// No record took the room: it is free again.
					if err := m.adm.Unclaim(context.WithoutCancel(ctx), tenant, id); err != nil {
						m.log.WarnContext(ctx, "drop an admission claim", "sandbox_id", id, "err", err)
					}
				}
			}, nil
		}
		release()
		if !errors.Is(err, errRefused) {
			return nil, err
		}
		switch {
		case lim.Policy == quota.PolicyQueue && lim.QueueTimeout > 0 && time.Now().Before(deadline):
			if !queued {
				queued = true
				m.publish(ctx, quotaEvent(tenant, api.EventQuotaQueued, x, what))
			}
			// Another server holds the room: its release wakes no one here.
			t := time.NewTimer(min(time.Until(deadline), 200*time.Millisecond+time.Duration(rand.Int64N(int64(300*time.Millisecond)))))
			select {
			case <-ctx.Done():
				t.Stop()
				return nil, ctx.Err()
			case <-m.stopping:
				t.Stop()
				return nil, interrupted()
			case <-t.C:
			}
		case lim.Policy == quota.PolicyPauseOldest && x.Pausable && paused < 100:
			victim := m.oldestRunning(tenant)
			if victim == "" || m.Pause(ctx, tenant, victim) != nil {
				return nil, m.refuse(ctx, tenant, x, what, false)
			}
			paused++
		default:
			return nil, m.refuse(ctx, tenant, x, what, queued)
		}
	}
}

// sharedExceeded returns what need would pass for tenant given its
// records (as this server sees them) and the other servers' claims, or
// nil. A claim counts until this server sees the record that holds its
// room (a create's, or a resumed record past the revision it was made
// on), or that record's deletion.
func (m *Manager) sharedExceeded(tenant string, need quota.Usage, others []quota.Claim) *quota.Exceeded {
	u, _ := m.recordUsage(tenant)
	cutoff := time.Now().Add(-time.Minute)
	m.mu.RLock()
	for _, c := range others {
		if c.Need.Creates > 0 && c.At.After(cutoff) {
			u.Creates += c.Need.Creates
		}
		e := m.sandboxes[c.ID]
		if (e == nil && m.gone[c.ID].IsZero()) || (e != nil && c.Base != "" && e.sb.Version == c.Base) {
			n := c.Need
			n.Creates = 0
			u = u.Add(n)
		}
	}
	m.mu.RUnlock()
	m.qmu.Lock()
	defer m.qmu.Unlock()
	return m.limitsOf(tenant).Check(u, need)
}
