// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package lifecycle

import (
	"context"
	"strings"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/errdefs"
	"github.com/corral-dev/corral/internal/driver"
	"github.com/corral-dev/corral/internal/quota"
	"github.com/corral-dev/corral/internal/sandbox"
)

// volumeUse is the bytes tenant's named volumes were made with, and their
// names.
func (m *Manager) volumeUse(ctx context.Context, tenant string) (int64, map[string]bool, error) {
	vr, ok := m.d.(driver.Volumer)
	if !ok {
		return 0, nil, nil
	}
	vols, err := vr.ListVolumes(ctx, tenant)
	if err != nil {
		return 0, nil, err
	}
	var used int64
	names := make(map[string]bool, len(vols))
	for _, v := range vols {
		used += v.SizeBytes
		names[v.Name] = true
	}
	return used, names, nil
}

// admitVolumeBytes holds room in the tenant's volume bytes for the named
// volumes req makes (those that do not exist yet), or refuses it: 429
// over the quota (whatever the policy: neither pausing nor waiting frees
// a volume's bytes), 400 for a volume of no size under a bound. The
// release is to be called once the create is done (its volumes are then
// listed, or were not made).
func (m *Manager) admitVolumeBytes(ctx context.Context, req CreateRequest) (func(), error) {
	none := func() {}
	limit := m.Limits(req.Tenant).VolumeBytes
	var fresh []sandbox.Volume
	for _, v := range req.Volumes {
		if v.Kind == sandbox.VolumeNamed && v.Create {
			fresh = append(fresh, v)
		}
	}
	if limit == 0 || len(fresh) == 0 {
		return none, nil
	}
	m.volMu.Lock()
	defer m.volMu.Unlock()
	used, names, err := m.volumeUse(ctx, req.Tenant)
	if err != nil {
		return nil, err
	}
	key := func(name string) string { return sandbox.TenantKey(req.Tenant) + "/" + name }
	// Volumes other creates are making count until they are listed.
	for k, n := range m.volHeld {
		if t, name, _ := strings.Cut(k, "/"); t == sandbox.TenantKey(req.Tenant) && !names[name] {
			used += n
		}
	}
	var need int64
	var mine []string
	for _, v := range fresh {
		if names[v.Claim] {
			continue
		}
		if _, held := m.volHeld[key(v.Claim)]; held {
			continue // another create is making it: counted above
		}
		if v.SizeBytes == 0 {
			return nil, errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeInvalidParameter,
				"volume %q: pvc.storage is required: tenant %s's quota bounds the bytes of its named volumes", v.Name, req.Tenant)
		}
		need += v.SizeBytes
		mine = append(mine, key(v.Claim))
		m.volHeld[key(v.Claim)] = v.SizeBytes
	}
	if need > 0 && used+need > limit {
		for _, k := range mine {
			delete(m.volHeld, k)
		}
		return nil, m.refuse(ctx, req.Tenant, &quota.Exceeded{Limit: "volumeBytes", Max: limit, Used: used, Asked: need}, "create", false)
	}
	return func() {
		m.volMu.Lock()
		for _, k := range mine {
			delete(m.volHeld, k)
		}
		m.volMu.Unlock()
	}, nil
}
