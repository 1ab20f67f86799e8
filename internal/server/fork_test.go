// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/errdefs"
	"github.com/corral-dev/corral/internal/driver"
	"github.com/corral-dev/corral/internal/driver/fakedriver"
)

// failingRestores is the fake driver failing every restore after the
// first ok ones.
type failingRestores struct {
	*fakedriver.Driver
	mu sync.Mutex
	ok int
}

func (f *failingRestores) Create(ctx context.Context, spec driver.Spec) (*driver.Handle, error) {
	if spec.Snapshot != nil {
		f.mu.Lock()
		f.ok--
		fail := f.ok < 0
		f.mu.Unlock()
		if fail {
			return nil, fmt.Errorf("the fake runtime was told to fail a restore: %w", errdefs.ErrUnavailable)
		}
	}
	return f.Driver.Create(ctx, spec)
}

func (s *ts) sandboxCount(key string) int {
	s.t.Helper()
	var l api.ListSandboxesResponse
	s.call("GET", "/v1/sandboxes?pageSize=200", key, nil).decode(s.t, &l)
	return l.Pagination.TotalItems
}

func TestForkOverHTTP(t *testing.T) {
	t.Parallel()
	var drv *failingRestores
	s := newTSDriver(t, nil, func(d *fakedriver.Driver) driver.Driver { drv = &failingRestores{Driver: d, ok: 1 << 30}; return drv })
	body := basicCreate()
	body["metadata"] = map[string]string{"app": "web"}
	id := s.create(s.keyA, body).ID

	r := s.call("POST", "/v1/sandboxes/"+id+"/fork", s.keyA, map[string]any{"count": 3, "env": map[string]string{"ROLE": "child"}})
	if r.status != http.StatusCreated {
		t.Fatalf("fork = %d %s", r.status, r.body)
	}
	var res api.ForkResponse
	r.decode(t, &res)
	seen := map[string]bool{id: true}
	for _, sb := range res.Sandboxes {
		if seen[sb.ID] || sb.Status.State != api.StateRunning || sb.Metadata["app"] != "web" || sb.SnapshotID != res.SnapshotID {
			t.Errorf("fork %+v: want a new Running sandbox with the source's metadata, from snapshot %s", sb, res.SnapshotID)
		}
		seen[sb.ID] = true
	}
	if len(res.Sandboxes) != 3 || res.SnapshotID == "" {
		t.Fatalf("fork = %s", r.body)
	}
	if r := s.call("GET", "/v1/snapshots/"+res.SnapshotID, s.keyA, nil); r.status != 404 {
		t.Errorf("the fork's snapshot is still listed: %d %s", r.status, r.body)
	}
	r = s.call("POST", "/v1/sandboxes/"+id+"/fork", s.keyA, map[string]any{"metadata": map[string]string{"role": "child"}})
	res = api.ForkResponse{}
	r.decode(t, &res)
	if r.status != http.StatusCreated || len(res.Sandboxes) != 1 || res.Sandboxes[0].Metadata["role"] != "child" || res.Sandboxes[0].Metadata["app"] != "" {
		t.Errorf("fork with metadata = %d %s", r.status, r.body)
	}

	for _, tc := range []struct {
		name string
		body any
	}{
		{"too many", map[string]any{"count": 101}},
		{"negative", map[string]any{"count": -1}},
		{"short timeout", map[string]any{"timeout": 5}},
		{"bad env", map[string]any{"env": map[string]string{"A=B": "x"}}},
		{"bad metadata", map[string]any{"metadata": map[string]string{"": "x"}}},
		{"not json", "{"},
	} {
		if r := s.call("POST", "/v1/sandboxes/"+id+"/fork", s.keyA, tc.body); r.status != 400 {
			t.Errorf("%s: fork = %d %s, want 400", tc.name, r.status, r.body)
		}
	}
	if r := s.call("POST", "/v1/sandboxes/"+id+"/fork", s.keyB, nil); r.status != 404 {
		t.Errorf("another tenant's fork = %d %s", r.status, r.body)
	}
	if r := s.call("POST", "/v1/sandboxes/nope/fork", s.keyA, nil); r.status != 404 {
		t.Errorf("fork of an unknown sandbox = %d %s", r.status, r.body)
	}
	if r := s.call("GET", "/v1/sandboxes/"+id+"/fork", s.keyA, nil); r.status != 405 {
		t.Errorf("GET fork = %d %s", r.status, r.body)
	}

	// All or nothing: one restore of five fails, and none is left.
	before := s.sandboxCount(s.keyA)
	drv.mu.Lock()
	drv.ok = 4
	drv.mu.Unlock()
	r = s.call("POST", "/v1/sandboxes/"+id+"/fork", s.keyA, map[string]any{"count": 5})
	if r.status != http.StatusServiceUnavailable {
		t.Errorf("fork with a failing restore = %d %s, want 503", r.status, r.body)
	}
	var running int
	var l api.ListSandboxesResponse
	s.call("GET", "/v1/sandboxes?pageSize=200&state=Running", s.keyA, nil).decode(t, &l)
	running = l.Pagination.TotalItems
	if running != before {
		t.Errorf("after a failed fork, %d sandboxes run, want %d", running, before)
	}
	var snaps api.ListSnapshotsResponse
	s.call("GET", "/v1/snapshots", s.keyA, nil).decode(t, &snaps)
	if snaps.Pagination.TotalItems != 0 {
		t.Errorf("a fork left snapshots: %+v", snaps.Items)
	}

	s.call("POST", "/v1/sandboxes/"+id+"/pause", s.keyA, nil)
	if r := s.call("POST", "/v1/sandboxes/"+id+"/fork", s.keyA, nil); r.status != 409 {
		t.Errorf("fork of a paused sandbox = %d %s", r.status, r.body)
	}
}

// snapshotless hides the fake driver's snapshots: a runtime without them.
type snapshotless struct{ driver.Driver }

// TestSnapshotsOfARuntimeWithoutThem: snapshots and forks answer 501 with
// the reason, not a 409 that suggests waiting would help.
func TestSnapshotsOfARuntimeWithoutThem(t *testing.T) {
	t.Parallel()
	s := newTSDriver(t, nil, func(d *fakedriver.Driver) driver.Driver { return snapshotless{d} })
	id := s.create(s.keyA, basicCreate()).ID
	for _, path := range []string{"/v1/sandboxes/" + id + "/snapshots", "/v1/sandboxes/" + id + "/fork"} {
		r := s.call("POST", path, s.keyA, nil)
		if r.status != http.StatusNotImplemented || r.errCode(t) != api.CodeAPINotSupported || !strings.Contains(string(r.body), "cannot take snapshots") {
			t.Errorf("POST %s = %d %s, want 501 with the reason", path, r.status, r.body)
		}
	}
	if r := s.call("POST", "/v1/sandboxes", s.keyA, map[string]any{"snapshotId": "x", "timeout": 600}); r.status != http.StatusNotImplemented {
		t.Errorf("restore = %d %s, want 501", r.status, r.body)
	}
}
