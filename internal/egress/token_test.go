// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package egress

import (
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corral-dev/corral/internal/testutil"
	"github.com/corral-dev/corral/internal/testutil/netlab"
)

// The API's token can be replaced with the current one only, takes effect
// at once, outlives a restart of the enforcer through its state file, and
// bad replacements are refused without changing anything.
func TestTokenReplacement(t *testing.T) {
	testutil.RequireRoot(t)
	p := netlab.NewNetPair(t)
	state := filepath.Join(t.TempDir(), "token")
	cfg := Config{Netns: netlab.NetnsPath(p.Inside), Token: "warm-token-0123456789", TokenStateFile: state}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.enf.Close()
	call := func(s *Service, method, path, token, body string) int {
		r := httptest.NewRequest(method, path, strings.NewReader(body))
		if token != "" {
			r.Header.Set(HeaderAuth, token)
		}
		w := httptest.NewRecorder()
		s.ServeHTTP(w, r)
		return w.Code
	}
	const next = "sandbox-token-abcdefghij"
	for _, tc := range []struct {
		method, token, body string
		want                int
	}{
		{http.MethodPut, "", `{"token":"` + next + `"}`, http.StatusUnauthorized},
		{http.MethodPut, "wrong-token-0123456789", `{"token":"` + next + `"}`, http.StatusUnauthorized},
		{http.MethodPut, cfg.Token, `{"token":"short"}`, http.StatusBadRequest},
		{http.MethodPut, cfg.Token, `{"token":"has a space in it, long"}`, http.StatusBadRequest},
		{http.MethodPut, cfg.Token, `{"token":"` + next + `","extra":1}`, http.StatusBadRequest},
		{http.MethodPut, cfg.Token, `not json`, http.StatusBadRequest},
		{http.MethodGet, cfg.Token, ``, http.StatusMethodNotAllowed},
	} {
		if got := call(s, tc.method, PathToken, tc.token, tc.body); got != tc.want {
			t.Errorf("%s %s with %q = %d, want %d", tc.method, tc.body, tc.token, got, tc.want)
		}
	}
	if got := call(s, http.MethodGet, "/policy", cfg.Token, ""); got != http.StatusOK {
		t.Fatalf("refused replacements changed the token: GET /policy = %d", got)
	}
	if got := call(s, http.MethodPut, PathToken, cfg.Token, `{"token":"`+next+`"}`); got != http.StatusNoContent {
		t.Fatalf("replace = %d", got)
	}
	if got := call(s, http.MethodGet, "/policy", cfg.Token, ""); got != http.StatusUnauthorized {
		t.Errorf("the old token still works: %d", got)
	}
	if got := call(s, http.MethodGet, "/policy", next, ""); got != http.StatusOK {
		t.Errorf("the new token does not work: %d", got)
	}
	// A restarted enforcer, given the old token again, keeps the new one.
	s2, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.enf.Close()
	if call(s2, http.MethodGet, "/policy", cfg.Token, "") != http.StatusUnauthorized || call(s2, http.MethodGet, "/policy", next, "") != http.StatusOK {
		t.Error("a restart went back to the old token")
	}
}
