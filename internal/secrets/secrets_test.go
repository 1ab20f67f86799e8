// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package secrets_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corral-dev/corral/errdefs"
	"github.com/corral-dev/corral/internal/secrets"
	"github.com/corral-dev/corral/internal/store"
)

func open(t *testing.T, dir string) *secrets.Service {
	t.Helper()
	st, err := store.Open(context.Background(), filepath.Join(dir, "corral.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	s, err := secrets.Open(st, dir)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSessionKeysAreStableAndPerSandbox(t *testing.T) {
	dir := t.TempDir()
	a := open(t, dir)
	if x1, x2 := a.SessionKey("x"), a.SessionKey("x"); x1 != x2 || a.SessionKey("x") == a.SessionKey("y") || !strings.HasPrefix(a.SessionKey("x"), "csk_") {
		t.Error("session keys are not a function of the sandbox ID")
	}
	// The key survives a restart; another server's key differs.
	if b := open(t, dir); b.SessionKey("x") != a.SessionKey("x") {
		t.Error("a restart changed the session keys")
	}
	if c := open(t, t.TempDir()); c.SessionKey("x") == a.SessionKey("x") {
		t.Error("two servers derive the same key")
	}
	if fi, _ := os.Stat(filepath.Join(dir, "session.key")); fi.Mode().Perm() != 0o600 {
		t.Errorf("session.key mode %v", fi.Mode())
	}
}

func TestGrants(t *testing.T) {
	g, err := secrets.Grants(map[string]string{secrets.Extension: " a, b.c ,d-1"})
	if err != nil || strings.Join(g, "|") != "a|b.c|d-1" {
		t.Errorf("grants = %v %v", g, err)
	}
	for _, bad := range []string{"", "a,,b", "../x", "a b", "-x", strings.Repeat("x", 129)} {
		if _, err := secrets.Grants(map[string]string{secrets.Extension: bad}); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("%q: %v", bad, err)
		}
	}
	if g, err := secrets.Grants(nil); g != nil || err != nil {
		t.Errorf("no extension = %v %v", g, err)
	}
}

func TestHandlerAnswersOnlyTheGrantedSandbox(t *testing.T) {
	s := open(t, t.TempDir())
	ctx := context.Background()
	if _, err := s.Put(ctx, "t1", "api", "v1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(ctx, "t2", "api", "v2"); err != nil {
		t.Fatal(err)
	}
	sandboxes := map[string]secrets.Sandbox{
		"sb1": {Tenant: "t1", Grants: []string{"api"}, Running: true},
		"sb2": {Tenant: "t1", Grants: []string{"other"}, Running: true},
		"sb3": {Tenant: "t1", Grants: []string{"api"}, Running: false},
	}
	var audited []string
	h := s.Handler(func(id string) (secrets.Sandbox, bool) { sb, ok := sandboxes[id]; return sb, ok },
		func(id, name string, ok bool, why string) { audited = append(audited, id+"/"+name+"/"+why) },
		func(context.Context, string, secrets.AppEvent) error { t.Error("an event was posted"); return nil })
	get := func(id, name, key string) (int, string) {
		req := httptest.NewRequest("GET", "/v1/sandboxes/"+id+"/secrets/"+name, nil)
		req.Header.Set(secrets.HeaderSessionKey, key)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		b, _ := io.ReadAll(rec.Body)
		return rec.Code, string(b)
	}
	if code, body := get("sb1", "api", s.SessionKey("sb1")); code != 200 || !strings.Contains(body, `"value":"v1"`) {
		t.Errorf("granted = %d %s", code, body)
	}
	for _, tc := range []struct{ id, name, key string }{
		{"sb1", "api", s.SessionKey("sb2")},
		{"sb2", "api", s.SessionKey("sb2")},
		{"sb3", "api", s.SessionKey("sb3")},
		{"nope", "api", s.SessionKey("nope")},
		{"sb1", "api", ""},
	} {
		if code, body := get(tc.id, tc.name, tc.key); code != http.StatusForbidden || strings.Contains(body, "v1") {
			t.Errorf("%+v = %d %s", tc, code, body)
		}
	}
	if len(audited) != 6 {
		t.Errorf("audited %v", audited)
	}
	// A sandbox reading in a loop is slowed down; another is not.
	if _, err := s.Put(ctx, "t1", "other", "v3"); err != nil {
		t.Fatal(err)
	}
	limited := 0
	for range 3 * secrets.ReadBurst {
		if code, _ := get("sb1", "api", s.SessionKey("sb1")); code == http.StatusTooManyRequests {
			limited++
		}
	}
	if limited < secrets.ReadBurst {
		t.Errorf("%d of %d reads in a loop were limited", limited, 3*secrets.ReadBurst)
	}
	if code, body := get("sb2", "other", s.SessionKey("sb2")); code != 200 {
		t.Errorf("another sandbox's read during the loop = %d %s", code, body)
	}
	list, _ := s.List(ctx, "t1")
	if len(list) != 2 || list[0].Value != "" {
		t.Errorf("list = %+v", list)
	}
	if err := s.Delete(ctx, "t1", "api"); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "t1", "api"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("second delete = %v", err)
	}
}

