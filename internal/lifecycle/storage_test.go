// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package lifecycle

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/errdefs"
	"github.com/corral-dev/corral/internal/driver/fakedriver"
	"github.com/corral-dev/corral/internal/sandbox"
)

// waitSnapshot waits until snapshot id leaves Creating.
func waitSnapshot(t *testing.T, m *Manager, tenant, id string) *sandbox.Snapshot {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		sn, err := m.GetSnapshot(t.Context(), tenant, id)
		if err != nil {
			t.Fatal(err)
		}
		if sn.State != sandbox.SnapshotCreating {
			return sn
		}
		if time.Now().After(deadline) {
			t.Fatalf("snapshot %s still Creating", id)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A tenant's snapshots are bounded in number and in bytes: the one past
// either bound is refused with a 4xx naming the flag, a capture that
// would pass the byte bound fails and leaves nothing on the backend, and
// another tenant's snapshots go on.
func TestSnapshotQuota(t *testing.T) {
	t.Parallel()
	r := newRig(t, t.TempDir(), func(c *Config, _ *fakedriver.Config) {
		c.Storage = StorageLimits{MaxSnapshots: 2, MaxSnapshotBytes: fakedriver.FakeSnapshotBytes * 3 / 2}
	})
	src := mustCreate(t, r.m, req("t1", "fake:ok"))
	first, err := r.m.CreateSnapshot(t.Context(), "t1", src.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	if sn := waitSnapshot(t, r.m, "t1", first.ID); sn.State != sandbox.SnapshotReady {
		t.Fatalf("the first snapshot = %v %s", sn.State, sn.Message)
	}
	// The second fits the count, not the bytes: its capture fails.
	second, err := r.m.CreateSnapshot(t.Context(), "t1", src.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	sn := waitSnapshot(t, r.m, "t1", second.ID)
	if sn.State != sandbox.SnapshotFailed || !strings.Contains(sn.Message, "--max-snapshot-bytes") {
		t.Errorf("a snapshot past the byte bound = %v %q, want Failed naming --max-snapshot-bytes", sn.State, sn.Message)
	}
	refs, _ := r.d.ListSnapshots(t.Context())
	if len(refs) != 1 {
		t.Errorf("the backend keeps %d snapshots, want the first only", len(refs))
	}
	// Another tenant's are its own.
	other := mustCreate(t, r.m, req("t2", "fake:ok"))
	for range 2 {
		o, err := r.m.CreateSnapshot(t.Context(), "t2", other.ID, "")
		if err != nil {
			t.Fatalf("another tenant's snapshot: %v", err)
		}
		waitSnapshot(t, r.m, "t2", o.ID)
	}
	// The count, on a server with no byte bound.
	r2 := newRig(t, t.TempDir(), func(c *Config, _ *fakedriver.Config) { c.Storage = StorageLimits{MaxSnapshots: 2} })
	s2 := mustCreate(t, r2.m, req("t1", "fake:ok"))
	for range 2 {
		sn, err := r2.m.CreateSnapshot(t.Context(), "t1", s2.ID, "")
		if err != nil {
			t.Fatal(err)
		}
		waitSnapshot(t, r2.m, "t1", sn.ID)
	}
	_, err = r2.m.CreateSnapshot(t.Context(), "t1", s2.ID, "")
	var ee *errdefs.Error
	if !errors.Is(err, errdefs.ErrResourceExhausted) || !errors.As(err, &ee) || ee.Code != api.CodeSnapshotQuota || !strings.Contains(err.Error(), "--max-snapshots") {
		t.Errorf("a third snapshot with --max-snapshots 2 = %v, want ResourceExhausted %s naming the flag", err, api.CodeSnapshotQuota)
	}
}

// Named volumes: a size past --max-volume is refused, one without a size
// gets the maximum, and a runtime that cannot size volumes refuses a
// size rather than ignoring it.
func TestVolumeSizes(t *testing.T) {
	t.Parallel()
	named := func(size int64) []sandbox.Volume {
		return []sandbox.Volume{{Name: "v", Kind: sandbox.VolumeNamed, Claim: "c", Create: true, Target: "/v", SizeBytes: size}}
	}
	m := &Manager{cfg: Config{Storage: StorageLimits{MaxVolumeBytes: 1 << 30}}, d: nil}
	for _, tc := range []struct {
		name     string
		cfg      Config
		size     int64
		want     int64
		wantCode string
	}{
		{"unsized gets the maximum", Config{Storage: StorageLimits{MaxVolumeBytes: 1 << 30}}, 0, 1 << 30, ""},
		{"under the maximum", Config{Storage: StorageLimits{MaxVolumeBytes: 1 << 30}}, 8 << 20, 8 << 20, ""},
		{"over the maximum", Config{Storage: StorageLimits{MaxVolumeBytes: 1 << 30}}, 2 << 30, 0, api.CodeInvalidParameter},
		{"no maximum", Config{}, 0, 0, ""},
		{"a runtime without sizes, unsized", Config{VolumeSizeUnsupported: "no sizes", Storage: StorageLimits{MaxVolumeBytes: 1 << 30}}, 0, 0, ""},
		{"a runtime without sizes, sized", Config{VolumeSizeUnsupported: "no sizes"}, 8 << 20, 0, api.CodeInvalidParameter},
	} {
		m.cfg = tc.cfg
		v := named(tc.size)[0]
		err := m.sizeVolume(&v)
		var ee *errdefs.Error
		switch {
		case tc.wantCode == "" && (err != nil || v.SizeBytes != tc.want):
			t.Errorf("%s: sizeVolume = %v, size %d; want %d", tc.name, err, v.SizeBytes, tc.want)
		case tc.wantCode != "" && (!errors.As(err, &ee) || ee.Code != tc.wantCode || !errors.Is(err, errdefs.ErrInvalidArgument)):
			t.Errorf("%s: sizeVolume = %v, want %s", tc.name, err, tc.wantCode)
		}
	}
}
