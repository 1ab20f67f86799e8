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
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/internal/driver"
	"github.com/corral-dev/corral/internal/imagestore"
	"github.com/corral-dev/corral/internal/initproc"
	"github.com/corral-dev/corral/internal/verifier"
)

// A warm pool keeps sandboxes of chosen images started ahead of time:
// root filesystem mounted, namespaces made, runc run, execd answering,
// and PID 1 waiting for an entrypoint. Claiming one personalises it in
// well under a millisecond of work: its access token and environment are
// files execd re-reads, its limits are cgroup writes, its entrypoint goes
// down a FIFO to PID 1, and its records are rewritten. A warm sandbox has
// no tenant and runs no user code until it is claimed.

// LabelPool marks the backend objects of a warm, unclaimed sandbox.
const LabelPool = "corral.dev/pool"

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

// claimTTL is how long a claim may wait for its Create before the warm
// sandbox is destroyed.
const claimTTL = 2 * time.Minute

// poolWant is one pool: what its warm sandboxes are made from, and how
// many.
type poolWant struct {
	spec driver.Spec
	size int
}

type pool struct {
	mu sync.Mutex
	// want is each pool by key: an image's (--warm-pool) under the
	// image's reference, a template's under its key.
	want    map[string]poolWant
	ready   map[string][]string  // key → warm sandbox IDs
	claimed map[string]time.Time // ID → when it was claimed
	wake    chan struct{}
	cancel  context.CancelFunc
	done    chan struct{}
}

// startPool destroys warm sandboxes an earlier process left and starts
// keeping the pool full.
func (d *Driver) startPool() {
	d.removeStaleWarm()
	ctx, cancel := context.WithCancel(context.Background())
	want := map[string]poolWant{}
	for _, w := range d.cfg.Pool {
		want[w.Image] = poolWant{spec: driver.Spec{Image: driver.Image{URI: w.Image}}, size: w.Size}
	}
	d.pool = &pool{want: want, ready: map[string][]string{}, claimed: map[string]time.Time{},
		wake: make(chan struct{}, 1), cancel: cancel, done: make(chan struct{})}
	go d.fillPool(ctx)
}

// SetPool implements driver.PoolSizer: a template's pool is kept at n
// warm sandboxes of spec's image and platform; 0 drops it, and its warm
// sandboxes are destroyed.
func (d *Driver) SetPool(key string, spec driver.Spec, n int) {
	p := d.pool
	p.mu.Lock()
	var drop []string
	old, had := p.want[key]
	if had && (old.spec.Image.URI != spec.Image.URI || old.spec.Platform != spec.Platform || n == 0) {
		drop = p.ready[key]
		delete(p.ready, key)
	}
	if n == 0 {
		delete(p.want, key)
	} else {
		p.want[key] = poolWant{spec: driver.Spec{Image: spec.Image, Platform: spec.Platform}, size: n}
	}
	if extra := len(p.ready[key]) - n; n > 0 && extra > 0 {
		drop = append(drop, p.ready[key][n:]...)
		p.ready[key] = p.ready[key][:n]
	}
	p.mu.Unlock()
	p.poke()
	for _, id := range drop {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		if err := d.Destroy(ctx, id); err != nil {
			d.log.Warn("warm pool: remove a warm sandbox no longer wanted", "sandbox_id", id, "err", err)
		}
		cancel()
	}
}