// TestHandlerTakesEventsOnlyFromTheirSandbox: a sandbox posts events
// with its own key only, when it opted in and runs; the body's form,
// size and rate are bounded.
func TestHandlerTakesEventsOnlyFromTheirSandbox(t *testing.T) {
	s := open(t, t.TempDir())
	sandboxes := map[string]secrets.Sandbox{
		"sb1": {Tenant: "t1", Running: true, Events: true},
		"sb2": {Tenant: "t1", Running: true},
		"sb3": {Tenant: "t1", Running: false, Events: true},
	}
	type posted struct {
		id string
		ev secrets.AppEvent
	}
	var got []posted
	h := s.Handler(func(id string) (secrets.Sandbox, bool) { sb, ok := sandboxes[id]; return sb, ok },
		func(string, string, bool, string) {},
		func(_ context.Context, id string, ev secrets.AppEvent) error {
			got = append(got, posted{id, ev})
			return nil
		})
	post := func(id, key, body string) int {
		req := httptest.NewRequest("POST", "/v1/sandboxes/"+id+"/events", strings.NewReader(body))
		req.Header.Set(secrets.HeaderSessionKey, key)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	if code := post("sb1", s.SessionKey("sb1"), `{"name":"build.done","data":{"ok":true}}`); code != http.StatusAccepted {
		t.Fatalf("post = %d", code)
	}
	if len(got) != 1 || got[0].id != "sb1" || got[0].ev.Name != "build.done" || string(got[0].ev.Data) != `{"ok":true}` {
		t.Fatalf("posted %+v", got)
	}
	for _, c := range []struct {
		id, key, body string
		code          int
	}{
		{"sb1", s.SessionKey("sb2"), `{"name":"x"}`, 403}, // another sandbox's key
		{"sb1", "", `{"name":"x"}`, 403},
		{"sb2", s.SessionKey("sb2"), `{"name":"x"}`, 403}, // did not opt in
		{"sb3", s.SessionKey("sb3"), `{"name":"x"}`, 403}, // not running
		{"nope", s.SessionKey("nope"), `{"name":"x"}`, 403},
		{"sb1", s.SessionKey("sb1"), `{"name":"Bad Name"}`, 400},
		{"sb1", s.SessionKey("sb1"), `{"name":""}`, 400},
		{"sb1", s.SessionKey("sb1"), `{"name":"x","extra":1}`, 400},
		{"sb1", s.SessionKey("sb1"), `{"name":"x"} {}`, 400},
		{"sb1", s.SessionKey("sb1"), `not json`, 400},
		{"sb1", s.SessionKey("sb1"), `{"name":"x","data":"` + strings.Repeat("a", secrets.MaxEventBody) + `"}`, 413},
	} {
		if code := post(c.id, c.key, c.body); code != c.code {
			t.Errorf("%s %.40s = %d, want %d", c.id, c.body, code, c.code)
		}
	}
	if len(got) != 1 {
		t.Errorf("refused posts were published: %d", len(got))
	}
	limited := 0
	for range 3 * secrets.EventBurst {
		if post("sb1", s.SessionKey("sb1"), `{"name":"loop"}`) == http.StatusTooManyRequests {
			limited++
		}
	}
	if limited < secrets.EventBurst {
		t.Errorf("%d of %d posts in a loop were limited", limited, 3*secrets.EventBurst)
	}
}

func TestRate(t *testing.T) {
	r := secrets.NewRate(1, 3)
	n := 0
	for range 10 {
		if r.Allow() {
			n++
		}
	}
	if n != 3 {
		t.Errorf("a burst of 3 allowed %d", n)
	}
}
