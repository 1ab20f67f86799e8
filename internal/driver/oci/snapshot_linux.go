// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package oci

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	runc "github.com/containerd/go-runc"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/errdefs"
	"github.com/corral-dev/corral/internal/driver"
	"github.com/corral-dev/corral/internal/imagestore"
	"github.com/corral-dev/corral/internal/insandbox"
	"github.com/corral-dev/corral/internal/safefile"
	"github.com/corral-dev/corral/internal/sandbox"
	"github.com/corral-dev/corral/internal/treecopy"
)

// A snapshot of a sandbox is a copy of its writable layer, made while
// the sandbox is frozen, kept as a layer of its own under
// Root/snapshots/ID: root/ is the root file system's layer and host/DIR/
// the layer of each of the host image's system directories. Its
// meta.json, written last, says what lies below it: the image's layers
// (or the host image) and the snapshots the sandbox was itself restored
// from (its chain, top first). A sandbox restored from it stacks its own
// empty writable layer over the snapshot's layer, its chain and its
// image, so a restore copies nothing and every sandbox restored from one
// snapshot shares its layer.
//
// A snapshot is removed in two steps: its meta.json goes at once (it is
// no longer listed nor restorable), its layers once no sandbox and no
// other snapshot stacks them (sweepSnapshots).

// LabelSnapshotID marks a snapshot's listing with its ID.
const LabelSnapshotID = "corral.dev/snapshot-id"

// snapshotMeta describes a snapshot; its presence makes the snapshot.
type snapshotMeta struct {
	ID      string    `json:"id"`
	Sandbox string    `json:"sandbox"`
	Tenant  string    `json:"tenant"`
	Created time.Time `json:"created"`
	Base    rootBase  `json:"base"`
	// Bytes is the data the snapshot's own layer holds.
	Bytes int64 `json:"bytes"`
}

// rootBase is what a sandbox's writable layer lies on.
type rootBase struct {
	// Host: the host image; else Layers, the image's DiffIDs, bottom first.
	Host   bool              `json:"host,omitempty"`
	Layers []string          `json:"layers,omitempty"`
	Config imagestore.Config `json:"config"`
	// Chain are the snapshots the sandbox was restored from, top first.
	Chain []string `json:"chain,omitempty"`
}

func (d *Driver) snapshotsDir() string         { return filepath.Join(d.cfg.Root, "snapshots") }
func (d *Driver) snapshotDir(id string) string { return filepath.Join(d.snapshotsDir(), id) }
func (d *Driver) snapshotTemp(id string) string {
	return filepath.Join(d.snapshotsDir(), snapshotTemp+id)
}

// snapshotTemp prefixes a snapshot being captured.
const snapshotTemp = ".new-"

// freezeMark is the bundle's file that says a snapshot froze the sandbox.
const freezeMark = "snapshot-freeze"

// thawInterrupted thaws a sandbox a snapshot froze when the server
// stopped during the copy.
func (d *Driver) thawInterrupted(ctx context.Context, id, bundle string) error {
	mark := filepath.Join(bundle, freezeMark)
	if _, err := os.Lstat(mark); err != nil {
		return nil
	}
	if c, err := d.state(ctx, id); err == nil && c.Status == "paused" {
		if err := d.rt(id).Resume(ctx, id); err != nil {
			return fmt.Errorf("thaw %s after an interrupted snapshot: %w", id, err)
		}
	}
	return os.Remove(mark)
}