// Ready implements driver.PoolSizer.
func (d *Driver) Ready(key string) int {
	d.pool.mu.Lock()
	defer d.pool.mu.Unlock()
	return len(d.pool.ready[key])
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

// stopPool stops filling and destroys every warm sandbox not handed over.
func (d *Driver) stopPool() {
	p := d.pool
	p.cancel()
	<-p.done
	p.mu.Lock()
	var ids []string
	for _, l := range p.ready {
		ids = append(ids, l...)
	}
	for id := range p.claimed {
		ids = append(ids, id)
	}
	p.ready, p.claimed = map[string][]string{}, map[string]time.Time{}
	p.mu.Unlock()
	for _, id := range ids {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		_ = d.Destroy(ctx, id)
		cancel()
	}
}

func (p *pool) poke() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// fillPool keeps each image's warm sandboxes at the asked number, one
// create at a time so the pool never competes hard with real creates.
func (d *Driver) fillPool(ctx context.Context) {
	defer close(d.pool.done)
	p := d.pool
	backoff := time.Second
	tick := time.NewTicker(30 * time.Second)
	defer tick.Stop()
	for {
		d.expireClaims(ctx)
		failed := false
		p.mu.Lock()
		keys := slices.Sorted(maps.Keys(p.want))
		p.mu.Unlock()
		for _, key := range keys {
			for ctx.Err() == nil {
				p.mu.Lock()
				w, ok := p.want[key]
				n := len(p.ready[key])
				p.mu.Unlock()
				if !ok || n >= w.size {
					break
				}
				id, err := d.createWarm(ctx, w.spec)
				if err != nil {
					if ctx.Err() == nil {
						d.log.WarnContext(ctx, "warm pool: create failed", "pool", key, "image", w.spec.Image.URI, "err", err)
					}
					failed = true
					break
				}
				p.mu.Lock()
				if cur, ok := p.want[key]; ok && cur.spec.Image == w.spec.Image && cur.spec.Platform == w.spec.Platform {
					p.ready[key] = append(p.ready[key], id)
					id = ""
				}
				p.mu.Unlock()
				if id != "" {
					// The pool changed while this one started.
					_ = d.Destroy(ctx, id)
				}
			}
		}
		var retry <-chan time.Time
		if failed {
			retry = time.After(backoff)
			backoff = min(backoff*2, time.Minute)
		} else {
			backoff = time.Second
		}
		select {
		case <-ctx.Done():
			return
		case <-p.wake:
		case <-tick.C:
		case <-retry:
		}
	}
}

// expireClaims destroys warm sandboxes claimed long ago but never created.
func (d *Driver) expireClaims(ctx context.Context) {
	p := d.pool
	p.mu.Lock()
	var old []string
	for id, at := range p.claimed {
		if time.Since(at) > claimTTL {
			old = append(old, id)
			delete(p.claimed, id)
		}
	}
	p.mu.Unlock()
	for _, id := range old {
		_ = d.Destroy(ctx, id)
	}
}

func newWarmID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40 // a version 4 UUID, like every other sandbox ID
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// createWarm starts one warm sandbox of from's image and platform.
func (d *Driver) createWarm(ctx context.Context, from driver.Spec) (string, error) {
	var tok [32]byte
	_, _ = rand.Read(tok[:])
	spec := driver.Spec{ID: newWarmID(), Image: from.Image, Platform: from.Platform, Labels: map[string]string{LabelPool: "true"},
		ExecdToken: hex.EncodeToString(tok[:])}
	if _, err := d.create(ctx, spec, waitForClaim); err != nil {
		return "", err
	}
	return spec.ID, nil
}

// Warmable implements driver.PoolSizer: why a create of spec cannot take
// a warm sandbox, or nil.
func (d *Driver) Warmable(spec driver.Spec) error {
	switch {
	case spec.Snapshot != nil:
		return errors.New("a restore starts from its snapshot")
	case len(spec.Volumes) > 0:
		return errors.New("volumes are mounted when a sandbox is made")
	case spec.Policed():
		return errors.New("a network policy's enforcer is started with the sandbox")
	case spec.SecretsDir != "":
		return errors.New("the secrets and events socket is mounted when a sandbox is made")
	case spec.Resources.DiskBytes > 0:
		// A disk limit is a file system made at create.
		return errors.New("a disk limit is a file system made with the sandbox")
	case spec.Isolation == api.IsolationRunsc:
		return errors.New("warm sandboxes are runc's")
	case spec.Platform.OS != "" && spec.Platform.OS+"/"+spec.Platform.Arch != imagestore.HostPlatform():
		return errors.New("warm sandboxes are of this machine's platform")
	}
	for k, v := range spec.Env {
		// The environment travels as KEY=VALUE lines.
		if strings.ContainsAny(k, "=\n\x00") || strings.ContainsAny(v, "\n\x00") {
			return fmt.Errorf("environment variable %q holds a newline or NUL", k)
		}
	}
	return nil
}

// Claim implements driver.Pooler.
func (d *Driver) Claim(spec driver.Spec) (string, bool) {
	p := d.pool
	if len(spec.Entrypoint) == 0 || d.Warmable(spec) != nil {
		return "", false
	}
	key := spec.Pool
	if key == "" {
		key = spec.Image.URI
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	// A template's pool serves only its creates, and only with its image
	// (a create may override the image).
	ids := p.ready[key]
	if len(ids) == 0 || p.want[key].spec.Image.URI != spec.Image.URI {
		return "", false
	}
	id := ids[0]
	p.ready[key] = ids[1:]
	p.claimed[id] = time.Now()
	p.poke()
	return id, true
}

// takeClaim reports whether id was claimed, forgetting the claim.
func (d *Driver) takeClaim(id string) bool {
	p := d.pool
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.claimed[id]
	delete(p.claimed, id)
	return ok
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
	// The access token first: from here on the pool's token opens nothing.
	if err := replaceFile(status, "token", []byte(verifier.Of(spec.ExecdToken)+"\n")); err != nil {
		return nil, fmt.Errorf("token: %w", err)
	}
	var env []string
	for k, v := range spec.Env {
		env = append(env, k+"="+v)
	}
	if err := replaceFile(status, "env", []byte(strings.Join(env, "\n")+"\n")); err != nil {
		return nil, fmt.Errorf("environment: %w", err)
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
	if err := os.WriteFile(filepath.Join(sb.bundle, "meta.json"), meta, 0o600); err != nil {
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

// replaceFile writes name inside root by rename, so a reader sees the old
// or the new content, and nothing the sandbox planted is followed.
func replaceFile(root *os.Root, name string, data []byte) error {
	tmp := "." + name + ".new"
	_ = root.Remove(tmp)
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return root.Rename(tmp, name)
}

// setLimits applies a sandbox's limits to its cgroups (v1 or v2).
func setLimits(id string, r driver.Resources) error {
	pids := r.Pids
	if pids <= 0 {
		pids = DefaultPids
	}
	write := func(path, v string) error {
		if err := os.WriteFile(path, []byte(v), 0o644); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		return nil
	}
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		dir := filepath.Join("/sys/fs/cgroup", cgroupsPath(id))
		if r.MemoryBytes > 0 {
			if err := write(filepath.Join(dir, "memory.max"), strconv.FormatInt(r.MemoryBytes, 10)); err != nil {
				return err
			}
			_ = write(filepath.Join(dir, "memory.swap.max"), "0")
		}
		if r.CPUMillis > 0 {
			if err := write(filepath.Join(dir, "cpu.max"), strconv.FormatInt(r.CPUMillis*100, 10)+" 100000"); err != nil {
				return err
			}
		}
		return write(filepath.Join(dir, "pids.max"), strconv.FormatInt(pids, 10))
	}
	v1 := func(ctrl, file string) string { return filepath.Join("/sys/fs/cgroup", ctrl, cgroupsPath(id), file) }
	if r.MemoryBytes > 0 {
		if err := write(v1("memory", "memory.limit_in_bytes"), strconv.FormatInt(r.MemoryBytes, 10)); err != nil {
			return err
		}
		if _, err := os.Stat(v1("memory", "memory.memsw.limit_in_bytes")); err == nil {
			if err := write(v1("memory", "memory.memsw.limit_in_bytes"), strconv.FormatInt(r.MemoryBytes, 10)); err != nil {
				return err
			}
		}
	}
	if r.CPUMillis > 0 {
		if err := write(v1("cpu", "cpu.cfs_period_us"), "100000"); err != nil {
			return err
		}
		if err := write(v1("cpu", "cpu.cfs_quota_us"), strconv.FormatInt(r.CPUMillis*100, 10)); err != nil {
			return err
		}
	}
	return write(v1("pids", "pids.max"), strconv.FormatInt(pids, 10))
}

var _ driver.PoolSizer = (*Driver)(nil)
