// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/internal/auth"
	"github.com/corral-dev/corral/internal/driver"
	"github.com/corral-dev/corral/internal/driver/fakedriver"
	"github.com/corral-dev/corral/internal/lifecycle"
	"github.com/corral-dev/corral/internal/store"
	"github.com/corral-dev/corral/internal/testutil/contracttest"
	"github.com/corral-dev/corral/internal/webhook"
)

var contracts contracttest.Contracts

// ts is a real server over real SQLite and the fake driver, reached over a
// real socket, with an admin key for tenant t1 and a plain key for t2.
type ts struct {
	t       testing.TB
	handler http.Handler
	url     string
	// e2bURL serves the same server's E2B API, e2bHandler.
	e2bURL     string
	e2bHandler http.Handler
	keyA       string // admin of t1
	keyB       string // tenant t2
	mgr        *lifecycle.Manager
	srv        *Server
	st         *store.Store
	contract   *contracttest.Contract
}

type resp struct {
	status int
	header http.Header
	body   []byte
}

func (r resp) decode(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decode %s: %v", r.body, err)
	}
}

func (r resp) errCode(t testing.TB) string {
	t.Helper()
	var e api.ErrorResponse
	r.decode(t, &e)
	if e.Code == "" || e.Message == "" {
		t.Fatalf("error body %s lacks code or message", r.body)
	}
	return e.Code
}

func newTS(t *testing.T) *ts { return newTSForBench(t) }

func newTSForBench(t testing.TB) *ts { return newTSWith(t, nil) }

// newTSWith is newTS with the server's configuration changed by edit.
func newTSWith(t testing.TB, edit func(*Config)) *ts { return newTSDriver(t, edit, nil) }

// newTSDriver is newTSWith with the fake driver wrapped by wrap (nil: not).
func newTSDriver(t testing.TB, edit func(*Config), wrap func(*fakedriver.Driver) driver.Driver) *ts {
	t.Helper()
	return newTSFull(t, edit, wrap, nil)
}

// newTSFull is newTSDriver with the lifecycle's configuration changed by
// lc (nil: not).
func newTSFull(t testing.TB, edit func(*Config), wrap func(*fakedriver.Driver) driver.Driver, lc func(*lifecycle.Config)) *ts {
	t.Helper()
	return newTSAll(t, edit, wrap, lc, nil)
}

// newTSHooks is newTS with the webhook service's configuration changed
// by hc. Every test server delivers webhooks, to loopback receivers,
// retrying after 20ms (doubling) up to 4 attempts.
func newTSHooks(t testing.TB, hc func(*webhook.Config)) *ts {
	t.Helper()
	return newTSAll(t, nil, nil, nil, hc)
}

