// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package sandbox

import (
	"errors"
	"path"
	"strings"
	"testing"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/errdefs"
)

// FuzzParseVolumes: any volume is accepted or refused with a kind, never
// a panic; an accepted one mounts at a clean absolute path none of the
// sandbox's own, from a sub-path that cannot climb out.
func FuzzParseVolumes(f *testing.F) {
	f.Add("data", "/data", "", "claim", "", false)
	f.Add("h", "/mnt/h", "a/b", "", "/srv/x", true)
	f.Add("x", "/proc/../etc", "../..", "", "/", false)
	f.Fuzz(func(t *testing.T, name, target, sub, claim, host string, ro bool) {
		v := api.Volume{Name: name, MountPath: target, SubPath: sub, ReadOnly: ro}
		if claim != "" {
			v.PVC = &api.PVCVolume{ClaimName: claim}
		}
		if host != "" {
			v.Host = &api.HostVolume{Path: host}
		}
		out, err := ParseVolumes([]api.Volume{v})
		if err != nil {
			if errdefs.KindOf(err) == nil {
				t.Fatalf("ParseVolumes error without a kind: %v", err)
			}
			return
		}
		got := out[0]
		if !path.IsAbs(got.Target) || path.Clean(got.Target) != got.Target || got.Target == "/" {
			t.Fatalf("accepted mount path %q", got.Target)
		}
		for _, r := range append(reservedTargets(), reservedFiles()...) {
			if got.Target == r || strings.HasPrefix(got.Target, r+"/") || strings.HasPrefix(r, got.Target+"/") {
				t.Fatalf("accepted mount path %q over %s", got.Target, r)
			}
		}
		if path.IsAbs(got.SubPath) || strings.Contains("/"+got.SubPath+"/", "/../") {
			t.Fatalf("accepted sub-path %q", got.SubPath)
		}
		if got.Kind == VolumeHost && (!path.IsAbs(got.HostPath) || path.Clean(got.HostPath) != got.HostPath) {
			t.Fatalf("accepted host path %q", got.HostPath)
		}
	})
}

func TestParseVolumesRefusesOSSFS(t *testing.T) {
	t.Parallel()
	_, err := ParseVolumes([]api.Volume{{Name: "o", OSSFS: &api.OSSFS{Bucket: "b"}, MountPath: "/o"}})
	if !errors.Is(err, errdefs.ErrNotImplemented) {
		t.Fatalf("ParseVolumes(ossfs) = %v, want ErrNotImplemented", err)
	}
}
