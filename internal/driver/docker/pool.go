// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package docker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/corral-dev/corral/internal/driver"
	"github.com/corral-dev/corral/internal/driver/warmpool"
	"github.com/corral-dev/corral/internal/initproc"
	"github.com/corral-dev/corral/internal/insandbox"
	"github.com/corral-dev/corral/internal/sandbox"
	"github.com/corral-dev/corral/internal/verifier"
)

// Warm containers (a template's warm pool, on a local engine): started
// ahead of time with corral init waiting on a FIFO for its entrypoint,
// and execd reading its token and its commands' environment from files;
// the FIFO and the files are in a host directory bound read-only into the
// container. A claim writes the token and the environment (by rename),
// sets the limits (in the container's cgroups; the engine is told
// later), records what the engine's
// labels cannot say any more (they are fixed at create: the tenant and
// metadata, the environment) in a file beside it, and sends the
// entrypoint. Until then a warm container has no tenant, runs no user
// code, and is not listed.

// warmDir holds a warm container's gate (bound into it) and, once
// claimed, its claim (not bound).
func (d *Driver) warmDir(id string) string { return filepath.Join(d.cfg.StateDir, "warm", id) }

// claimRecord is what a claim changed that the container's labels and
// configuration do not show.
type claimRecord struct {
	Tenant string            `json:"tenant"`
	Labels map[string]string `json:"labels"`
	Env    []string          `json:"env,omitempty"`
}

// claimOf reads a claimed warm container's claim; ok is false for a
// container that is not one.
func (d *Driver) claimOf(id string, labels map[string]string) (c claimRecord, warm, ok bool) {
	if labels[warmpool.Label] != "true" || d.cfg.StateDir == "" {
		return c, false, false
	}
	b, err := os.ReadFile(filepath.Join(d.warmDir(id), "claim.json"))
	if err != nil || json.Unmarshal(b, &c) != nil {
		return c, true, false
	}
	return c, true, true
}

// Warmable implements driver.PoolSizer: why a create of spec cannot take
// a warm container, or nil.
func (d *Driver) Warmable(spec driver.Spec) error {
	switch {
	case d.cfg.Remote:
		return errors.New("warm containers need a local engine (their gate is a host directory)")
	case d.cfg.StateDir == "":
		return errors.New("warm containers need the driver's state directory")
	}
	return warmpool.Warmable(spec)
}

// Claim implements driver.Pooler.
func (d *Driver) Claim(spec driver.Spec) (string, bool) {
	if d.pool == nil || len(spec.Entrypoint) == 0 || d.Warmable(spec) != nil {
		return "", false
	}
	return d.pool.Claim(spec.Pool, spec.Image.URI)
}

// SetPool implements driver.PoolSizer.
func (d *Driver) SetPool(key string, spec driver.Spec, n int) {
	if d.pool != nil {
		d.pool.Set(key, spec, n)
	}
}

// Ready implements driver.PoolSizer.
func (d *Driver) Ready(key string) int {
	if d.pool == nil {
		return 0
	}
	return d.pool.Ready(key)
}

// MakeWarm starts one warm container of from's image and platform
// (warmpool.Maker).
func (d *Driver) MakeWarm(ctx context.Context, from driver.Spec) (string, error) {
	var tok [32]byte
	_, _ = rand.Read(tok[:])
	spec := driver.Spec{ID: sandbox.NewID(), Image: from.Image, Platform: from.Platform, Labels: map[string]string{warmpool.Label: "true"},
		Entrypoint: []string{"true"}, ExecdToken: hex.EncodeToString(tok[:])}
	h, err := d.create(ctx, spec, true)
	if err != nil {
		return "", err
	}
	// What the claim needs, found now: the container and its PID 1, and
	// execd's forwarder (a claimed sandbox's first use is its endpoint).
	var st state
	_ = json.Unmarshal(h.State, &st)
	if c, err := d.inspect(ctx, spec.ID); err == nil && c.State.Running {
		d.mu.Lock()
		d.warm[spec.ID] = warmContainer{id: st.ContainerID, pid: c.State.Pid}
		d.mu.Unlock()
	}
	if _, err := d.Endpoint(ctx, spec.ID, insandbox.ExecdPort); err != nil {
		_ = d.Destroy(context.WithoutCancel(ctx), spec.ID)
		return "", err
	}
	return spec.ID, nil
}

// warmContainer is what MakeWarm found of a warm container.
type warmContainer struct {
	id  string
	pid int
}

// warmOf is the container and PID 1 of claimed warm sandbox id: what
// MakeWarm found, if its PID 1's cgroup still names the container (so a
// PID reused since is not taken for it), else the engine's answer.
func (d *Driver) warmOf(ctx context.Context, id string) (warmContainer, error) {
	d.mu.Lock()
	w, ok := d.warm[id]
	delete(d.warm, id)
	d.mu.Unlock()
	if ok {
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", w.pid)); err == nil && strings.Contains(string(b), w.id) {
			return w, nil
		}
	}
	c, err := d.inspect(ctx, id)
	if err != nil {
		return w, err
	}
	if !c.State.Running {
		return w, errors.New("the warm container is not running")
	}
	return warmContainer{id: c.ID, pid: c.State.Pid}, nil
}

