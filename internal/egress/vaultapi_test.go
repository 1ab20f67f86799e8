// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package egress

import (
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/corral-dev/corral/internal/egress/mitm"
	"github.com/corral-dev/corral/internal/testutil"
	"github.com/corral-dev/corral/internal/testutil/netlab"
)

// Vault writes carry credentials: over plain HTTP they are accepted from
// loopback (and the host's socket) only; over TLS from anywhere. Reads
// are not restricted.
func TestVaultWritesNeedTLSOrLoopback(t *testing.T) {
	testutil.RequireRoot(t)
	p := netlab.NewNetPair(t)
	const token = "vault-test-token-0123456789"
	body := `{"credentials":[{"name":"k","source":{"type":"inline","value":"v"}}],"bindings":[]}`
	for _, tc := range []struct {
		tls        bool
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
		s, err := New(Config{Netns: netlab.NetnsPath(p.Inside), Token: token, VaultDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		call := func(method, b string) int {
			r := httptest.NewRequest(method, "/credential-vault", strings.NewReader(b))
			r.RemoteAddr = tc.remote
			if tc.tls {
				r.TLS = &tls.ConnectionState{Version: tls.VersionTLS13, HandshakeComplete: true}
			}
			r.Header.Set(HeaderAuth, token)
			r.Header.Set("Content-Type", "application/json")
			w := httptest.NewRecorder()
			s.ServeHTTP(w, r)
			return w.Code
		}
		if got := call(http.MethodPost, body); got != tc.want {
			t.Errorf("TLS %v, from %s: POST = %d, want %d", tc.tls, tc.remote, got, tc.want)
		}
		if got := call(http.MethodGet, ""); got != tc.read {
			t.Errorf("TLS %v, from %s: GET = %d, want %d", tc.tls, tc.remote, got, tc.read)
		}
		s.enf.Close()
	}
}
