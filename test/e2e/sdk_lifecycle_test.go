// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"errors"
	"testing"
	"time"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/sdk"
)

// wantKind fails the test unless err is of the given kind and says so in
// one sentence with the server's request id.
func wantKind(t *testing.T, what string, err, kind error) {
	t.Helper()
	if !errors.Is(err, kind) {
		t.Errorf("%s: err = %v, want kind %v", what, err, kind)
		return
	}
	var ae *sdk.APIError
	if errors.As(err, &ae) && ae.RequestID == "" {
		t.Errorf("%s: error %q has no request id", what, err)
	}
}

// TestSDKLifecycle calls every lifecycle method of the SDK against a real
// server, each with a success and a failure, and checks that error kinds
// survive the wire.
func TestSDKLifecycle(t *testing.T) {
	t.Parallel()
	s := startServer(t, t.TempDir(), "--runtime", "fake")
	c := s.client(t)
	cx := ctx(t)

	if err := c.Health(cx); err != nil {
		t.Fatalf("health: %v", err)
	}
	stranger, err := sdk.New(sdk.WithBaseURL(s.url), sdk.WithAPIKey("ck_not-a-key"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = stranger.GetSandbox(cx, "x")
	wantKind(t, "unknown key", err, sdk.ErrUnauthenticated)

	// Create: with and without waiting, with a caller's idempotency key,
	// and refused for bad input.
	hour := int64(3600)
	req := fakeCreate(&hour)
	req.Metadata = map[string]string{"team": "a"}
	first, err := c.CreateSandbox(cx, req, sdk.CreateOptions{Wait: true, IdempotencyKey: "sdk-test-1"})
	if err != nil || first.Status.State != api.StateRunning {
		t.Fatalf("create --wait = %+v, %v", first, err)
	}
	again, err := c.CreateSandbox(cx, req, sdk.CreateOptions{IdempotencyKey: "sdk-test-1"})
	if err != nil || again.ID != first.ID {
		t.Errorf("replayed idempotency key made %+v (%v), want %s", again, err, first.ID)
	}
	_, err = c.CreateSandbox(cx, api.CreateSandboxRequest{}, sdk.CreateOptions{})
	wantKind(t, "create without an image", err, sdk.ErrInvalidArgument)
	bad := fakeCreate(nil)
	bad.ResourceLimits = map[string]string{"cpu": "lots"}
	_, err = c.CreateSandbox(cx, bad, sdk.CreateOptions{})
	wantKind(t, "create with a bad cpu", err, sdk.ErrInvalidArgument)
	ids := []string{first.ID}
	for i := 0; i < 4; i++ {
		r := fakeCreate(nil)
		r.Metadata = map[string]string{"team": "b"}
		sb, err := c.CreateSandbox(cx, r, sdk.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, sb.ID)
	}

	// Get, list, and the paginating iterator with filters.
	got, err := c.GetSandbox(cx, first.ID)
	if err != nil || got.Metadata["team"] != "a" {
		t.Errorf("get = %+v, %v", got, err)
	}
	_, err = c.GetSandbox(cx, "no-such-sandbox")
	wantKind(t, "get a missing sandbox", err, sdk.ErrNotFound)
	page, err := c.ListSandboxes(cx, sdk.ListOptions{PageSize: 2})
	if err != nil || len(page.Items) != 2 || !page.Pagination.HasNextPage || page.Pagination.TotalItems != 5 {
		t.Errorf("first page = %+v, %v", page, err)
	}
	_, err = c.ListSandboxes(cx, sdk.ListOptions{PageSize: 100000})
	wantKind(t, "list with a huge page", err, sdk.ErrInvalidArgument)
	seen := map[string]bool{}
	for sb, err := range c.Sandboxes(cx, sdk.ListOptions{PageSize: 2, Metadata: map[string]string{"team": "b"}, States: []string{api.StateRunning}}) {
		if err != nil {
			t.Fatalf("iterator: %v", err)
		}
		if seen[sb.ID] || sb.Metadata["team"] != "b" {
			t.Errorf("iterator gave %s twice or outside the filter (%v)", sb.ID, sb.Metadata)
		}
		seen[sb.ID] = true
	}
	if len(seen) != 4 {
		t.Errorf("iterator found %d sandboxes of team b, want 4", len(seen))
	}
	for _, err := range c.Sandboxes(cx, sdk.ListOptions{States: []string{"Sleeping"}}) {
		wantKind(t, "iterate with a bad state", err, sdk.ErrInvalidArgument)
	}

	// Metadata patch.
	v := "c"
	patched, err := c.PatchMetadata(cx, first.ID, map[string]*string{"team": nil, "owner": &v})
	if err != nil || patched.Metadata["owner"] != "c" || patched.Metadata["team"] != "" {
		t.Errorf("patch = %+v, %v", patched, err)
	}
	_, err = c.PatchMetadata(cx, first.ID, map[string]*string{"bad key!": &v})
	wantKind(t, "patch a bad key", err, sdk.ErrInvalidArgument)

	// Pause and resume, each refused in the wrong state.
	if err := c.PauseSandbox(cx, first.ID); err != nil {
		t.Fatalf("pause: %v", err)
	}
	if sb, _ := c.GetSandbox(cx, first.ID); sb == nil || sb.Status.State != api.StatePaused {
		t.Errorf("after pause: %+v", sb)
	}
	wantKind(t, "pause a paused sandbox", c.PauseSandbox(cx, first.ID), sdk.ErrFailedPrecondition)
	if err := c.ResumeSandbox(cx, first.ID); err != nil {
		t.Fatalf("resume: %v", err)
	}
	wantKind(t, "resume a running sandbox", c.ResumeSandbox(cx, first.ID), sdk.ErrFailedPrecondition)

	// Renew.
	at := time.Now().Add(2 * time.Hour).Truncate(time.Second)
	exp, err := c.RenewSandbox(cx, first.ID, at)
	if err != nil || !exp.Equal(at) {
		t.Errorf("renew = %v, %v; want %v", exp, err, at)
	}
	_, err = c.RenewSandbox(cx, first.ID, time.Now().Add(-time.Hour))
	wantKind(t, "renew into the past", err, sdk.ErrInvalidArgument)

	// Endpoints.
	ep, err := c.GetEndpoint(cx, first.ID, 8080, false)
	if err != nil || ep.Endpoint == "" {
		t.Errorf("endpoint = %+v, %v", ep, err)
	}
	_, err = c.GetEndpoint(cx, first.ID, 70000, false)
	wantKind(t, "endpoint of port 70000", err, sdk.ErrInvalidArgument)

	// Snapshots.
	snap, err := c.CreateSnapshot(cx, first.ID, "before")
	if err != nil || snap.SandboxID != first.ID {
		t.Fatalf("snapshot = %+v, %v", snap, err)
	}
	if got, err := c.GetSnapshot(cx, snap.ID); err != nil || got.Name != "before" {
		t.Errorf("get snapshot = %+v, %v", got, err)
	}
	if list, err := c.ListSnapshots(cx, sdk.ListSnapshotsOptions{SandboxID: first.ID}); err != nil || len(list.Items) != 1 {
		t.Errorf("list snapshots = %+v, %v", list, err)
	}
	_, err = c.CreateSnapshot(cx, "no-such-sandbox", "")
	wantKind(t, "snapshot a missing sandbox", err, sdk.ErrNotFound)
	_, err = c.GetSnapshot(cx, "no-such-snapshot")
	wantKind(t, "get a missing snapshot", err, sdk.ErrNotFound)
	testutilWaitSnapshot(t, c, snap.ID)
	if err := c.DeleteSnapshot(cx, snap.ID); err != nil {
		t.Errorf("delete snapshot: %v", err)
	}
	wantKind(t, "delete a deleted snapshot", c.DeleteSnapshot(cx, snap.ID), sdk.ErrNotFound)

	// API keys: an ordinary key cannot manage keys.
	k, err := c.CreateAPIKey(cx, api.CreateAPIKeyRequest{Tenant: "other", Name: "ci"})
	if err != nil || k.Key == "" {
		t.Fatalf("create key = %+v, %v", k, err)
	}
	keys, err := c.ListAPIKeys(cx)
	if err != nil || len(keys) < 2 {
		t.Errorf("list keys = %v, %v", keys, err)
	}
	tenant, err := sdk.New(sdk.WithBaseURL(s.url), sdk.WithAPIKey(k.Key))
	if err != nil {
		t.Fatal(err)
	}
	_, err = tenant.ListAPIKeys(cx)
	wantKind(t, "list keys as a tenant", err, sdk.ErrPermissionDenied)
	_, err = tenant.GetSandbox(cx, first.ID)
	wantKind(t, "another tenant's sandbox", err, sdk.ErrNotFound)
	if err := c.RevokeAPIKey(cx, k.ID); err != nil {
		t.Errorf("revoke: %v", err)
	}
	_, err = tenant.GetSandbox(cx, first.ID)
	wantKind(t, "a revoked key", err, sdk.ErrUnauthenticated)
	wantKind(t, "revoke a missing key", c.RevokeAPIKey(cx, "no-such-key"), sdk.ErrNotFound)

	// Delete.
	for _, id := range ids {
		if err := c.DeleteSandbox(cx, id); err != nil {
			t.Errorf("delete %s: %v", id, err)
		}
	}
	wantKind(t, "delete a deleted sandbox", c.DeleteSandbox(cx, first.ID), sdk.ErrNotFound)
	err = c.WaitRunning(cx, first.ID)
	wantKind(t, "wait for a deleted sandbox", err, sdk.ErrNotFound)
}

// testutilWaitSnapshot waits for a snapshot to leave Creating.
func testutilWaitSnapshot(t *testing.T, c *sdk.Client, id string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		sn, err := c.GetSnapshot(ctx(t), id)
		if err != nil {
			t.Fatal(err)
		}
		if sn.Status.State != api.SnapshotCreating {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("snapshot %s stayed Creating", id)
}
