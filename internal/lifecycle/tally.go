// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package lifecycle

import (
	"github.com/corral-dev/corral/internal/quota"
	"github.com/corral-dev/corral/internal/sandbox"
)

// tally is what the table's records hold, per tenant and in all, kept up
// to date as records come, change and go (under Manager.mu): admission
// reads it instead of looking at every sandbox, so its work per create
// does not grow with their number.
type tally struct {
	byTenant map[string]quota.Usage
	// holding is how many records, all tenants together, hold room.
	holding int64
}

// add counts sb's record in (sign 1) or out (sign -1).
func (t *tally) add(sb *sandbox.Sandbox, sign int64) {
	if sb == nil {
		return
	}
	var u quota.Usage
	if quota.Holds(sb.Status.State) {
		t.holding += sign
		u.Running, u.CPUMillis, u.MemoryBytes = sign, sign*sb.Resources.CPUMillis, sign*sb.Resources.MemoryBytes
	}
	if quota.Counts(sb.Status.State) {
		u.Sandboxes = sign
	}
	if u == (quota.Usage{}) {
		return
	}
	if t.byTenant == nil {
		t.byTenant = map[string]quota.Usage{}
	}
	sum := t.byTenant[sb.Tenant].Add(u)
	if sum == (quota.Usage{}) {
		delete(t.byTenant, sb.Tenant)
	} else {
		t.byTenant[sb.Tenant] = sum
	}
}

// The table's writes, m.mu held: every change of m.sandboxes or of an
// entry's record in it goes through these, so the tally follows.

// tablePut makes e the entry of sandbox id.
func (m *Manager) tablePut(id string, e *entry) {
	if old, ok := m.sandboxes[id]; ok {
		m.tally.add(old.sb, -1)
	}
	m.sandboxes[id] = e
	m.tally.add(e.sb, 1)
}

// tableDelete removes sandbox id's entry.
func (m *Manager) tableDelete(id string) {
	if old, ok := m.sandboxes[id]; ok {
		m.tally.add(old.sb, -1)
		delete(m.sandboxes, id)
	}
}

// setRecord makes sb e's record.
func (m *Manager) setRecord(e *entry, sb *sandbox.Sandbox) {
	if cur, ok := m.sandboxes[sb.ID]; ok && cur == e {
		m.tally.add(e.sb, -1)
		m.tally.add(sb, 1)
	}
	e.sb = sb
}
