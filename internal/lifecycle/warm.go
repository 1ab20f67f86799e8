// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package lifecycle

import (
	"context"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/errdefs"
	"github.com/corral-dev/corral/internal/driver"
)

// warmSpec is what a template's warm pool keeps ready for creates like
// req, or why it cannot.
func (m *Manager) warmSpec(req CreateRequest) (driver.Spec, driver.PoolSizer, error) {
	ps, ok := m.d.(driver.PoolSizer)
	if !ok {
		return driver.Spec{}, nil, errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeAPINotSupported,
			"warmPool: the %s runtime keeps no warm pools for templates", m.cfg.DriverName)
	}
	if req.Image == nil {
		return driver.Spec{}, nil, errdefs.New(errdefs.ErrInvalidArgument, api.CodeTemplateInvalid, "warmPool: the template's spec must give the image")
	}
	req, err := m.admit(req)
	if err != nil {
		return driver.Spec{}, nil, err
	}
	spec, err := m.specFor(req)
	if err != nil {
		return driver.Spec{}, nil, err
	}
	if err := ps.Warmable(spec); err != nil {
		return driver.Spec{}, nil, errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeTemplateInvalid,
			"warmPool: a create from this template could not take a warm sandbox: %v", err)
	}
	return spec, ps, nil
}

// CheckWarmPool reports whether a template whose creates look like req
// can keep a warm pool on this runtime (a 400 naming why not).
func (m *Manager) CheckWarmPool(req CreateRequest) error {
	_, _, err := m.warmSpec(req)
	return err
}

// SetWarmPool keeps n sandboxes ready for the creates of the template
// whose pool is key, made like req (0: none; req is then not read).
func (m *Manager) SetWarmPool(ctx context.Context, key string, req CreateRequest, n int) {
	ps, ok := m.d.(driver.PoolSizer)
	if !ok {
		return
	}
	if n == 0 {
		ps.SetPool(key, driver.Spec{}, 0)
		return
	}
	spec, _, err := m.warmSpec(req)
	if err != nil {
		m.log.WarnContext(ctx, "a template's warm pool cannot be kept", "pool", key, "err", err)
		ps.SetPool(key, driver.Spec{}, 0)
		return
	}
	ps.SetPool(key, spec, n)
}

// WarmReady is how many sandboxes the pool key has ready.
func (m *Manager) WarmReady(key string) int {
	if ps, ok := m.d.(driver.PoolSizer); ok {
		return ps.Ready(key)
	}
	return 0
}