// Snapshot implements driver.Snapshotter: the sandbox is frozen while
// its writable layers are copied (a consistent point in time: no process
// of it runs meanwhile), then thawed. execd's command output is not part
// of the snapshot.
func (d *Driver) Snapshot(ctx context.Context, id, snapshotID string) (*driver.SnapshotRef, error) {
	if err := validID(snapshotID); err != nil {
		return nil, err
	}
	unlock := d.freeze.lock(id)
	defer unlock()
	// A sandbox this instance tracks is checked without running runc.
	sb := d.running(id)
	if sb == nil {
		var c *runc.Container
		var err error
		if sb, c, err = d.lookup(ctx, id); err != nil {
			return nil, err
		}
		if c.Status != "running" {
			return nil, fmt.Errorf("sandbox %s is %s, not running: %w", id, c.Status, errdefs.ErrFailedPrecondition)
		}
	}
	if f, err := d.paused(ctx, id); err != nil || f {
		return nil, fmt.Errorf("sandbox %s is paused, not running: %w", id, errdefs.ErrFailedPrecondition)
	}
	meta, err := readMeta(sb.bundle)
	if err != nil {
		return nil, fmt.Errorf("sandbox %s: %w", id, err)
	}
	if meta.Base == nil {
		return nil, errdefs.Newf(errdefs.ErrFailedPrecondition, api.CodeSnapshotInvalidSource,
			"sandbox %s was made by an earlier corral that did not record its image: it cannot be snapshotted", id)
	}
	if err := os.MkdirAll(d.snapshotsDir(), 0o700); err != nil {
		return nil, err
	}
	tmp := d.snapshotTemp(snapshotID)
	if err := os.Mkdir(tmp, 0o700); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("snapshot %s: %w", snapshotID, errdefs.ErrAlreadyExists)
		}
		return nil, err
	}
	done := false
	defer func() {
		if !done {
			_ = os.RemoveAll(tmp)
		}
	}()
	// The mark says the freeze is the snapshot's: a server that dies
	// during the copy thaws the sandbox when it recovers it.
	mark := filepath.Join(sb.bundle, freezeMark)
	if err := os.WriteFile(mark, nil, 0o600); err != nil {
		return nil, err
	}
	if err := d.setPaused(ctx, id, true); err != nil {
		_ = d.setPaused(context.WithoutCancel(ctx), id, false)
		_ = os.Remove(mark)
		return nil, fmt.Errorf("freeze %s: %w", id, err)
	}
	bytes, err := d.copyLayers(id, meta.Base.Host, tmp)
	// Thawed whatever happened, even if ctx ended meanwhile.
	rerr := d.setPaused(context.WithoutCancel(ctx), id, false)
	if rerr == nil {
		_ = os.Remove(mark)
	}
	if err != nil {
		return nil, fmt.Errorf("snapshot %s: %w", id, err)
	}
	if rerr != nil {
		return nil, fmt.Errorf("thaw %s: %w", id, rerr)
	}
	sm := snapshotMeta{ID: snapshotID, Sandbox: id, Tenant: meta.Tenant, Created: time.Now().UTC(), Base: *meta.Base, Bytes: bytes}
	b, _ := json.Marshal(sm)
	if err := safefile.WriteFileAtomic(tmp, "meta.json", b, 0o600); err != nil {
		return nil, err
	}
	d.snapMu.Lock()
	err = os.Rename(tmp, d.snapshotDir(snapshotID))
	d.snapMu.Unlock()
	if err != nil {
		return nil, err
	}
	done = true
	return d.snapshotRef(&sm), nil
}

// copyLayers copies sandbox id's writable layers into dir and returns the
// bytes copied.
func (d *Driver) copyLayers(id string, host bool, dir string) (int64, error) {
	disk := d.diskDir(id)
	upper := filepath.Join(disk, "fs", "upper") // on the sandbox's own disk (a disk limit)
	if _, err := os.Lstat(upper); err != nil {
		upper = filepath.Join(disk, "upper")
	}
	skip := treecopy.Options{Skip: []string{strings.TrimPrefix(insandbox.ExecdStateDir, "/")}}
	st, err := treecopy.Copy(upper, filepath.Join(dir, "root"), skip)
	if err != nil {
		return 0, err
	}
	total := st.Bytes
	if !host {
		return total, nil
	}
	if err := os.Mkdir(filepath.Join(dir, "host"), 0o700); err != nil {
		return 0, err
	}
	for _, sys := range hostSystemDirs() {
		up := filepath.Join(filepath.Dir(upper), "host", sys, "upper")
		if _, err := os.Lstat(up); err != nil {
			continue
		}
		st, err := treecopy.Copy(up, filepath.Join(dir, "host", filepath.Base(sys)), treecopy.Options{})
		if err != nil {
			return 0, err
		}
		total += st.Bytes
	}
	return total, nil
}

