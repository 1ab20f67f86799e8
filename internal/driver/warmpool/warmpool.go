// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

// Package warmpool keeps warm sandboxes for a runtime: sandboxes started
// ahead of time, with no tenant and no user code, that a create claims
// and the runtime then personalises. It owns the bookkeeping every
// runtime's pool shares (the pools wanted, by key; the ready sandboxes;
// claims awaiting their create; filling one sandbox at a time with
// backoff; removing what is no longer wanted) and what a claim does alike
// on every local runtime (which creates can take one, Warmable; the
// hand-over of token and environment, Hand; limits written into the
// cgroups, CgroupLimits); the runtime makes and destroys the sandboxes.
package warmpool

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
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
	"github.com/corral-dev/corral/internal/verifier"
)

// ClaimTTL is how long a claim may wait for its create before the warm
// sandbox is destroyed.
const ClaimTTL = 2 * time.Minute

// Maker is what a runtime does for its pool.
type Maker interface {
	// MakeWarm starts a warm sandbox of spec's image and platform, and
	// returns its ID.
	MakeWarm(ctx context.Context, spec driver.Spec) (string, error)
	// Destroy removes a sandbox.
	Destroy(ctx context.Context, id string) error
}

type want struct {
	spec driver.Spec
	size int
}

// Pool is a runtime's warm pools, by key: an image's under its
// reference, a template's under its key.
type Pool struct {
	m   Maker
	log *slog.Logger

	mu      sync.Mutex
	want    map[string]want
	ready   map[string][]string  // key → warm sandbox IDs
	claimed map[string]time.Time // ID → when it was claimed
	wake    chan struct{}
	cancel  context.CancelFunc
	done    chan struct{}
}

// Start starts keeping the pools of images (image → size) full.
func Start(m Maker, log *slog.Logger, images map[string]int) *Pool {
	ctx, cancel := context.WithCancel(context.Background())
	p := &Pool{m: m, log: log, want: map[string]want{}, ready: map[string][]string{}, claimed: map[string]time.Time{},
		wake: make(chan struct{}, 1), cancel: cancel, done: make(chan struct{})}
	for image, n := range images {
		p.want[image] = want{spec: driver.Spec{Image: driver.Image{URI: image}}, size: n}
	}
	go p.fill(ctx)
	return p
}

// Stop stops filling and destroys every warm sandbox not handed over.
func (p *Pool) Stop() {
	p.cancel()
	<-p.done
	p.mu.Lock()
	var ids []string
	for _, l := range p.ready {
		ids = append(ids, l...)
	}
	ids = append(ids, slices.Collect(maps.Keys(p.claimed))...)
	p.ready, p.claimed = map[string][]string{}, map[string]time.Time{}
	p.mu.Unlock()
	p.destroy(ids...)
}

func (p *Pool) destroy(ids ...string) {
	for _, id := range ids {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		if err := p.m.Destroy(ctx, id); err != nil {
			p.log.Warn("warm pool: remove a warm sandbox", "sandbox_id", id, "err", err)
		}
		cancel()
	}
}

func (p *Pool) poke() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// Set keeps n warm sandboxes of spec's image and platform under key; 0
// drops the pool, and its warm sandboxes are destroyed (as are those a
// smaller n leaves over, or all of them when the image changes).
func (p *Pool) Set(key string, spec driver.Spec, n int) {
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
		p.want[key] = want{spec: driver.Spec{Image: spec.Image, Platform: spec.Platform}, size: n}
	}
	if extra := len(p.ready[key]) - n; n > 0 && extra > 0 {
		drop = append(drop, p.ready[key][n:]...)
		p.ready[key] = p.ready[key][:n]
	}
	p.mu.Unlock()
	p.poke()
	p.destroy(drop...)
}

// Ready is how many warm sandboxes key has ready.
func (p *Pool) Ready(key string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.ready[key])
}

