// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package oci

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/corral-dev/corral/internal/driver"
	"github.com/corral-dev/corral/internal/driver/warmpool"
	"github.com/corral-dev/corral/internal/imagestore"
	"github.com/corral-dev/corral/internal/initproc"
	"github.com/corral-dev/corral/internal/safefile"
	"github.com/corral-dev/corral/internal/sandbox"
)

// A warm pool keeps sandboxes of chosen images started ahead of time:
// root filesystem mounted, namespaces made, runc run, execd answering,
// and PID 1 waiting for an entrypoint. Claiming one personalises it in
// well under a millisecond of work: its access token and environment are
// files execd re-reads, its limits are cgroup writes, its entrypoint goes
// down a FIFO to PID 1, and its records are rewritten. A warm sandbox has
// no tenant and runs no user code until it is claimed.

// LabelPool marks the backend objects of a warm, unclaimed sandbox.
const LabelPool = warmpool.Label

// PoolImage asks for Size warm sandboxes of Image.
type PoolImage struct {
	Image string
	Size  int
}

// ParsePool reads "IMAGE=N,IMAGE=N" (the --warm-pool flag).
func ParsePool(s string) ([]PoolImage, error) {
	var out []PoolImage
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		i := strings.LastIndex(part, "=")
		if i <= 0 {
			return nil, fmt.Errorf("warm pool %q: want IMAGE=COUNT", part)
		}
		n, err := strconv.Atoi(part[i+1:])
		if err != nil || n < 0 || n > 256 {
			return nil, fmt.Errorf("warm pool %q: the count must be 0 to 256", part)
		}
		out = append(out, PoolImage{Image: part[:i], Size: n})
	}
	return out, nil
}

// startPool destroys warm sandboxes an earlier process left and starts
// keeping the pools full (--warm-pool's, then templates' as they are set).
func (d *Driver) startPool() {
	d.removeStaleWarm()
	images := map[string]int{}
	for _, w := range d.cfg.Pool {
		images[w.Image] = w.Size
	}
	d.pool = warmpool.Start(d, d.log, images)
}

// removeStaleWarm destroys warm sandboxes no process owns any more.
func (d *Driver) removeStaleWarm() {
	entries, _ := os.ReadDir(filepath.Join(runDir(d.cfg.Root), "bundles"))
	for _, e := range entries {
		if _, err := os.Stat(filepath.Join(d.bundleDir(e.Name()), "pool")); err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			if err := d.Destroy(ctx, e.Name()); err != nil {
				d.log.Warn("remove a stale warm sandbox", "sandbox_id", e.Name(), "err", err)
			}
			cancel()
		}
	}
}

// SetPool implements driver.PoolSizer.
func (d *Driver) SetPool(key string, spec driver.Spec, n int) { d.pool.Set(key, spec, n) }

// Ready implements driver.PoolSizer.
func (d *Driver) Ready(key string) int { return d.pool.Ready(key) }

// MakeWarm starts one warm sandbox of from's image and platform
// (warmpool.Maker).
func (d *Driver) MakeWarm(ctx context.Context, from driver.Spec) (string, error) {
	var tok [32]byte
	_, _ = rand.Read(tok[:])
	spec := driver.Spec{ID: sandbox.NewID(), Image: from.Image, Platform: from.Platform, Labels: map[string]string{LabelPool: "true"},
		ExecdToken: hex.EncodeToString(tok[:])}
	if _, err := d.create(ctx, spec, waitForClaim); err != nil {
		return "", err
	}
	return spec.ID, nil
}

// Warmable implements driver.PoolSizer: why a create of spec cannot take
// a warm sandbox, or nil.
func (d *Driver) Warmable(spec driver.Spec) error {
	if spec.Platform.OS != "" && spec.Platform.OS+"/"+spec.Platform.Arch != imagestore.HostPlatform() {
		return errors.New("warm sandboxes are of this machine's platform")
	}
	return warmpool.Warmable(spec)
}

// Claim implements driver.Pooler.
func (d *Driver) Claim(spec driver.Spec) (string, bool) {
	if len(spec.Entrypoint) == 0 || d.Warmable(spec) != nil {
		return "", false
	}
	return d.pool.Claim(spec.Pool, spec.Image.URI)
}

// personalise turns a claimed warm sandbox into spec.
func (d *Driver) personalise(ctx context.Context, spec driver.Spec) (*driver.Handle, error) {
	sb := d.running(spec.ID)
	if sb == nil {
		return nil, errors.New("the warm sandbox is gone")
	}
	status, err := os.OpenRoot(filepath.Join(sb.bundle, "status"))
	if err != nil {
		return nil, err
	}
	defer status.Close()
	env, err := warmpool.Hand(status, spec.ExecdToken, spec.Env)
	if err != nil {
		return nil, err
	}
	if err := setLimits(spec.ID, spec.Resources); err != nil {
		return nil, fmt.Errorf("limits: %w", err)
	}
	old, err := readMeta(sb.bundle)
	if err != nil {
		return nil, err
	}
	meta, _ := json.Marshal(bundleMeta{ID: spec.ID, Tenant: spec.Tenant, Labels: driver.BackendLabels(spec), Created: time.Now().UTC(),
		Layers: old.Layers, Base: old.Base, IDRange: old.IDRange})
	// Atomic: a List running now reads the warm meta or the claimed one,
	// never half of either.
	if err := safefile.WriteFileAtomic(sb.bundle, "meta.json", meta, 0o600); err != nil {
		return nil, err
	}
	if err := initproc.SendStart(ctx, status, "start", initproc.Start{Args: spec.Entrypoint, Env: env}); err != nil {
		return nil, fmt.Errorf("start the entrypoint: %w", err)
	}
	if err := os.Remove(filepath.Join(sb.bundle, "pool")); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	state, _ := json.Marshal(handleState{Bundle: sb.bundle, Pid: sb.pid, StartTime: sb.startTime, UserNS: old.IDRange > 0})
	return &driver.Handle{ID: spec.ID, Driver: Name, Version: 1, State: state}, nil
}

// setLimits applies a sandbox's limits to its cgroups (v1 or v2).
func setLimits(id string, r driver.Resources) error {
	pids := r.Pids
	if pids <= 0 {
		pids = DefaultPids
	}
	return warmpool.CgroupLimits(func(ctrl string) string { return filepath.Join("/sys/fs/cgroup", ctrl, cgroupsPath(id)) }, r, pids)
}

var _ driver.PoolSizer = (*Driver)(nil)
