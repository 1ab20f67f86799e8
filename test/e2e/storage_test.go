// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/sdk"
)

// diskBytes is what the files under dir take on dir's own file system
// (allocated blocks; what is mounted below dir, such as a sandbox's file
// system over its backing file or a tmpfs, counts by its backing file or
// not at all). The other tests of the package write beside a server's
// data dir on the same disk, so the disk's free space cannot tell what
// one server took.
func diskBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var root syscall.Stat_t
	if err := syscall.Lstat(dir, &root); err != nil {
		t.Fatal(err)
	}
	var n int64
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // gone while walked
		}
		var st syscall.Stat_t
		if syscall.Lstat(p, &st) != nil {
			return nil
		}
		if st.Dev != root.Dev {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		n += st.Blocks * 512
		return nil
	})
	return n
}

// TestStorageBoundsOCI is the review's M1 on the native runtime: a
// tenant that fills its sandbox and snapshots it again and again, or
// asks for a huge named volume, takes from the data disk no more than
// the server's bounds allow (a 4xx names each bound), while another
// tenant's creates and snapshots, and the server's own writes, go on.
func TestStorageBoundsOCI(t *testing.T) {
	requireOCI(t)
	t.Parallel()
	dir := t.TempDir()
	s := startServer(t, dir, "--runtime", "oci", "--max-disk", "64Mi", "--max-snapshots", "3", "--max-snapshot-bytes", "80Mi")
	attacker, victim := tenantClient(t, s, "attacker"), tenantClient(t, s, "victim")
	t.Cleanup(func() {
		// The named volume has a file system of its own: removed once no
		// sandbox mounts it.
		if err := attacker.DeleteVolume(context.WithoutCancel(t.Context()), "unsized"); err != nil && !errors.Is(err, sdk.ErrNotFound) {
			t.Errorf("delete the volume: %v", err)
		}
	})
	t.Cleanup(func() { deleteEvery(t, attacker); deleteEvery(t, victim) })
	before := diskBytes(t, dir)

	// A named volume past --max-volume (its default: --max-disk) is
	// refused; one without a size gets 64Mi, and a write past it fails.
	huge := "100Ti"
	req := ociCreate("host")
	req.Volumes = []api.Volume{{Name: "big", PVC: &api.PVCVolume{ClaimName: "big", Storage: &huge}, MountPath: "/big"}}
	_, err := attacker.CreateSandbox(ctx(t), req, sdk.CreateOptions{})
	var ae *sdk.APIError
	if !errors.As(err, &ae) || ae.Status != 400 || !strings.Contains(ae.Message, "--max-volume") {
		t.Errorf("a 100Ti named volume = %v, want a 400 naming --max-volume", err)
	}
	req.Volumes = []api.Volume{{Name: "big", PVC: &api.PVCVolume{ClaimName: "unsized"}, MountPath: "/big"}}
	vsb, err := attacker.CreateSandbox(ctx(t), req, sdk.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out, _, _ := sandboxExecd(t, attacker, vsb.ID).run("head -c 134217728 /dev/urandom > /big/fill 2>/dev/null || echo full; df -k /big | tail -n 1 | awk '{print $2}'",
		map[string]any{"timeout": 120000})
	if f := strings.Fields(out); len(f) != 2 || f[0] != "full" || atoi(f[1]) > 64<<10 {
		t.Errorf("an unsized named volume under --max-disk 64Mi: %q, want a 128 MiB write refused on a file system of at most 64 MiB", out)
	}

	// A full sandbox, snapshotted until the bounds hold.
	sb, err := attacker.CreateSandbox(ctx(t), ociCreate("host"), sdk.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, code := sandboxExecd(t, attacker, sb.ID).run("head -c 50000000 /dev/urandom > /root/fill", map[string]any{"timeout": 120000}); code != 0 {
		t.Fatal("fill the sandbox")
	}
	small, err := attacker.CreateSandbox(ctx(t), ociCreate("host"), sdk.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	snap := func(id string) (string, string, error) {
		sn, err := attacker.CreateSnapshot(ctx(t), id, "")
		if err != nil {
			return "", "", err
		}
		testutilWaitSnapshot(t, attacker, sn.ID)
		got, err := attacker.GetSnapshot(ctx(t), sn.ID)
		if err != nil {
			t.Fatal(err)
		}
		return got.Status.State, got.Status.Message, nil
	}
	// 50 MB: the first fits --max-snapshot-bytes 80Mi, the second does
	// not, and fails (counting for nothing).
	if st, msg, err := snap(sb.ID); err != nil || st != api.SnapshotReady {
		t.Fatalf("the first full snapshot = %s %q %v, want Ready", st, msg, err)
	}
	if st, msg, err := snap(sb.ID); err != nil || st != api.SnapshotFailed || !strings.Contains(msg, "--max-snapshot-bytes") {
		t.Errorf("the second full snapshot = %s %q %v, want Failed naming --max-snapshot-bytes", st, msg, err)
	}
	// Small ones fit the bytes until the count is reached.
	for i := range 2 {
		if st, msg, err := snap(small.ID); err != nil || st != api.SnapshotReady {
			t.Fatalf("small snapshot %d = %s %q %v, want Ready", i, st, msg, err)
		}
	}
	if _, _, err := snap(small.ID); !errors.As(err, &ae) || ae.Status != 429 || ae.Code != api.CodeSnapshotQuota || !strings.Contains(ae.Message, "--max-snapshots") {
		t.Errorf("a fourth snapshot = %v, want a 429 %s naming --max-snapshots", err, api.CodeSnapshotQuota)
	}

	// What the attacker took: one volume (64 MiB at most) and one
	// snapshot (50 MB), plus its sandboxes' own disks (64 MiB each at
	// most) and slack for the server's files.
	used := diskBytes(t, dir) - before
	if used > 64<<20+50<<20+2*64<<20+64<<20 {
		t.Errorf("the attacker took %d MiB of the data disk", used>>20)
	}
	t.Logf("the attacker took %d MiB of the data disk", used>>20)
	// The victim's creates and snapshots go on.
	v, err := victim.CreateSandbox(ctx(t), ociCreate("host"), sdk.CreateOptions{})
	if err != nil {
		t.Fatalf("the victim's create: %v", err)
	}
	vs, err := victim.CreateSnapshot(ctx(t), v.ID, "")
	if err != nil {
		t.Fatalf("the victim's snapshot: %v", err)
	}
	testutilWaitSnapshot(t, victim, vs.ID)
	if got, err := victim.GetSnapshot(ctx(t), vs.ID); err != nil || got.Status.State != api.SnapshotReady {
		t.Errorf("the victim's snapshot = %+v, %v", got, err)
	}
}
