// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package lifecycle

import (
	"fmt"
	"hash/maphash"
	"slices"
	"strings"
	"sync"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/errdefs"
	"github.com/corral-dev/corral/internal/driver"
)

// checkIsolation resolves the tiers sandboxes may ask for
// (Config.Isolation) against what the driver can run: a tier the
// operator allows must run here, or the server does not start. A driver
// that is no driver.Tierer, or reports no tiers, has none to choose.
func checkIsolation(cfg *Config) error {
	var available []string
	var why map[string]string
	if t, ok := cfg.Driver.(driver.Tierer); ok {
		available, why = t.Tiers()
	}
	if len(available) == 0 {
		if len(cfg.Isolation) > 0 && !slices.Equal(cfg.Isolation, []string{api.IsolationRunc}) {
			return fmt.Errorf("--isolation %s: the %s runtime runs every sandbox in one isolation tier (docs/isolation.md)", strings.Join(cfg.Isolation, ","), cfg.DriverName)
		}
		cfg.Isolation = nil
		return nil
	}
	if len(cfg.Isolation) == 0 {
		cfg.Isolation = []string{api.IsolationRunc}
	}
	for i, tier := range cfg.Isolation {
		if slices.Contains(cfg.Isolation[:i], tier) {
			return fmt.Errorf("--isolation: %s is named twice", tier)
		}
		if slices.Contains(available, tier) {
			continue
		}
		if reason, known := why[tier]; known {
			return fmt.Errorf("--isolation: the %s runtime cannot run %s sandboxes here: %s", cfg.DriverName, tier, reason)
		}
		return fmt.Errorf("--isolation: unknown tier %q (the %s runtime has %s)", tier, cfg.DriverName, strings.Join(available, ", "))
	}
	return nil
}

// tierFor is the tier a create with these extensions runs in: the one
// extensions[corral.dev/isolation] names, which the server must allow,
// else the server's default. "" on a runtime without tiers.
func (m *Manager) tierFor(ext map[string]string) (string, error) {
	v, asked := ext[api.ExtensionIsolation]
	if len(m.cfg.Isolation) == 0 {
		if asked {
			return "", errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeIsolationNotAllowed,
				"extensions[%s] %q: the %s runtime runs every sandbox in one isolation tier; leave the extension out", api.ExtensionIsolation, v, m.cfg.DriverName)
		}
		return "", nil
	}
	if !asked {
		return m.cfg.Isolation[0], nil
	}
	if !slices.Contains(m.cfg.Isolation, v) {
		return "", errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeIsolationNotAllowed,
			"extensions[%s] %q: this server allows %s (the first is the default)", api.ExtensionIsolation, v, strings.Join(m.cfg.Isolation, ", "))
	}
	return v, nil
}

// IsolationTiers are the tiers creates may ask for, the default first;
// none on a runtime without tiers.
func (m *Manager) IsolationTiers() []string { return slices.Clone(m.cfg.Isolation) }

// isolationMemo remembers the tier each sandbox handle decodes to: every
// GET of a sandbox reports its tier, and decoding the handle's JSON for it
// was a third of the handler's CPU. A handle's bytes decide its tier, so
// the memo is keyed by a seeded 64-bit hash of them (a collision between
// two handles is a 2⁻⁶⁴ chance); it is emptied when it outgrows memoLimit,
// as the handles of sandboxes long gone would otherwise pile up in it.
type isolationMemo struct {
	once sync.Once
	seed maphash.Seed
	mu   sync.RWMutex
	m    map[uint64]string
}

const memoLimit = 1 << 16

func (c *isolationMemo) get(handle []byte, decode func() string) string {
	c.once.Do(func() { c.seed, c.m = maphash.MakeSeed(), map[uint64]string{} })
	k := maphash.Bytes(c.seed, handle)
	c.mu.RLock()
	v, ok := c.m[k]
	c.mu.RUnlock()
	if ok {
		return v
	}
	v = decode()
	c.mu.Lock()
	if len(c.m) >= memoLimit {
		clear(c.m)
	}
	c.m[k] = v
	c.mu.Unlock()
	return v
}
