// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/internal/lifecycle"
)

func listAll() lifecycle.Filter { return lifecycle.Filter{PageSize: 1000} }

// TestTenantIsolation: tenant B can neither see nor touch A's sandbox; every
// attempt looks exactly like a sandbox that does not exist.
func TestTenantIsolation(t *testing.T) {
	t.Parallel()
	s := newTS(t)
	a := s.create(s.keyA, basicCreate()).ID
	future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	attempts := []struct {
		method, path string
		body         any
	}{
		{"GET", "/v1/sandboxes/" + a, nil},
		{"PATCH", "/v1/sandboxes/" + a + "/metadata", `{"x":"y"}`},
		{"POST", "/v1/sandboxes/" + a + "/pause", nil},
		{"POST", "/v1/sandboxes/" + a + "/resume", nil},
		{"POST", "/v1/sandboxes/" + a + "/renew-expiration", map[string]string{"expiresAt": future}},
		{"GET", "/v1/sandboxes/" + a + "/endpoints/44772", nil},
		{"POST", "/v1/sandboxes/" + a + "/snapshots", nil},
		{"GET", "/v1/sandboxes/" + a + "/proxy/8080/", nil},
		{"DELETE", "/v1/sandboxes/" + a, nil},
	}
	for _, at := range attempts {
		r := s.call(at.method, at.path, s.keyB, at.body)
		if r.status != http.StatusNotFound {
			t.Errorf("tenant B %s %s = %d %s, want 404", at.method, at.path, r.status, r.body)
		}
	}
	var list api.ListSandboxesResponse
	s.call("GET", "/v1/sandboxes", s.keyB, nil).decode(t, &list)
	if list.Pagination.TotalItems != 0 {
		t.Errorf("tenant B lists %d sandboxes", list.Pagination.TotalItems)
	}
	var sb api.Sandbox
	s.call("GET", "/v1/sandboxes/"+a, s.keyA, nil).decode(t, &sb)
	if sb.Status.State != api.StateRunning || len(sb.Metadata) != 0 {
		t.Errorf("A's sandbox was changed by B: %+v", sb)
	}
	// B cannot reach A's sandbox through the proxy with its own sandbox's token either.
	bID := s.create(s.keyB, basicCreate()).ID
	var ep api.Endpoint
	s.call("GET", "/v1/sandboxes/"+bID+"/endpoints/44772", s.keyB, nil).decode(t, &ep)
	r := s.call("GET", "/v1/sandboxes/"+a+"/proxy/44772/ping", "", nil, api.HeaderExecdToken, ep.Headers[api.HeaderExecdToken])
	if r.status != http.StatusUnauthorized {
		t.Errorf("B's token on A's proxy = %d %s", r.status, r.body)
	}
	if strings.Contains(string(r.body), a) {
		t.Errorf("the refusal names the sandbox: %s", r.body)
	}
}

func TestAdminKeys(t *testing.T) {
	t.Parallel()
	s := newTS(t)
	if r := s.call("GET", "/v1/admin/keys", s.keyB, nil); r.status != http.StatusForbidden {
		t.Errorf("non-admin lists keys = %d", r.status)
	}
	if r := s.call("GET", "/metrics", s.keyB, nil); r.status != http.StatusForbidden {
		t.Errorf("non-admin reads metrics = %d", r.status)
	}
	r := s.call("POST", "/v1/admin/keys", s.keyA, map[string]any{"tenant": "t3", "name": "ci"})
	var k api.APIKey
	r.decode(t, &k)
	if r.status != 201 || !strings.HasPrefix(k.Key, "ck_") || k.Tenant != "t3" {
		t.Fatalf("create key = %d %s", r.status, r.body)
	}
	if r := s.call("GET", "/v1/sandboxes", k.Key, nil); r.status != 200 {
		t.Fatalf("new key = %d", r.status)
	}
	for _, bad := range []string{`{"tenant":""}`, `{"tenant":"Has Space"}`, `{"tenant":"-x"}`, `nope`} {
		if r := s.call("POST", "/v1/admin/keys", s.keyA, bad); r.status != 400 {
			t.Errorf("create key %s = %d %s", bad, r.status, r.body)
		}
	}
	var list api.ListAPIKeysResponse
	s.call("GET", "/v1/admin/keys", s.keyA, nil).decode(t, &list)
	if len(list.Items) != 3 {
		t.Fatalf("keys = %d", len(list.Items))
	}
	for _, it := range list.Items {
		if it.Key != "" {
			t.Errorf("list leaks a key: %+v", it)
		}
	}
	if r := s.call("DELETE", "/v1/admin/keys/"+k.ID, s.keyA, nil); r.status != 204 {
		t.Fatalf("revoke = %d %s", r.status, r.body)
	}
	if r := s.call("GET", "/v1/sandboxes", k.Key, nil); r.status != 401 {
		t.Errorf("revoked key still works: %d", r.status)
	}
	if r := s.call("DELETE", "/v1/admin/keys/key_nope", s.keyA, nil); r.status != 404 {
		t.Errorf("revoke unknown = %d", r.status)
	}
	var self string
	for _, it := range list.Items {
		if it.Tenant == "t1" {
			self = it.ID
		}
	}
	if r := s.call("DELETE", "/v1/admin/keys/"+self, s.keyA, nil); r.status != 409 {
		t.Errorf("revoking the last admin key = %d %s", r.status, r.body)
	}
}

func TestMetrics(t *testing.T) {
	t.Parallel()
	s := newTS(t)
	s.create(s.keyA, basicCreate())
	s.call("GET", "/v1/sandboxes/nope", s.keyA, nil)
	r := s.call("GET", "/metrics", s.keyA, nil)
	body := string(r.body)
	for _, want := range []string{
		`corral_sandboxes{state="Running"} 1`,
		// The fake runtime names no tier: its name stands for it.
		`corral_sandboxes_by_isolation{isolation="fake"} 1`,
		`corral_http_requests_total{code="202",route="POST /v1/sandboxes"} 1`,
		`corral_http_requests_total{code="404",route="GET /v1/sandboxes/{id}"} 1`,
		`corral_sandbox_create_duration_seconds_count{driver="fake",outcome="ok"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}
