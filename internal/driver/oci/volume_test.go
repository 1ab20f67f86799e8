// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package oci

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/corral-dev/corral/internal/driver"
	"github.com/corral-dev/corral/internal/sandbox"
)

// TestSizedVolumeOutlivesAReboot: a named volume with a size is a file
// system of its own; after a reboot unmounted it, the next sandbox that
// mounts it finds its files; removing it leaves no mount.
func TestSizedVolumeOutlivesAReboot(t *testing.T) {
	requireRunc(t)
	t.Parallel()
	root := t.TempDir()
	t.Cleanup(func() { _ = UnmountRunDir(root) })
	d := newTestDriver(t, root)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	vol := sandbox.Volume{Name: "v", Kind: sandbox.VolumeNamed, Claim: "sized", Create: true, SizeBytes: 8 << 20, Target: "/v"}
	spec := func(id string) driver.Spec {
		return driver.Spec{ID: id, Tenant: "t", Image: driver.Image{URI: HostImage}, Entrypoint: []string{"sleep", "infinity"}, Volumes: []sandbox.Volume{vol}}
	}
	if _, err := d.Create(ctx, spec("sizeda")); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(d.tenantVolumes("t"), "sized")
	if !isMountPoint(filepath.Join(dir, "fs")) {
		t.Fatal("the sized volume is not a file system of its own")
	}
	if err := os.WriteFile(filepath.Join(dir, "fs", "data", "kept"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := d.Destroy(ctx, "sizeda"); err != nil {
		t.Fatal(err)
	}
	// A reboot: the volume's file system is no longer mounted.
	if err := unmount(filepath.Join(dir, "fs")); err != nil {
		t.Fatal(err)
	}
	vol.Create = false
	if _, err := d.Create(ctx, spec("sizedb")); err != nil {
		t.Fatalf("Create after the volume's file system went = %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "fs", "data", "kept")); err != nil {
		t.Errorf("the volume's file after the remount: %v", err)
	}
	if err := d.Destroy(ctx, "sizedb"); err != nil {
		t.Fatal(err)
	}
	if err := d.RemoveVolume(ctx, "t", "sized"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(dir); !os.IsNotExist(err) {
		t.Errorf("the volume's directory is left: %v", err)
	}
	if m := mountsUnder(root); len(m) > 1 { // the runtime tmpfs
		t.Errorf("mounts left: %v", m)
	}
}