func newTSAll(t testing.TB, edit func(*Config), wrap func(*fakedriver.Driver) driver.Driver, lc func(*lifecycle.Config), hc func(*webhook.Config)) *ts {
	t.Helper()
	dir := t.TempDir()
	st, err := store.Open(t.Context(), filepath.Join(dir, "corral.db"))
	if err != nil {
		t.Fatal(err)
	}
	d, err := fakedriver.New(fakedriver.Config{Dir: filepath.Join(dir, "fake")})
	if err != nil {
		t.Fatal(err)
	}
	var drv driver.Driver = d
	if wrap != nil {
		drv = wrap(d)
	}
	lcfg := lifecycle.Config{Driver: drv, DriverName: fakedriver.Name, Store: st, MaintainInterval: time.Hour}
	if lc != nil {
		lc(&lcfg)
	}
	mgr, err := lifecycle.New(lcfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := mgr.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	keys, err := auth.Open(t.Context(), st)
	if err != nil {
		t.Fatal(err)
	}
	keyA, _, err := keys.Create(t.Context(), "t1", "a", true)
	if err != nil {
		t.Fatal(err)
	}
	keyB, _, err := keys.Create(t.Context(), "t2", "b", false)
	if err != nil {
		t.Fatal(err)
	}
	guard, err := webhook.NewGuard([]netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")})
	if err != nil {
		t.Fatal(err)
	}
	wcfg := webhook.Config{Store: st, Events: mgr, Guard: guard, RetryBase: 20 * time.Millisecond, MaxAttempts: 4, Timeout: 5 * time.Second}
	if hc != nil {
		hc(&wcfg)
	}
	hooks, err := webhook.New(wcfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Manager: mgr, Keys: keys, Webhooks: hooks, Templates: st, E2B: &E2BConfig{Templates: map[string]string{"base": "fake:ok"}}}
	if edit != nil {
		edit(&cfg)
	}
	srv := New(cfg)
	hs := httptest.NewServer(srv.Handler())
	e2bHS := httptest.NewServer(srv.E2BHandler())
	ctx, cancel := context.WithCancel(context.WithoutCancel(t.Context()))
	done := make(chan struct{})
	hooksDone := make(chan struct{})
	go func() { _ = mgr.Run(ctx); close(done) }()
	go func() { _ = hooks.Run(ctx); close(hooksDone) }()
	t.Cleanup(func() {
		hs.Close()
		e2bHS.Close()
		cancel()
		<-done
		<-hooksDone
		hooks.Close()
		_ = d.Close()
		_ = st.Close()
	})
	return &ts{t: t, handler: srv.Handler(), url: hs.URL, e2bURL: e2bHS.URL, e2bHandler: srv.E2BHandler(), keyA: keyA, keyB: keyB, mgr: mgr, srv: srv, st: st, contract: contracts.Get(t, contracttest.Lifecycle)}
}

// call sends a request with key (none if empty) and validates the answer
// against the lifecycle contract when the contract covers the route.
func (s *ts) call(method, path, key string, body any, hdr ...string) resp {
	s.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		j, _ := json.Marshal(b)
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequestWithContext(s.t.Context(), method, s.url+path, rd)
	if err != nil {
		s.t.Fatal(err)
	}
	if key != "" {
		req.Header.Set(api.HeaderAPIKey, key)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i] == "Host" {
			req.Host = hdr[i+1]
			continue
		}
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	r := resp{status: res.StatusCode, header: res.Header, body: b}
	if res.Header.Get(api.HeaderRequestID) == "" {
		s.t.Errorf("%s %s: no X-Request-ID on the answer", method, path)
	}
	s.validate(method, path, r)
	return r
}

// undocumented are statuses corral answers that the contract cannot list:
// 503 when the runtime itself is unavailable, 501 when it lacks the
// capability (snapshots on the kubernetes runtime), 429 over a quota.
func undocumented(status int) bool {
	return status == http.StatusServiceUnavailable || status == http.StatusNotImplemented || status == http.StatusTooManyRequests
}

func (s *ts) validate(method, path string, r resp) {
	s.t.Helper()
	u, _ := url.Parse(path)
	p := strings.TrimPrefix(u.Path, "/v1")
	if !s.contract.Covers(method, p) || undocumented(r.status) {
		return
	}
	s.contract.ValidateResponse(s.t, method, p, u.RawQuery, r.status, r.header, r.body)
}

func (s *ts) create(key string, body any) api.CreateSandboxResponse {
	s.t.Helper()
	r := s.call("POST", "/v1/sandboxes", key, body)
	if r.status != http.StatusAccepted {
		s.t.Fatalf("create = %d %s", r.status, r.body)
	}
	var out api.CreateSandboxResponse
	r.decode(s.t, &out)
	return out
}

func basicCreate() map[string]any {
	return map[string]any{
		"image":          map[string]any{"uri": "fake:ok"},
		"timeout":        600,
		"resourceLimits": map[string]string{"cpu": "500m", "memory": "512Mi"},
		"entrypoint":     []string{"python", "-m", "http.server"},
	}
}
