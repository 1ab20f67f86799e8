// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corral-dev/corral/errdefs"
	"github.com/corral-dev/corral/errdefs/errhttp"
	"github.com/corral-dev/corral/internal/driver"
	"github.com/corral-dev/corral/internal/driver/fakedriver"
	"github.com/corral-dev/corral/internal/testutil"
)

// backendText stands for what an engine or a cluster says: paths, names,
// addresses. None of it may reach a response body or a sandbox's status.
const backendText = "/var/lib/docker/overlay2/3f9c engine-secret 10.0.0.7"

// talkative is the fake runtime failing every operation with kind and
// its own words, as a driver does when it wraps an engine's error.
type talkative struct {
	*fakedriver.Driver
	mu   sync.Mutex
	kind error // nil: operations succeed
}

func (d *talkative) fail(op string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.kind == nil {
		return nil
	}
	return fmt.Errorf("%s: %w: %w", op, d.kind, fmt.Errorf("engine answered: %s", backendText))
}

func (d *talkative) set(kind error) { d.mu.Lock(); d.kind = kind; d.mu.Unlock() }

func (d *talkative) Create(ctx context.Context, spec driver.Spec) (*driver.Handle, error) {
	if err := d.fail("create"); err != nil {
		return nil, err
	}
	return d.Driver.Create(ctx, spec)
}

func (d *talkative) Pause(ctx context.Context, id string) error {
	if err := d.fail("pause"); err != nil {
		return err
	}
	return d.Driver.Pause(ctx, id)
}

func (d *talkative) Endpoint(ctx context.Context, id string, port int) (netip.AddrPort, error) {
	if err := d.fail("endpoint"); err != nil {
		return netip.AddrPort{}, err
	}
	return d.Driver.Endpoint(ctx, id, port)
}

func (d *talkative) Destroy(ctx context.Context, id string) error {
	if err := d.fail("destroy"); err != nil {
		return err
	}
	return d.Driver.Destroy(ctx, id)
}

func (d *talkative) Snapshot(ctx context.Context, id, snapshotID string) (*driver.SnapshotRef, error) {
	if err := d.fail("snapshot"); err != nil {
		return nil, err
	}
	return d.Driver.Snapshot(ctx, id, snapshotID)
}

// Whatever kind a runtime fails with, the answer has a status the route's
// contract lists (or 503), the server's code and message, and neither the
// body nor any status the API reports later repeats the runtime's words.
// A runtime that refuses this server, or is full, is unavailable to users;
// a refusal no user could cause is the server's failure.
func TestRuntimeTextNeverReachesUsers(t *testing.T) {
	t.Parallel()
	var drv *talkative
	s := newTSDriver(t, nil, func(d *fakedriver.Driver) driver.Driver { drv = &talkative{Driver: d}; return drv })
	clean := func(what string, r resp) {
		t.Helper()
		if strings.Contains(string(r.body), "engine") || strings.Contains(string(r.body), "/var/lib") {
			t.Errorf("%s: the runtime's words reached the user: %d %s", what, r.status, r.body)
		}
	}
	type statuses struct{ create, pause, endpoint, delete int }
	for _, tc := range []struct {
		kind error
		want statuses
	}{
		{errdefs.ErrNotFound, statuses{500, 404, 404, 404}},
		{errdefs.ErrAlreadyExists, statuses{409, 500, 500, 500}},
		{errdefs.ErrInvalidArgument, statuses{400, 500, 400, 500}},
		{errdefs.ErrFailedPrecondition, statuses{409, 409, 500, 409}},
		{errdefs.ErrUnavailable, statuses{503, 503, 503, 503}},
		{errdefs.ErrNotImplemented, statuses{409, 409, 500, 409}},
		{errdefs.ErrPermissionDenied, statuses{503, 503, 503, 503}},
		{errdefs.ErrUnauthenticated, statuses{503, 503, 503, 503}},
		{errdefs.ErrResourceExhausted, statuses{503, 503, 503, 503}},
	} {
		kind := tc.kind
		t.Run(errhttp.KindName(kind), func(t *testing.T) {
			drv.set(kind)
			r := s.call("POST", "/v1/sandboxes", s.keyA, basicCreate())
			clean("create", r)
			if r.status != tc.want.create || r.errCode(t) != "SANDBOX::START_FAILED" {
				t.Errorf("create = %d %s, want %d", r.status, r.body, tc.want.create)
			}
			list := s.call("GET", "/v1/sandboxes?state=Failed", s.keyA, nil)
			clean("the failed sandbox's status", list)

			drv.set(nil)
			id := s.create(s.keyA, basicCreate()).ID
			testutil.WaitFor(t, 10*time.Second, "the sandbox to run", func() bool {
				return strings.Contains(string(s.call("GET", "/v1/sandboxes/"+id, s.keyA, nil).body), `"Running"`)
			})
			drv.set(kind)
			for _, c := range []struct {
				method, path string
				want         int
			}{
				{"POST", "/v1/sandboxes/" + id + "/pause", tc.want.pause},
				{"GET", "/v1/sandboxes/" + id + "/endpoints/8080", tc.want.endpoint},
				{"DELETE", "/v1/sandboxes/" + id, tc.want.delete},
			} {
				r := s.call(c.method, c.path, s.keyA, nil)
				clean(c.method+" "+c.path, r)
				if r.status != c.want || r.errCode(t) == "" {
					t.Errorf("%s %s = %d %s, want %d", c.method, c.path, r.status, r.body, c.want)
				}
				if k := r.header.Get(errhttp.HeaderKind); (r.status == 500) != (k == "") {
					t.Errorf("%s %s = %d with %s %q", c.method, c.path, r.status, errhttp.HeaderKind, k)
				}
			}
			clean("the sandbox's status", s.call("GET", "/v1/sandboxes/"+id, s.keyA, nil))
			drv.set(nil)
			if r := s.call("DELETE", "/v1/sandboxes/"+id, s.keyA, nil); r.status != http.StatusNoContent {
				t.Errorf("delete once the runtime answers = %d %s", r.status, r.body)
			}
		})
	}
}
