// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package egress

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/corral-dev/corral/internal/egress/mitm"
	"github.com/corral-dev/corral/internal/testutil"
)

// Vault writes carry credentials: over plain HTTP they are accepted from
// loopback (and the host's socket) only, unless the enforcer is told its
// API link is secured outside; reads are not restricted.
func TestVaultWritesNeedTLSOrLoopback(t *testing.T) {
	testutil.RequireRoot(t)
	p := testutil.NewNetPair(t)
	const token = "vault-test-token-0123456789"
	body := `{"credentials":[{"name":"k","source":{"type":"inline","value":"v"}}],"bindings":[]}`
	for _, tc := range []struct {
		plain      bool
		remote     string
		want, read int
	}{
		{false, "192.0.2.7:40000", http.StatusUpgradeRequired, http.StatusNotFound},
		{false, "127.0.0.1:40000", http.StatusCreated, http.StatusOK},
		{false, "@", http.StatusCreated, http.StatusOK},
		{true, "192.0.2.7:40000", http.StatusCreated, http.StatusOK},
	} {
		dir := t.TempDir()
		if err := mitm.CreateCA(dir, "test"); err != nil {
			t.Fatal(err)
		}
		s, err := New(Config{Netns: testutil.NetnsPath(p.Inside), Token: token, VaultDir: dir, VaultPlainWrites: tc.plain})
		if err != nil {
			t.Fatal(err)
		}
		call := func(method, b string) int {
			r := httptest.NewRequest(method, "/credential-vault", strings.NewReader(b))
			r.RemoteAddr = tc.remote
			r.Header.Set(HeaderAuth, token)
			r.Header.Set("Content-Type", "application/json")
			w := httptest.NewRecorder()
			s.ServeHTTP(w, r)
			return w.Code
		}
		if got := call(http.MethodPost, body); got != tc.want {
			t.Errorf("plain writes %v, from %s: POST = %d, want %d", tc.plain, tc.remote, got, tc.want)
		}
		if got := call(http.MethodGet, ""); got != tc.read {
			t.Errorf("plain writes %v, from %s: GET = %d, want %d", tc.plain, tc.remote, got, tc.read)
		}
		s.enf.Close()
	}
}