// snapshotRef is a snapshot's reference: its ID names its directory, so
// it has no state of its own.
func (d *Driver) snapshotRef(sm *snapshotMeta) *driver.SnapshotRef {
	return &driver.SnapshotRef{ID: sm.ID, Driver: Name, Version: 1, Bytes: sm.Bytes, Labels: map[string]string{
		sandbox.LabelManaged: "true", LabelSnapshotID: sm.ID, sandbox.LabelSandboxID: sm.Sandbox, sandbox.LabelTenant: sm.Tenant,
	}}
}

// readSnapshot reads a snapshot's description; ErrNotFound if it has
// none (never made, being made, or removed).
func (d *Driver) readSnapshot(id string) (*snapshotMeta, error) {
	return readSnapshotIn(d.snapshotsDir(), id)
}

// readSnapshotIn is readSnapshot for the snapshots directory dir.
func readSnapshotIn(dir, id string) (*snapshotMeta, error) {
	if validID(id) != nil || strings.HasPrefix(id, snapshotTemp) {
		return nil, fmt.Errorf("snapshot %s: %w", id, errdefs.ErrNotFound)
	}
	b, _, err := safefile.ReadFile(filepath.Join(dir, id), "meta.json", 1<<20)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("snapshot %s: %w", id, errdefs.ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	var sm snapshotMeta
	if err := json.Unmarshal(b, &sm); err != nil {
		return nil, fmt.Errorf("snapshot %s: corrupt description: %w", id, err)
	}
	return &sm, nil
}

// RemoveSnapshot implements driver.Snapshotter. The snapshot is gone at
// once; its layer stays while sandboxes restored from it run.
func (d *Driver) RemoveSnapshot(ctx context.Context, ref *driver.SnapshotRef) error {
	if ref == nil || validID(ref.ID) != nil || strings.HasPrefix(ref.ID, snapshotTemp) {
		return nil
	}
	d.snapMu.Lock()
	err := os.Remove(filepath.Join(d.snapshotDir(ref.ID), "meta.json"))
	d.snapMu.Unlock()
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	// A capture the server did not see finish.
	if err := os.RemoveAll(d.snapshotTemp(ref.ID)); err != nil {
		return err
	}
	return d.sweepSnapshots(ctx)
}

// ListSnapshots implements driver.Snapshotter.
func (d *Driver) ListSnapshots(ctx context.Context) ([]driver.SnapshotRef, error) {
	entries, err := os.ReadDir(d.snapshotsDir())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []driver.SnapshotRef
	for _, e := range entries {
		if sm, err := d.readSnapshot(e.Name()); err == nil {
			out = append(out, *d.snapshotRef(sm))
		}
	}
	return out, nil
}

// sweepSnapshots removes the layers of removed snapshots that no sandbox
// and no snapshot stacks any more.
func (d *Driver) sweepSnapshots(_ context.Context) error {
	d.snapMu.Lock()
	defer d.snapMu.Unlock()
	entries, err := os.ReadDir(d.snapshotsDir())
	if err != nil {
		return nil
	}
	var gone []string
	inUse := map[string]bool{}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), snapshotTemp) {
			continue // being captured (RemoveSnapshot takes an interrupted one)
		}
		sm, err := d.readSnapshot(e.Name())
		if errors.Is(err, errdefs.ErrNotFound) {
			gone = append(gone, e.Name())
			continue
		}
		inUse[e.Name()] = true
		if sm != nil {
			for _, c := range sm.Base.Chain {
				inUse[c] = true
			}
		}
	}
	if len(gone) == 0 {
		return nil
	}
	bundles, err := os.ReadDir(filepath.Join(runDir(d.cfg.Root), "bundles"))
	if err != nil {
		return err
	}
	for _, e := range bundles {
		m, err := readMeta(d.bundleDir(e.Name()))
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				return nil // unknown: keep every layer
			}
			continue
		}
		if m.Base != nil {
			for _, c := range m.Base.Chain {
				inUse[c] = true
			}
		}
	}
	var errs []error
	for _, id := range gone {
		if !inUse[id] {
			if err := os.RemoveAll(d.snapshotDir(id)); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// restorePlan is where a sandbox restored from a snapshot gets its root
// file system: the snapshot's layer and chain over its image.
func (d *Driver) restorePlan(ref *driver.SnapshotRef) (*rootfsPlan, error) {
	if ref.Driver != Name {
		return nil, errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeSnapshotInvalidSource,
			"snapshot %s was taken by the %s runtime; this server runs the %s runtime", ref.ID, ref.Driver, Name)
	}
	sm, err := d.readSnapshot(ref.ID)
	if err != nil {
		if errors.Is(err, errdefs.ErrNotFound) {
			return nil, errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeSnapshotNotFound, "snapshot %s is not on this server", ref.ID)
		}
		return nil, err
	}
	base := sm.Base
	p := &rootfsPlan{config: base.Config, layers: base.Layers, host: base.Host, chain: append([]string{ref.ID}, base.Chain...)}
	for _, c := range p.chain {
		dir := filepath.Join(d.snapshotDir(c), "root")
		if _, err := os.Lstat(dir); err != nil {
			return nil, errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeSnapshotNotFound,
				"snapshot %s is incomplete on this server (its layer %s is missing)", ref.ID, c)
		}
		p.lowers = append(p.lowers, dir)
	}
	if base.Host {
		if !d.cfg.AllowHostImage {
			return nil, errdefs.New(errdefs.ErrInvalidArgument, api.CodeImageHostImageDisabled,
				`the snapshot is of a "host" image sandbox, and the "host" image is disabled on this server`)
		}
		p.lowers = append(p.lowers, d.hostRoot)
		return p, nil
	}
	for i := len(base.Layers) - 1; i >= 0; i-- {
		dir := d.images.LayerDir(base.Layers[i])
		if _, err := os.Lstat(dir); err != nil {
			return nil, errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeSnapshotNotFound,
				"the image layers of snapshot %s are gone from this server", ref.ID)
		}
		p.lowers = append(p.lowers, dir)
	}
	return p, nil
}

