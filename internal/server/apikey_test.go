// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"net/http"
	"testing"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/internal/driver/fakedriver"
)

// X-API-Key (what the OpenSandbox SDKs send behind gateways) is an API
// key as OPEN-SANDBOX-API-KEY is, which wins when both are set. On a
// proxy route it is corral's only when it is a corral key: any other
// value is the sandbox service's own header and travels on, and a corral
// key never does.
func TestXAPIKeyIsAnAlias(t *testing.T) {
	t.Parallel()
	s := newTS(t)
	id := s.create(s.keyA, basicCreate()).ID
	if r := s.call("GET", "/v1/sandboxes/"+id, "", nil, api.HeaderAPIKeyAlias, s.keyA); r.status != http.StatusOK {
		t.Errorf("GET with X-API-Key = %d %s", r.status, r.body)
	}
	if r := s.call("GET", "/v1/sandboxes/"+id, "", nil, api.HeaderAPIKeyAlias, s.keyB); r.status != http.StatusNotFound {
		t.Errorf("another tenant's key in X-API-Key = %d %s, want 404", r.status, r.body)
	}
	if r := s.call("GET", "/v1/sandboxes", "", nil, api.HeaderAPIKeyAlias, "ck_not-a-key-of-this-server"); r.status != http.StatusUnauthorized || r.errCode(t) != api.CodeInvalidAPIKey {
		t.Errorf("a wrong X-API-Key = %d %s", r.status, r.body)
	}
	if r := s.call("GET", "/v1/sandboxes/"+id, s.keyA, nil, api.HeaderAPIKeyAlias, "ck_not-a-key-of-this-server"); r.status != http.StatusOK {
		t.Errorf("OPEN-SANDBOX-API-KEY beside a wrong X-API-Key = %d %s", r.status, r.body)
	}
	if r := s.call("GET", "/v1/sandboxes/"+id+"/proxy/8080/", "", nil, api.HeaderAPIKeyAlias, "app-secret"); r.status != http.StatusUnauthorized {
		t.Errorf("a proxy request with only the service's X-API-Key = %d %s, want 401", r.status, r.body)
	}

	var uep api.Endpoint
	s.call("GET", "/v1/sandboxes/"+id+"/endpoints/8080?use_server_proxy=true", s.keyA, nil).decode(t, &uep)
	for _, tc := range []struct {
		name   string
		key    string
		header []string
		want   string // the X-API-Key the service sees ("": none)
	}{
		{"the service's own, beside the proxy token", "", []string{api.HeaderExecdToken, uep.Headers[api.HeaderExecdToken], api.HeaderAPIKeyAlias, "app-secret"}, "app-secret"},
		{"the service's own, beside an API key", s.keyA, []string{api.HeaderAPIKeyAlias, "app-secret"}, "app-secret"},
		{"a corral key that authorized the request", "", []string{api.HeaderAPIKeyAlias, s.keyA}, ""},
		{"another corral key", s.keyA, []string{api.HeaderAPIKeyAlias, s.keyB}, ""},
		{"a minted-looking key this server does not know", s.keyA, []string{api.HeaderAPIKeyAlias, "ck_revoked-or-from-elsewhere"}, ""},
	} {
		r := s.call("GET", "/v1/sandboxes/"+id+"/proxy/8080/", tc.key, nil, tc.header...)
		if r.status != http.StatusOK {
			t.Errorf("%s: proxy = %d %s", tc.name, r.status, r.body)
			continue
		}
		var e fakedriver.Echo
		r.decode(t, &e)
		got := e.Headers[http.CanonicalHeaderKey(api.HeaderAPIKeyAlias)]
		if tc.want == "" && len(got) != 0 || tc.want != "" && (len(got) != 1 || got[0] != tc.want) {
			t.Errorf("%s: the service saw X-API-Key %q, want %q", tc.name, got, tc.want)
		}
	}
}
