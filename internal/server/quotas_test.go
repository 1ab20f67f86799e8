// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/internal/lifecycle"
	"github.com/corral-dev/corral/internal/testutil"
	"github.com/corral-dev/corral/sdk"
)

func (s *ts) setQuota(tenant string, body any) api.QuotaStatus {
	s.t.Helper()
	r := s.call("PUT", "/v1/admin/quotas/"+tenant, s.keyA, body)
	if r.status != http.StatusOK {
		s.t.Fatalf("set quota = %d %s", r.status, r.body)
	}
	var st api.QuotaStatus
	r.decode(s.t, &st)
	return st
}

func (s *ts) state(key, id string) string {
	s.t.Helper()
	var sb api.Sandbox
	s.call("GET", "/v1/sandboxes/"+id, key, nil).decode(s.t, &sb)
	return sb.Status.State
}

func TestQuotaRejects(t *testing.T) {
	t.Parallel()
	s := newTS(t)
	st := s.setQuota("t2", map[string]any{"running": 2, "sandboxes": 3})
	if st.Limits.Running != 2 || st.Limits.Sandboxes != 3 || st.Limits.Policy != "reject" || *st.Overrides.Running != 2 || st.Overrides.CPU != nil {
		t.Fatalf("status = %+v", st)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	events, err := s.sdk(s.keyB).Events(ctx, sdk.EventStreamOptions{Types: []string{api.EventQuotaRefused}})
	if err != nil {
		t.Fatal(err)
	}
	defer events.Close()
	a := s.create(s.keyB, basicCreate()).ID
	s.create(s.keyB, basicCreate())
	r := s.call("POST", "/v1/sandboxes", s.keyB, basicCreate())
	if r.status != http.StatusTooManyRequests || r.errCode(t) != api.CodeQuotaExceeded {
		t.Fatalf("a third running sandbox = %d %s", r.status, r.body)
	}
	if ra, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || ra < 1 {
		t.Errorf("Retry-After = %q", r.header.Get("Retry-After"))
	}
	if r.header.Get(api.HeaderQuotaLimit) != "running" || r.header.Get(api.HeaderQuotaMax) != "2" || r.header.Get(api.HeaderQuotaUsed) != "2" ||
		!strings.Contains(string(r.body), "quota running is 2 and it uses 2") {
		t.Errorf("refusal = %v %s", r.header, r.body)
	}
	if ev := next(t, events); ev.Type != api.EventQuotaRefused || !strings.Contains(string(ev.Data), `"limit":"running"`) {
		t.Errorf("event = %+v", ev)
	}
	// Another tenant is not held back; a paused sandbox frees a running
	// slot but still counts among the sandboxes.
	s.create(s.keyA, basicCreate())
	if r := s.call("POST", "/v1/sandboxes/"+a+"/pause", s.keyB, nil); r.status != http.StatusAccepted {
		t.Fatalf("pause = %d %s", r.status, r.body)
	}
	s.create(s.keyB, basicCreate())
	if r := s.call("POST", "/v1/sandboxes", s.keyB, basicCreate()); r.status != 429 || r.header.Get(api.HeaderQuotaLimit) != "sandboxes" {
		t.Errorf("a fourth sandbox = %d %v %s", r.status, r.header, r.body)
	}
	// Resuming needs a running slot too.
	if r := s.call("POST", "/v1/sandboxes/"+a+"/resume", s.keyB, nil); r.status != 429 || r.header.Get(api.HeaderQuotaLimit) != "running" {
		t.Errorf("resume over the quota = %d %s", r.status, r.body)
	}
	var own api.QuotaStatus
	s.call("GET", "/v1/quota", s.keyB, nil).decode(t, &own)
	if own.Tenant != "t2" || own.Usage.Running != 2 || own.Usage.Sandboxes != 3 || own.Usage.CreatesLastMinute != 3 {
		t.Errorf("own quota = %+v", own)
	}
	// Back to the defaults (none): everything goes.
	if r := s.call("DELETE", "/v1/admin/quotas/t2", s.keyA, nil); r.status != 204 {
		t.Fatalf("delete quota = %d", r.status)
	}
	s.create(s.keyB, basicCreate())
}

func TestQuotaCPUAndMemory(t *testing.T) {
	t.Parallel()
	s := newTS(t)
	s.setQuota("t2", map[string]any{"cpu": "1", "memory": "1Gi"})
	s.create(s.keyB, basicCreate()) // 500m, 512Mi
	s.create(s.keyB, basicCreate())
	r := s.call("POST", "/v1/sandboxes", s.keyB, basicCreate())
	if r.status != 429 || r.header.Get(api.HeaderQuotaLimit) != "cpu" || !strings.Contains(string(r.body), "1000m") {
		t.Errorf("a third = %d %v %s", r.status, r.header, r.body)
	}
	noCPU := basicCreate()
	noCPU["resourceLimits"] = map[string]string{"memory": "64Mi"}
	if r := s.call("POST", "/v1/sandboxes", s.keyB, noCPU); r.status != 400 || !strings.Contains(string(r.body), "resourceLimits.cpu is required") {
		t.Errorf("a create without cpu under a cpu quota = %d %s", r.status, r.body)
	}
}

func TestQuotaCreatesPerMinute(t *testing.T) {
	t.Parallel()
	s := newTS(t)
	s.setQuota("t2", map[string]any{"createsPerMinute": 2})
	s.create(s.keyB, basicCreate())
	s.create(s.keyB, basicCreate())
	r := s.call("POST", "/v1/sandboxes", s.keyB, basicCreate())
	ra, _ := strconv.Atoi(r.header.Get("Retry-After"))
	if r.status != 429 || r.header.Get(api.HeaderQuotaLimit) != "createsPerMinute" || ra < 55 || ra > 60 {
		t.Errorf("a third create in the minute = %d Retry-After %q %s", r.status, r.header.Get("Retry-After"), r.body)
	}
}

// TestQuotaQueue: a queued create succeeds when a slot frees; one that
// finds no room by its deadline gets a 429 saying it waited.
func TestQuotaQueue(t *testing.T) {
	t.Parallel()
	s := newTS(t)
	s.setQuota("t2", map[string]any{"running": 1, "policy": "queue", "queueTimeoutSeconds": 30})
	first := s.create(s.keyB, basicCreate()).ID
	done := make(chan resp, 1)
	go func() { done <- s.call("POST", "/v1/sandboxes", s.keyB, basicCreate()) }()
	testutil.WaitFor(t, 5*time.Second, "the create queued", func() bool {
		var st api.QuotaStatus
		s.call("GET", "/v1/quota", s.keyB, nil).decode(t, &st)
		return st.Usage.Queued == 1
	})
	select {
	case r := <-done:
		t.Fatalf("the queued create answered before a slot freed: %d %s", r.status, r.body)
	case <-time.After(300 * time.Millisecond):
	}
	s.call("DELETE", "/v1/sandboxes/"+first, s.keyB, nil)
	select {
	case r := <-done:
		if r.status != http.StatusAccepted {
			t.Fatalf("queued create = %d %s", r.status, r.body)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the queued create was not let in when the slot freed")
	}
	s.setQuota("t2", map[string]any{"running": 1, "policy": "queue", "queueTimeoutSeconds": 1})
	start := time.Now()
	r := s.call("POST", "/v1/sandboxes", s.keyB, basicCreate())
	if waited := time.Since(start); r.status != 429 || r.errCode(t) != api.CodeQuotaQueueTimeout || waited < time.Second || waited > 5*time.Second {
		t.Errorf("a create that found no room in 1s = %d after %v: %s", r.status, waited, r.body)
	}
	var st api.QuotaStatus
	s.call("GET", "/v1/quota", s.keyB, nil).decode(t, &st)
	if st.Usage.Queued != 0 || st.Usage.Running != 1 {
		t.Errorf("after the timeout: %+v", st.Usage)
	}
}

// TestQuotaQueueIsFair: with the server at capacity, tenant t1's 30
// queued creates hold tenant t2's one back by one freed slot at most.
func TestQuotaQueueIsFair(t *testing.T) {
	t.Parallel()
	s := newTSFull(t, nil, nil, func(c *lifecycle.Config) {
		c.Capacity = 3
		c.Quota.Policy, c.Quota.QueueTimeout = "queue", time.Minute
	})
	var held []string
	for range 3 {
		held = append(held, s.create(s.keyA, basicCreate()).ID)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var aDone atomic.Int32
	var wg sync.WaitGroup
	ca := s.sdk(s.keyA)
	for range 30 {
		wg.Go(func() {
			c, _ := sdk.New(sdk.WithBaseURL(s.url), sdk.WithAPIKey(s.keyA), sdk.WithRetry(sdk.RetryPolicy{Attempts: 1}))
			if _, err := c.CreateSandbox(ctx, api.CreateSandboxRequest{Image: &api.ImageSpec{URI: "fake:ok"}, Timeout: ptr(int64(600)),
				ResourceLimits: map[string]string{"cpu": "100m", "memory": "64Mi"}}, sdk.CreateOptions{}); err == nil {
				aDone.Add(1)
			}
		})
	}
	testutil.WaitFor(t, 10*time.Second, "t1's creates queued", func() bool {
		var st api.QuotaStatus
		s.call("GET", "/v1/admin/quotas/t1", s.keyA, nil).decode(t, &st)
		return st.Usage.Queued == 30
	})
	bDone := make(chan error, 1)
	go func() {
		_, err := s.sdk(s.keyB).CreateSandbox(ctx, api.CreateSandboxRequest{Image: &api.ImageSpec{URI: "fake:ok"}, Timeout: ptr(int64(600)),
			ResourceLimits: map[string]string{"cpu": "100m", "memory": "64Mi"}}, sdk.CreateOptions{})
		bDone <- err
	}()
	testutil.WaitFor(t, 10*time.Second, "t2's create queued", func() bool {
		var st api.QuotaStatus
		s.call("GET", "/v1/quota", s.keyB, nil).decode(t, &st)
		return st.Usage.Queued == 1
	})
	// Free one slot at a time.
	freed := 0
	for _, id := range held {
		if err := ca.DeleteSandbox(ctx, id); err != nil {
			t.Fatal(err)
		}
		freed++
		select {
		case err := <-bDone:
			if err != nil {
				t.Fatalf("t2's create: %v", err)
			}
			if n := aDone.Load(); n > 1 || freed > 2 {
				t.Errorf("t2's create got in after %d freed slots, %d of t1's queued creates first", freed, n)
			}
			cancel()
			wg.Wait()
			return
		case <-time.After(2 * time.Second):
		}
	}
	t.Fatalf("t2's create still waits after %d slots freed (%d of t1's got in)", freed, aDone.Load())
}

func ptr[T any](v T) *T { return &v }

// TestQuotaPauseOldest pauses the tenant's least recently active
// sandbox to make room, and never another tenant's.
func TestQuotaPauseOldest(t *testing.T) {
	t.Parallel()
	s := newTS(t)
	other := s.create(s.keyA, basicCreate()).ID // t1's, and older than all
	s.setQuota("t2", map[string]any{"running": 2, "policy": "pause-oldest"})
	first := s.create(s.keyB, basicCreate()).ID
	second := s.create(s.keyB, basicCreate()).ID
	// A request through the proxy makes the first the recently active one.
	time.Sleep(20 * time.Millisecond)
	if r := s.call("GET", "/v1/sandboxes/"+first+"/proxy/8080/", s.keyB, nil); r.status != 200 {
		t.Fatalf("proxy = %d %s", r.status, r.body)
	}
	third := s.create(s.keyB, basicCreate()).ID
	for id, want := range map[string]string{other: "Running", first: "Running", second: "Paused", third: "Running"} {
		if got := s.state(keyOf(s, id, other), id); got != want {
			t.Errorf("%s is %s, want %s", id, got, want)
		}
	}
	// Resuming the paused one pauses the least recently active again.
	if r := s.call("POST", "/v1/sandboxes/"+second+"/resume", s.keyB, nil); r.status != http.StatusAccepted {
		t.Fatalf("resume = %d %s", r.status, r.body)
	}
	if got := s.state(s.keyB, first); got != "Paused" {
		t.Errorf("after the resume the first is %s, want Paused", got)
	}
	if got := s.state(s.keyA, other); got != "Running" {
		t.Errorf("another tenant's sandbox is %s", got)
	}
}

func keyOf(s *ts, id, other string) string {
	if id == other {
		return s.keyA
	}
	return s.keyB
}

func TestQuotaShutdownAnswersWaiters(t *testing.T) {
	t.Parallel()
	s := newTS(t)
	s.setQuota("t2", map[string]any{"running": 1, "policy": "queue", "queueTimeoutSeconds": 60})
	s.create(s.keyB, basicCreate())
	done := make(chan resp, 1)
	go func() { done <- s.call("POST", "/v1/sandboxes", s.keyB, basicCreate()) }()
	testutil.WaitFor(t, 5*time.Second, "the create queued", func() bool {
		var st api.QuotaStatus
		s.call("GET", "/v1/quota", s.keyB, nil).decode(t, &st)
		return st.Usage.Queued == 1
	})
	s.mgr.StopQueue()
	select {
	case r := <-done:
		if r.status != http.StatusServiceUnavailable || r.errCode(t) != api.CodeQuotaQueueInterrupted || r.header.Get("Retry-After") == "" {
			t.Errorf("a waiter at shutdown = %d %v %s", r.status, r.header, r.body)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the waiter was not answered at shutdown")
	}
	if r := s.call("POST", "/v1/sandboxes", s.keyB, basicCreate()); r.status != 503 {
		t.Errorf("a create over the quota after shutdown began = %d", r.status)
	}
}

func TestQuotaRejectsBadInput(t *testing.T) {
	t.Parallel()
	s := newTS(t)
	for body, want := range map[string]string{
		`{"running":-1}`:              "running",
		`{"sandboxes":1000001}`:       "sandboxes",
		`{"cpu":"lots"}`:              "cpu",
		`{"memory":"12 parsecs"}`:     "memory",
		`{"snapshotBytes":"x"}`:       "snapshotBytes",
		`{"policy":"drop"}`:           "policy",
		`{"queueTimeoutSeconds":601}`: "queueTimeoutSeconds",
		`{"queueTimeoutSeconds":-1}`:  "queueTimeoutSeconds",
		`{"running":"2"}`:             "",
		`{"burst":2}`:                 "burst",
		`[]`:                          "",
		``:                            "",
		`{"running":1} {"running":2}`: "",
	} {
		r := s.call("PUT", "/v1/admin/quotas/t2", s.keyA, body)
		if r.status != 400 || !strings.Contains(string(r.body), want) {
			t.Errorf("%s = %d %s", body, r.status, r.body)
		}
	}
	for _, tenant := range []string{"T2", "-x", strings.Repeat("a", 64)} {
		if r := s.call("PUT", "/v1/admin/quotas/"+tenant, s.keyA, `{}`); r.status != 400 {
			t.Errorf("tenant %q = %d", tenant, r.status)
		}
	}
	if r := s.call("PUT", "/v1/admin/quotas/t2", s.keyB, `{"running":100}`); r.status != 403 {
		t.Errorf("a tenant setting its own quota = %d", r.status)
	}
	if r := s.call("GET", "/v1/admin/quotas", s.keyB, nil); r.status != 403 {
		t.Errorf("a tenant listing quotas = %d", r.status)
	}
	var st api.QuotaStatus
	s.call("GET", "/v1/admin/quotas/t2", s.keyA, nil).decode(t, &st)
	if st.Overrides != (api.QuotaRequest{}) || st.Limits.Running != 0 {
		t.Errorf("stored after bad input: %+v", st)
	}
	var l api.QuotaStatusList
	s.setQuota("t3", map[string]any{"snapshots": 1})
	s.call("GET", "/v1/admin/quotas", s.keyA, nil).decode(t, &l)
	if len(l.Items) != 1 || l.Items[0].Tenant != "t3" || l.Items[0].Limits.Snapshots != 1 {
		t.Errorf("list = %+v", l.Items)
	}
}

// TestQuotaSnapshots: a tenant's snapshot quota replaces the server's.
func TestQuotaSnapshots(t *testing.T) {
	t.Parallel()
	s := newTS(t)
	s.setQuota("t2", map[string]any{"snapshots": 1})
	id := s.create(s.keyB, basicCreate()).ID
	if r := s.call("POST", "/v1/sandboxes/"+id+"/snapshots", s.keyB, map[string]string{"name": "a"}); r.status != 202 {
		t.Fatalf("first snapshot = %d %s", r.status, r.body)
	}
	if r := s.call("POST", "/v1/sandboxes/"+id+"/snapshots", s.keyB, map[string]string{"name": "b"}); r.status != 429 || r.errCode(t) != api.CodeSnapshotQuota {
		t.Errorf("second snapshot = %d %s", r.status, r.body)
	}
}

// A tenant's volumeBytes bounds the sizes of its named volumes: a create
// making one past it is a 429 naming the quota (nothing made), one
// mounting a volume it already has needs nothing, one of no size is a
// 400; the quota shows the use; a removed volume frees its bytes.
func TestQuotaVolumeBytes(t *testing.T) {
	t.Parallel()
	s := newTS(t)
	if r := s.call("PUT", "/v1/admin/quotas/t2", s.keyA, map[string]any{"volumeBytes": "lots"}); r.status != 400 {
		t.Errorf("volumeBytes lots = %d %s", r.status, r.body)
	}
	st := s.setQuota("t2", map[string]any{"volumeBytes": "100Mi"})
	if st.Limits.VolumeBytes != "100Mi" {
		t.Fatalf("status = %+v", st)
	}
	withVolume := func(claim, size string) map[string]any {
		b := basicCreate()
		pvc := map[string]any{"claimName": claim}
		if size != "" {
			pvc["storage"] = size
		}
		b["volumes"] = []map[string]any{{"name": "v", "pvc": pvc, "mountPath": "/data"}}
		return b
	}
	a := s.create(s.keyB, withVolume("a", "60Mi")).ID
	if r := s.call("POST", "/v1/sandboxes", s.keyB, withVolume("b", "60Mi")); r.status != http.StatusTooManyRequests ||
		r.errCode(t) != api.CodeQuotaExceeded || !strings.Contains(string(r.body), "volumeBytes") {
		t.Errorf("a volume past the quota = %d %s", r.status, r.body)
	}
	if r := s.call("POST", "/v1/sandboxes", s.keyB, withVolume("c", "")); r.status != 400 || !strings.Contains(string(r.body), "pvc.storage is required") {
		t.Errorf("a volume of no size = %d %s", r.status, r.body)
	}
	again := s.create(s.keyB, withVolume("a", "60Mi")).ID
	var own api.QuotaStatus
	s.call("GET", "/v1/quota", s.keyB, nil).decode(t, &own)
	if own.Usage.VolumeBytes != "60Mi" {
		t.Errorf("usage = %+v", own.Usage)
	}
	var vols api.ListVolumesResponse
	s.call("GET", "/v1/volumes", s.keyB, nil).decode(t, &vols)
	if len(vols.Items) != 1 {
		t.Errorf("volumes = %+v (the refused create made one?)", vols.Items)
	}
	for _, id := range []string{a, again} {
		if r := s.call("DELETE", "/v1/sandboxes/"+id, s.keyB, nil); r.status != 204 {
			t.Fatalf("delete = %d", r.status)
		}
	}
	if r := s.call("DELETE", "/v1/volumes/a", s.keyB, nil); r.status != 204 {
		t.Fatalf("remove volume a = %d %s", r.status, r.body)
	}
	s.create(s.keyB, withVolume("b", "60Mi"))
	// The other tenant is not bound by t2's quota.
	s.create(s.keyA, withVolume("b", "200Mi"))
}