// hostLowers are the lower layers of one of the host image's system
// directories in a sandbox of plan: the snapshots' copies of it, top
// first, over the host's own.
func (d *Driver) hostLowers(p *rootfsPlan, sys string) string {
	var lowers []string
	for _, c := range p.chain {
		dir := filepath.Join(d.snapshotDir(c), "host", filepath.Base(sys))
		if _, err := os.Lstat(dir); err == nil {
			lowers = append(lowers, dir)
		}
	}
	return strings.Join(append(lowers, sys), ":")
}

// idLocks are mutexes by sandbox ID: a snapshot's freeze and a pause or
// resume of the same sandbox never interleave.
type idLocks struct {
	// mu guards m.
	mu sync.Mutex
	m  map[string]*idLock
}

type idLock struct {
	sync.Mutex
	users int
}

// lock locks id and returns its unlock.
func (l *idLocks) lock(id string) func() {
	l.mu.Lock()
	if l.m == nil {
		l.m = map[string]*idLock{}
	}
	k := l.m[id]
	if k == nil {
		k = &idLock{}
		l.m[id] = k
	}
	k.users++
	l.mu.Unlock()
	k.Lock()
	return func() {
		k.Unlock()
		l.mu.Lock()
		if k.users--; k.users == 0 {
			delete(l.m, id)
		}
		l.mu.Unlock()
	}
}
