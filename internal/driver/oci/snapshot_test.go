// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package oci

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/corral-dev/corral/errdefs"
	"github.com/corral-dev/corral/internal/driver"
)

// TestSnapshotLayersOutliveTheirSnapshotWhileUsed: a removed snapshot
// is gone at once but its layer stays while a sandbox restored from it
// runs; once that sandbox goes, nothing is left. A server that stopped
// while a snapshot froze a sandbox thaws it when it recovers it.
func TestSnapshotLayersOutliveTheirSnapshotWhileUsed(t *testing.T) {
	requireRunc(t)
	t.Parallel()
	root := t.TempDir()
	t.Cleanup(func() { _ = UnmountRunDir(root) })
	d := newTestDriver(t, root)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	spec := driver.Spec{ID: "snapsrc", Tenant: "t", Image: driver.Image{URI: HostImage}, Entrypoint: []string{"sleep", "infinity"}}
	h, err := d.Create(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Destroy(context.WithoutCancel(ctx), "snapsrc") })
	if _, err := d.Snapshot(ctx, "nope", "s0"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Snapshot(unknown) = %v, want ErrNotFound", err)
	}
	ref, err := d.Snapshot(ctx, "snapsrc", "s1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Snapshot(ctx, "snapsrc", "../escape"); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("Snapshot with a bad id = %v, want ErrInvalidArgument", err)
	}
	restored := driver.Spec{ID: "snaprestored", Tenant: "t", Snapshot: ref, Entrypoint: []string{"sleep", "infinity"}}
	if _, err := d.Create(ctx, restored); err != nil {
		t.Fatal(err)
	}
	// A second snapshot, of the restored sandbox, stacks on the first.
	ref2, err := d.Snapshot(ctx, "snaprestored", "s2")
	if err != nil {
		t.Fatal(err)
	}
	var sm snapshotMeta
	b, _ := os.ReadFile(filepath.Join(root, "snapshots", "s2", "meta.json"))
	if err := json.Unmarshal(b, &sm); err != nil || len(sm.Base.Chain) != 1 || sm.Base.Chain[0] != "s1" {
		t.Errorf("s2's chain = %v (%v), want [s1]", sm.Base.Chain, err)
	}
	if err := d.RemoveSnapshot(ctx, ref); err != nil {
		t.Fatal(err)
	}
	if refs, _ := d.ListSnapshots(ctx); len(refs) != 1 || refs[0].ID != "s2" {
		t.Errorf("ListSnapshots = %v, want only s2", refs)
	}
	if _, err := os.Lstat(filepath.Join(root, "snapshots", "s1", "root")); err != nil {
		t.Errorf("s1's layer went while a sandbox and s2 stack it: %v", err)
	}
	if _, err := d.Create(ctx, driver.Spec{ID: "snapgone", Tenant: "t", Snapshot: ref, Entrypoint: []string{"sleep", "1"}}); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("restore of a removed snapshot = %v, want ErrInvalidArgument", err)
	}
	other := *ref2
	other.Driver = "docker"
	if _, err := d.Create(ctx, driver.Spec{ID: "snapother", Tenant: "t", Snapshot: &other, Entrypoint: []string{"sleep", "1"}}); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("restore of another runtime's snapshot = %v, want ErrInvalidArgument", err)
	}

	// The server stopped mid-capture: the sandbox is frozen, the mark says
	// why, and a new instance's Recover thaws it.
	if err := os.WriteFile(filepath.Join(d.bundleDir("snapsrc"), freezeMark), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := d.runc.Pause(ctx, "snapsrc"); err != nil {
		t.Fatal(err)
	}
	d2 := newTestDriver(t, root)
	if err := d2.Recover(ctx, h); err != nil {
		t.Fatal(err)
	}
	if st, err := d2.Inspect(ctx, "snapsrc"); err != nil || st.Phase != driver.PhaseRunning {
		t.Errorf("after Recover: %v, %v; want running", st.Phase, err)
	}

	if err := d.Destroy(ctx, "snaprestored"); err != nil {
		t.Fatal(err)
	}
	if err := d.RemoveSnapshot(ctx, ref2); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(filepath.Join(root, "snapshots")); len(entries) != 0 {
		t.Errorf("left in snapshots/: %v", entries)
	}
}
