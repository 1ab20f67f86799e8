// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/internal/driver"
	"github.com/corral-dev/corral/internal/driver/fakedriver"
	"github.com/corral-dev/corral/internal/lifecycle"
)

func volumesBody(vols ...map[string]any) map[string]any {
	b := basicCreate()
	b["volumes"] = vols
	return b
}

// TestVolumeRequests: every malformed volume is a 400 naming its rule;
// host volumes are checked against the allowed prefixes with links
// resolved; named volumes are listed and deleted per tenant.
func TestVolumeRequests(t *testing.T) {
	t.Parallel()
	allowed := t.TempDir()
	outside := t.TempDir()
	if err := os.Mkdir(filepath.Join(allowed, "ok"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(allowed, "out")); err != nil {
		t.Fatal(err)
	}
	s := newTSFull(t, nil, nil, func(c *lifecycle.Config) { c.AllowedHostPaths = []string{allowed} })
	host := func(path, sub string) map[string]any {
		return map[string]any{"name": "h", "host": map[string]string{"path": path}, "mountPath": "/mnt/h", "subPath": sub}
	}
	pvc := func(name, claim, target string) map[string]any {
		return map[string]any{"name": name, "pvc": map[string]any{"claimName": claim}, "mountPath": target}
	}
	for _, tc := range []struct {
		name string
		vols []map[string]any
		code string
	}{
		{"bad name", []map[string]any{{"name": "Bad", "pvc": map[string]any{"claimName": "c"}, "mountPath": "/x"}}, api.CodeVolumeInvalidName},
		{"duplicate name", []map[string]any{pvc("a", "c", "/x"), pvc("a", "d", "/y")}, api.CodeVolumeDuplicateName},
		{"two backends", []map[string]any{{"name": "a", "pvc": map[string]any{"claimName": "c"}, "host": map[string]string{"path": allowed}, "mountPath": "/x"}}, api.CodeVolumeInvalidBackend},
		{"same mount path", []map[string]any{pvc("a", "c", "/x"), pvc("b", "d", "/x")}, api.CodeVolumeInvalidMountPath},
		{"root mount path", []map[string]any{pvc("a", "c", "/")}, api.CodeVolumeInvalidMountPath},
		{"one inside another", []map[string]any{pvc("a", "c", "/x"), pvc("b", "d", "/x/y")}, api.CodeVolumeInvalidMountPath},
		{"one over another", []map[string]any{pvc("a", "c", "/x/y/z"), pvc("b", "d", "/x")}, api.CodeVolumeInvalidMountPath},
		{"over the exit file", []map[string]any{pvc("a", "c", "/.corral-exit")}, api.CodeVolumeInvalidMountPath},
		{"unclean mount path", []map[string]any{pvc("a", "c", "/x/../proc")}, api.CodeVolumeInvalidMountPath},
		{"over /etc/hosts", []map[string]any{pvc("a", "c", "/etc")}, api.CodeVolumeInvalidMountPath},
		{"over execd", []map[string]any{pvc("a", "c", "/var/lib")}, api.CodeVolumeInvalidMountPath},
		{"absolute sub-path", []map[string]any{host(allowed, "/etc")}, api.CodeVolumeInvalidSubPath},
		{"dot-dot sub-path", []map[string]any{host(allowed, "ok/../..")}, api.CodeVolumeInvalidSubPath},
		{"relative host path", []map[string]any{host("srv", "")}, api.CodeVolumeInvalidHostPath},
		{"outside", []map[string]any{host(outside, "")}, api.CodeVolumeHostPathForbidden},
		{"prefix lookalike", []map[string]any{host(allowed+"x", "")}, api.CodeVolumeHostPathForbidden},
		{"link out", []map[string]any{host(filepath.Join(allowed, "out"), "")}, api.CodeVolumeHostPathForbidden},
		{"sub-path link out", []map[string]any{host(allowed, "out")}, api.CodeVolumeHostPathForbidden},
		{"missing", []map[string]any{host(filepath.Join(allowed, "nope"), "")}, api.CodeVolumeHostPathNotFound},
		{"bad claim", []map[string]any{pvc("a", "C_C", "/x")}, api.CodeVolumeInvalidPVCName},
		{"bad storage", []map[string]any{{"name": "a", "pvc": map[string]any{"claimName": "c", "storage": "lots"}, "mountPath": "/x"}}, api.CodeInvalidParameter},
	} {
		r := s.call("POST", "/v1/sandboxes", s.keyA, volumesBody(tc.vols...))
		if r.status != 400 || r.errCode(t) != tc.code {
			t.Errorf("%s: create = %d %s, want 400 %s", tc.name, r.status, r.body, tc.code)
		}
	}
	tooMany := make([]map[string]any, 17)
	for i := range tooMany {
		tooMany[i] = pvc("v"+strings.Repeat("x", i), "c", "/m"+strings.Repeat("x", i))
	}
	if r := s.call("POST", "/v1/sandboxes", s.keyA, volumesBody(tooMany...)); r.status != 400 {
		t.Errorf("17 volumes = %d %s", r.status, r.body)
	}
	if r := s.call("POST", "/v1/sandboxes", s.keyA, volumesBody(map[string]any{"name": "o", "ossfs": map[string]string{"bucket": "b"}, "mountPath": "/o"})); r.status != http.StatusNotImplemented {
		t.Errorf("ossfs = %d %s, want 501", r.status, r.body)
	}

	a := s.create(s.keyA, volumesBody(pvc("d", "data", "/data"), host(allowed, "ok"))).ID
	s.create(s.keyB, volumesBody(pvc("d", "data", "/data")))
	var l api.ListVolumesResponse
	s.call("GET", "/v1/volumes", s.keyA, nil).decode(t, &l)
	if len(l.Items) != 1 || l.Items[0].Name != "data" || len(l.Items[0].InUseBy) != 1 || l.Items[0].InUseBy[0] != a {
		t.Errorf("volumes of t1 = %+v", l.Items)
	}
	if r := s.call("DELETE", "/v1/volumes/data", s.keyA, nil); r.status != 409 || r.errCode(t) != api.CodeVolumeInUse {
		t.Errorf("delete a mounted volume = %d %s", r.status, r.body)
	}
	s.call("DELETE", "/v1/sandboxes/"+a, s.keyA, nil)
	if r := s.call("DELETE", "/v1/volumes/data", s.keyA, nil); r.status != 204 {
		t.Errorf("delete = %d %s", r.status, r.body)
	}
	if r := s.call("DELETE", "/v1/volumes/data", s.keyA, nil); r.status != 404 || r.errCode(t) != api.CodeVolumeNotFound {
		t.Errorf("delete twice = %d %s", r.status, r.body)
	}
	// t2's volume of the same name is untouched.
	s.call("GET", "/v1/volumes", s.keyB, nil).decode(t, &l)
	if len(l.Items) != 1 {
		t.Errorf("volumes of t2 = %+v", l.Items)
	}
	if r := s.call("PUT", "/v1/volumes", s.keyA, nil); r.status != 405 {
		t.Errorf("PUT /v1/volumes = %d", r.status)
	}
}

// TestVolumesOfARuntimeWithoutThem: a runtime that mounts no volumes
// (kubernetes, for now) answers 501, not a silent create without them.
func TestVolumesOfARuntimeWithoutThem(t *testing.T) {
	t.Parallel()
	s := newTSDriver(t, nil, func(d *fakedriver.Driver) driver.Driver { return snapshotless{d} })
	body := volumesBody(map[string]any{"name": "d", "pvc": map[string]any{"claimName": "data"}, "mountPath": "/data"})
	if r := s.call("POST", "/v1/sandboxes", s.keyA, body); r.status != http.StatusNotImplemented || r.errCode(t) != api.CodeVolumeUnsupported {
		t.Errorf("create with a volume = %d %s, want 501", r.status, r.body)
	}
	if r := s.call("GET", "/v1/volumes", s.keyA, nil); r.status != http.StatusNotImplemented {
		t.Errorf("list volumes = %d %s, want 501", r.status, r.body)
	}
}
