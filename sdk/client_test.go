// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package sdk_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/sdk"
)

// failing is a server that fails on purpose: the first fails requests get
// status (with Retry-After when set), the rest succeed with ok.
type failing struct {
	mu         sync.Mutex
	fails      int
	status     int
	retryAfter string
	ok         func(w http.ResponseWriter, r *http.Request)
	seen       []*http.Request
	at         []time.Time
}

func (f *failing) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.seen = append(f.seen, r)
	f.at = append(f.at, time.Now())
	fail := len(f.seen) <= f.fails
	f.mu.Unlock()
	if fail {
		if f.retryAfter != "" {
			w.Header().Set("Retry-After", f.retryAfter)
		}
		w.Header().Set(api.HeaderRequestID, "req-42")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(f.status)
		_, _ = w.Write([]byte(`{"code":"SANDBOX::UNAVAILABLE","message":"try again later"}`))
		return
	}
	f.ok(w, r)
}

func (f *failing) requests() []*http.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*http.Request(nil), f.seen...)
}

func sandboxJSON(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"id":"sb1","image":{"uri":"x"},"status":{"state":"Running"},"entrypoint":["sh"],"createdAt":"2026-01-01T00:00:00Z"}`))
}

func fastRetry() sdk.Option {
	return sdk.WithRetry(sdk.RetryPolicy{Attempts: 4, Initial: time.Millisecond, Max: 5 * time.Millisecond})
}

func newClient(t *testing.T, h http.Handler, opts ...sdk.Option) *sdk.Client {
	t.Helper()
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	c, err := sdk.New(append([]sdk.Option{sdk.WithBaseURL(ts.URL), sdk.WithAPIKey("k")}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestIdempotentCallsRetryAndHonourRetryAfter(t *testing.T) {
	t.Parallel()
	f := &failing{fails: 2, status: http.StatusServiceUnavailable, retryAfter: "1", ok: sandboxJSON}
	c := newClient(t, f, fastRetry())
	sb, err := c.GetSandbox(t.Context(), "sb1")
	if err != nil || sb.ID != "sb1" {
		t.Fatalf("GetSandbox after two 503s = %+v, %v", sb, err)
	}
	if n := len(f.requests()); n != 3 {
		t.Fatalf("requests = %d, want 3", n)
	}
	// The backoff policy alone would wait milliseconds; Retry-After asks
	// for a second between tries.
	for i := 1; i < 3; i++ {
		if gap := f.at[i].Sub(f.at[i-1]); gap < 900*time.Millisecond {
			t.Errorf("retry %d came after %v, want Retry-After's 1s", i, gap)
		}
	}
}

func TestRetriesGiveUpWithTheLastError(t *testing.T) {
	t.Parallel()
	f := &failing{fails: 100, status: http.StatusServiceUnavailable, ok: sandboxJSON}
	c := newClient(t, f, fastRetry())
	_, err := c.GetSandbox(t.Context(), "sb1")
	var ae *sdk.APIError
	if !errors.As(err, &ae) || !errors.Is(err, sdk.ErrUnavailable) || ae.RequestID != "req-42" || ae.Message != "try again later" {
		t.Fatalf("err = %#v, want an APIError of kind unavailable with the request id", err)
	}
	if !strings.Contains(err.Error(), "req-42") {
		t.Errorf("message %q lacks the request id", err.Error())
	}
	if n := len(f.requests()); n != 4 {
		t.Errorf("requests = %d, want the policy's 4 attempts", n)
	}
}

func TestNonIdempotentCallsAreNotRetried(t *testing.T) {
	t.Parallel()
	f := &failing{fails: 100, status: http.StatusServiceUnavailable, ok: sandboxJSON}
	c := newClient(t, f, fastRetry())
	if err := c.PauseSandbox(t.Context(), "sb1"); !errors.Is(err, sdk.ErrUnavailable) {
		t.Fatalf("pause = %v", err)
	}
	if _, err := c.CreateAPIKey(t.Context(), api.CreateAPIKeyRequest{Name: "x"}); err == nil {
		t.Fatal("create key succeeded against a failing server")
	}
	if n := len(f.requests()); n != 2 {
		t.Errorf("requests = %d, want one per call", n)
	}
}

func TestClientErrorsAreNotRetried(t *testing.T) {
	t.Parallel()
	f := &failing{fails: 100, status: http.StatusNotFound, ok: sandboxJSON}
	c := newClient(t, f, fastRetry())
	if _, err := c.GetSandbox(t.Context(), "sb1"); !errors.Is(err, sdk.ErrNotFound) {
		t.Fatalf("err = %v, want not found", err)
	}
	if n := len(f.requests()); n != 1 {
		t.Errorf("requests = %d, want 1", n)
	}
}

func TestCreateRetriesWithOneIdempotencyKey(t *testing.T) {
	t.Parallel()
	f := &failing{fails: 2, status: http.StatusBadGateway, ok: func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		_, _ = w.Write([]byte(`{"id":"sb1","status":{"state":"Running"},"createdAt":"2026-01-01T00:00:00Z","entrypoint":["sh"]}`))
	}}
	c := newClient(t, f, fastRetry())
	res, err := c.CreateSandbox(t.Context(), api.CreateSandboxRequest{Image: &api.ImageSpec{URI: "x"}, Entrypoint: []string{"sh"}}, sdk.CreateOptions{})
	if err != nil || res.ID != "sb1" {
		t.Fatalf("create = %+v, %v", res, err)
	}
	reqs := f.requests()
	if len(reqs) != 3 {
		t.Fatalf("requests = %d, want 3", len(reqs))
	}
	key := reqs[0].Header.Get(api.HeaderIdempotencyKey)
	if key == "" {
		t.Fatal("create sent no Idempotency-Key")
	}
	for _, r := range reqs {
		if r.Header.Get(api.HeaderIdempotencyKey) != key {
			t.Errorf("retry used key %q, first used %q", r.Header.Get(api.HeaderIdempotencyKey), key)
		}
		if r.Header.Get(api.HeaderAPIKey) != "k" {
			t.Errorf("request without the API key")
		}
	}
}

func TestCancelStopsTheBackoff(t *testing.T) {
	t.Parallel()
	f := &failing{fails: 100, status: http.StatusTooManyRequests, retryAfter: "30", ok: sandboxJSON}
	c := newClient(t, f, fastRetry())
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.GetSandbox(ctx, "sb1")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the context's", err)
	}
	if time.Since(start) > 10*time.Second {
		t.Errorf("a cancelled call waited out Retry-After")
	}
}

func TestUnreachableServerIsUnavailable(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	c, err := sdk.New(sdk.WithBaseURL(addr), fastRetry())
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Health(t.Context()); !errors.Is(err, sdk.ErrUnavailable) {
		t.Fatalf("err = %v, want unavailable", err)
	}
}

func TestUndecodableErrorsKeepTheirStatusKind(t *testing.T) {
	t.Parallel()
	c := newClient(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "plain text from a proxy", http.StatusForbidden)
	}))
	_, err := c.GetSandbox(t.Context(), "x")
	if !errors.Is(err, sdk.ErrPermissionDenied) || !strings.Contains(err.Error(), "plain text from a proxy") {
		t.Fatalf("err = %v", err)
	}
}

func TestConfigurationFromTheEnvironment(t *testing.T) {
	var got *http.Request
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"healthy"}`))
	}))
	defer ts.Close()
	t.Setenv(sdk.EnvDomain, strings.TrimPrefix(ts.URL, "http://"))
	t.Setenv(sdk.EnvAPIKey, "from-env")
	t.Setenv(sdk.EnvProtocol, "http")
	c, err := sdk.New()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Health(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got.Header.Get(api.HeaderAPIKey) != "from-env" {
		t.Errorf("API key header = %q", got.Header.Get(api.HeaderAPIKey))
	}
	// Options win over the environment.
	c, err = sdk.New(sdk.WithAPIKey("from-option"))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Health(t.Context()); err != nil || got.Header.Get(api.HeaderAPIKey) != "from-option" {
		t.Errorf("option key: %v %q", err, got.Header.Get(api.HeaderAPIKey))
	}
	t.Setenv(sdk.EnvProtocol, "https")
	if c, err = sdk.New(); err != nil || !strings.HasPrefix(c.BaseURL(), "https://") {
		t.Errorf("protocol https gave %v, %v", c, err)
	}
	for _, bad := range []string{"http://", "::::"} {
		if _, err := sdk.New(sdk.WithBaseURL(bad)); err == nil {
			t.Errorf("base URL %q accepted", bad)
		}
	}
	if _, err := sdk.New(sdk.WithRetry(sdk.RetryPolicy{})); err == nil {
		t.Error("zero retry attempts accepted")
	}
}

// TestRequestIDFromTheContext: a context's request id goes on every
// attempt; a bad one, or none, is not sent.
func TestRequestIDFromTheContext(t *testing.T) {
	t.Parallel()
	f := &failing{fails: 1, status: http.StatusBadGateway, ok: sandboxJSON}
	c := newClient(t, f, fastRetry())
	if _, err := c.GetSandbox(sdk.WithRequestID(t.Context(), "tool-call-7"), "sb1"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetSandbox(sdk.WithRequestID(t.Context(), "bad id\n"), "sb1"); err != nil {
		t.Fatal(err)
	}
	reqs := f.requests()
	if len(reqs) != 3 || reqs[0].Header.Get(api.HeaderRequestID) != "tool-call-7" || reqs[1].Header.Get(api.HeaderRequestID) != "tool-call-7" ||
		reqs[2].Header.Get(api.HeaderRequestID) != "" {
		t.Fatalf("request ids: %d requests, %q", len(reqs), []string{reqs[0].Header.Get(api.HeaderRequestID), reqs[len(reqs)-1].Header.Get(api.HeaderRequestID)})
	}
}