// Claim hands a create of image the next warm sandbox of pool key (its
// image's when key is empty), if one is ready and of that image.
func (p *Pool) Claim(key, image string) (string, bool) {
	if key == "" {
		key = image
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	ids := p.ready[key]
	if len(ids) == 0 || p.want[key].spec.Image.URI != image {
		return "", false
	}
	id := ids[0]
	p.ready[key] = ids[1:]
	p.claimed[id] = time.Now()
	// The refill starts a moment later, so that making a sandbox does
	// not compete with the claimed one's first commands.
	time.AfterFunc(RefillDelay, p.poke)
	return id, true
}

// RefillDelay is how long after a claim the pool starts refilling.
const RefillDelay = 150 * time.Millisecond

// Take reports whether id was claimed, forgetting the claim: the
// runtime's create then personalises it.
func (p *Pool) Take(id string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.claimed[id]
	delete(p.claimed, id)
	return ok
}

// fill keeps each pool at its size, one create at a time so the pool
// never competes hard with real creates.
func (p *Pool) fill(ctx context.Context) {
	defer close(p.done)
	backoff := time.Second
	tick := time.NewTicker(30 * time.Second)
	defer tick.Stop()
	for {
		p.expireClaims()
		failed := false
		p.mu.Lock()
		keys := slices.Sorted(maps.Keys(p.want))
		p.mu.Unlock()
		for _, key := range keys {
			if !p.fillOne(ctx, key) {
				failed = true
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

// fillOne brings pool key to its size; false if a create failed.
func (p *Pool) fillOne(ctx context.Context, key string) bool {
	for ctx.Err() == nil {
		p.mu.Lock()
		w, ok := p.want[key]
		n := len(p.ready[key])
		p.mu.Unlock()
		if !ok || n >= w.size {
			return true
		}
		id, err := p.m.MakeWarm(ctx, w.spec)
		if err != nil {
			if ctx.Err() == nil {
				p.log.WarnContext(ctx, "warm pool: create failed", "pool", key, "image", w.spec.Image.URI, "err", err)
			}
			return false
		}
		p.mu.Lock()
		cur, ok := p.want[key]
		if ok && cur.spec.Image == w.spec.Image && cur.spec.Platform == w.spec.Platform {
			p.ready[key] = append(p.ready[key], id)
			id = ""
		}
		p.mu.Unlock()
		if id != "" {
			p.destroy(id) // the pool changed while this one started
		}
	}
	return true
}

// expireClaims destroys warm sandboxes claimed long ago but never created.
func (p *Pool) expireClaims() {
	p.mu.Lock()
	var old []string
	for id, at := range p.claimed {
		if time.Since(at) > ClaimTTL {
			old = append(old, id)
			delete(p.claimed, id)
		}
	}
	p.mu.Unlock()
	p.destroy(old...)
}

// Label marks the backend objects of a warm sandbox.
const Label = "corral.dev/pool"

// Hand writes a claimed warm sandbox's access token (its verifier) and its
// commands' environment into the directory execd reads them from, token
// first (from then on the pool's token opens nothing), each by rename (a
// reader sees the old or the new file, and nothing planted in root is
// followed). It returns the environment as KEY=VALUE lines, the
// entrypoint's too.
func Hand(root *os.Root, token string, env map[string]string) ([]string, error) {
	if err := replaceFile(root, "token", []byte(verifier.Of(token)+"\n")); err != nil {
		return nil, fmt.Errorf("token: %w", err)
	}
	lines := make([]string, 0, len(env))
	for _, k := range slices.Sorted(maps.Keys(env)) {
		lines = append(lines, k+"="+env[k])
	}
	if err := replaceFile(root, "env", []byte(strings.Join(lines, "\n")+"\n")); err != nil {
		return nil, fmt.Errorf("environment: %w", err)
	}
	return lines, nil
}

// replaceFile writes name inside root by rename.
func replaceFile(root *os.Root, name string, data []byte) error {
	tmp := "." + name + ".new"
	_ = root.Remove(tmp)
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
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

// CgroupV2 reports whether the host's cgroups are the unified (v2) tree.
func CgroupV2() bool {
	_, err := os.Stat("/sys/fs/cgroup/cgroup.controllers")
	return err == nil
}

// CgroupLimits writes a claimed warm sandbox's limits into its cgroups:
// memory (and no swap), cpu, and pids. dir("") is its unified (v2) cgroup
// directory, dir(controller) its v1 one of that controller. The claim sets
// them at once, where a runtime's own update would take tens of
// milliseconds.
func CgroupLimits(dir func(controller string) string, r driver.Resources, pids int64) error {
	write := func(path, v string) error {
		if err := os.WriteFile(path, []byte(v), 0o644); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		return nil
	}
	if CgroupV2() {
		d := dir("")
		if r.MemoryBytes > 0 {
			if err := write(filepath.Join(d, "memory.max"), strconv.FormatInt(r.MemoryBytes, 10)); err != nil {
				return err
			}
			_ = write(filepath.Join(d, "memory.swap.max"), "0")
		}
		if r.CPUMillis > 0 {
			if err := write(filepath.Join(d, "cpu.max"), strconv.FormatInt(r.CPUMillis*100, 10)+" 100000"); err != nil {
				return err
			}
		}
		return write(filepath.Join(d, "pids.max"), strconv.FormatInt(pids, 10))
	}
	v1 := func(ctrl, file string) string { return filepath.Join(dir(ctrl), file) }
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

// ProcessCgroups returns the cgroup directories of process pid, as
// CgroupLimits takes them, read from /proc/PID/cgroup.
func ProcessCgroups(pid int) (func(controller string) string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return nil, err
	}
	dirs := map[string]string{}
	for line := range strings.SplitSeq(strings.TrimSpace(string(b)), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 || !strings.HasPrefix(f[2], "/") || strings.Contains(f[2], "..") {
			continue
		}
		if f[1] == "" {
			dirs[""] = filepath.Join("/sys/fs/cgroup", f[2])
			continue
		}
		for _, ctrl := range strings.Split(f[1], ",") {
			dirs[ctrl] = filepath.Join("/sys/fs/cgroup", ctrl, f[2])
		}
	}
	want := []string{"memory", "cpu", "pids"}
	if CgroupV2() {
		want = []string{""}
	}
	for _, c := range want {
		if dirs[c] == "" {
			return nil, fmt.Errorf("process %d has no %q cgroup", pid, c)
		}
	}
	return func(c string) string { return dirs[c] }, nil
}

// Warmable says why a create of spec cannot take a warm sandbox a local
// runtime made ahead of time (the native one, docker on a local engine):
// what must be made with the sandbox, or an environment that does not
// travel as KEY=VALUE lines; nil if it can.
func Warmable(spec driver.Spec) error {
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
		return errors.New("a disk limit is set when a sandbox is made")
	case spec.Isolation == api.IsolationRunsc:
		return errors.New("warm sandboxes are runc's")
	}
	for k, v := range spec.Env {
		if strings.ContainsAny(k, "=\n\x00") || strings.ContainsAny(v, "\n\x00") {
			return fmt.Errorf("environment variable %q holds a newline or NUL", k)
		}
	}
	return nil
}