// prepareWarm makes a warm container's gate: the FIFO, the token's
// verifier, an empty environment; bound read-only into host.
func (d *Driver) prepareWarm(spec driver.Spec, host *container.HostConfig) error {
	gate := filepath.Join(d.warmDir(spec.ID), "gate")
	if err := os.MkdirAll(gate, 0o700); err != nil {
		return err
	}
	if err := syscall.Mkfifo(filepath.Join(gate, "start"), 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(gate, "token"), []byte(verifier.Of(spec.ExecdToken)+"\n"), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(gate, "env"), nil, 0o644); err != nil {
		return err
	}
	host.Binds = append(host.Binds, gate+":"+gateInSandbox+":ro")
	return nil
}

// personalise turns a claimed warm container into spec.
func (d *Driver) personalise(ctx context.Context, spec driver.Spec) (*driver.Handle, error) {
	c, err := d.warmOf(ctx, spec.ID)
	if err != nil {
		return nil, err
	}
	gate, err := os.OpenRoot(filepath.Join(d.warmDir(spec.ID), "gate"))
	if err != nil {
		return nil, err
	}
	defer gate.Close()
	env, err := warmpool.Hand(gate, spec.ExecdToken, spec.Env)
	if err != nil {
		return nil, err
	}
	pids := spec.Resources.Pids
	if pids <= 0 {
		pids = DefaultPids
	}
	res := container.Resources{NanoCPUs: spec.Resources.CPUMillis * 1_000_000, Memory: spec.Resources.MemoryBytes, PidsLimit: &pids}
	if spec.Resources.MemoryBytes > 0 {
		res.MemorySwap = spec.Resources.MemoryBytes
	}
	if err := d.setLimits(ctx, c.id, c.pid, spec.Resources, pids, res); err != nil {
		return nil, err
	}
	claim, _ := json.Marshal(claimRecord{Tenant: spec.Tenant, Labels: d.labels(spec), Env: env})
	if err := os.WriteFile(filepath.Join(d.warmDir(spec.ID), "claim.json"), claim, 0o600); err != nil {
		return nil, err
	}
	if err := initproc.SendStart(ctx, gate, "start", initproc.Start{Args: spec.Entrypoint, Env: env}); err != nil {
		return nil, fmt.Errorf("start the entrypoint: %w", err)
	}
	st, _ := json.Marshal(state{ContainerID: c.id, Isolation: spec.Isolation})
	return &driver.Handle{ID: spec.ID, Driver: Name, Version: stateVersion, State: st}, nil
}

// engineUpdateDelay is how long after a claim the engine is told its
// limits.
const engineUpdateDelay = 2 * time.Second

// setLimits sets a claimed container's limits: written into its cgroups
// at once, then told to the engine in the background so that what it
// reports agrees (its update takes tens of milliseconds); through the
// engine if the cgroups cannot be written.
func (d *Driver) setLimits(ctx context.Context, containerID string, pid int, r driver.Resources, pids int64, res container.Resources) error {
	update := func(ctx context.Context) error {
		cctx, cancel := d.call(ctx)
		defer cancel()
		if _, err := d.cli.ContainerUpdate(cctx, containerID, client.ContainerUpdateOptions{Resources: &res}); err != nil {
			return d.engineErr("set the limits of container "+containerID, err)
		}
		return nil
	}
	if pid > 0 {
		dirs, err := warmpool.ProcessCgroups(pid)
		if err == nil {
			err = warmpool.CgroupLimits(dirs, r, pids)
		}
		if err == nil {
			d.bg.Go(func() {
				// Later, so that the engine's work (tens of milliseconds of
				// its CPU) does not slow the sandbox's first commands.
				t := time.NewTimer(engineUpdateDelay)
				select {
				case <-t.C:
				case <-d.closing:
					t.Stop()
				}
				bctx := context.WithoutCancel(ctx)
				if err := update(bctx); err != nil {
					d.cfg.Logger.WarnContext(bctx, "the engine was not told a claimed container's limits (its cgroups have them)", "container", containerID, "err", err)
				}
			})
			return nil
		}
		d.cfg.Logger.WarnContext(ctx, "a claimed container's cgroups could not be written; asking the engine", "container", containerID, "err", err)
	}
	return update(ctx)
}

// removeStaleWarm destroys the warm containers no claim holds (an earlier
// process's pool).
func (d *Driver) removeStaleWarm(ctx context.Context) {
	ls, err := d.listAll(ctx)
	if err != nil {
		return
	}
	for _, c := range ls {
		if _, warm, claimed := d.claimOf(c.id, c.labels); warm && !claimed {
			if err := d.Destroy(ctx, c.id); err != nil {
				d.cfg.Logger.WarnContext(ctx, "remove a stale warm container", "sandbox_id", c.id, "err", err)
			}
		}
	}
}

var _ driver.PoolSizer = (*Driver)(nil)
