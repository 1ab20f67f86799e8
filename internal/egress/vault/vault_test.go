// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package vault

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func mustCreate(t *testing.T, body string) Vault {
	t.Helper()
	var req CreateRequest
	if err := Decode([]byte(body), &req); err != nil {
		t.Fatal(err)
	}
	v, err := Create(req)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

const sample = `{"credentials":[{"name":"gh","source":{"type":"inline","value":"ghp_SECRET"}},
 {"name":"k","source":{"type":"inline","value":"key-SECRET"}}],
 "bindings":[{"name":"github","match":{"hosts":["API.github.com."]},"auth":{"type":"bearer","credential":"gh"}},
 {"name":"svc","match":{"hosts":["*.svc.test"],"schemes":["http"],"ports":[80,8080],"methods":["GET"],"paths":["/v1/*"]},
  "auth":{"type":"customHeaders","headers":[{"name":"X-Key","credential":"k"},{"name":"X-Other","credential":"gh"}]}}]}`

func TestMatchInjectsExactlyOneBinding(t *testing.T) {
	v := mustCreate(t, sample)
	for _, tc := range []struct {
		req     Request
		binding string
		headers map[string]string
	}{
		{Request{"https", "api.github.com", 443, "POST", "/repos"}, "github", map[string]string{"Authorization": "Bearer ghp_SECRET"}},
		{Request{"https", "API.GitHub.com.", 443, "get", "/"}, "github", map[string]string{"Authorization": "Bearer ghp_SECRET"}},
		{Request{"http", "api.github.com", 443, "GET", "/"}, "", nil},   // scheme
		{Request{"https", "api.github.com", 8443, "GET", "/"}, "", nil}, // port
		{Request{"https", "github.com", 443, "GET", "/"}, "", nil},      // host
		{Request{"https", "api.github.com", 443, "HEAD", "/"}, "", nil}, // method default list
		{Request{"http", "a.svc.test", 8080, "GET", "/v1/x/y"}, "svc", map[string]string{"X-Key": "key-SECRET", "X-Other": "ghp_SECRET"}},
		{Request{"http", "a.svc.test", 80, "GET", "/v1"}, "svc", map[string]string{"X-Key": "key-SECRET"}},
		{Request{"http", "a.svc.test", 80, "GET", "/v2"}, "", nil},
		{Request{"http", "svc.test", 80, "GET", "/v1/x"}, "", nil}, // wildcard: subdomains only
		{Request{"http", "a.svc.test", 80, "POST", "/v1/x"}, "", nil},
	} {
		inj := v.Match(tc.req)
		if inj.Binding != tc.binding {
			t.Errorf("%+v: binding %q, want %q", tc.req, inj.Binding, tc.binding)
			continue
		}
		for k, want := range tc.headers {
			if got := inj.Headers.Get(k); got != want {
				t.Errorf("%+v: %s = %q, want %q", tc.req, k, got, want)
			}
		}
	}
	amb, err := v.Mutate(MutationRequest{Bindings: &BindingMutations{Add: []Binding{{Name: "github2",
		Match: Match{Hosts: []string{"*.github.com"}}, Auth: Auth{Type: "apiKey", Name: "X-Api-Key", Credential: "k"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	if inj := amb.Match(Request{"https", "api.github.com", 443, "GET", "/"}); inj.Binding != "" || len(inj.Ambiguous) != 2 || inj.Headers != nil {
		t.Errorf("two matching bindings = %+v, want nothing injected", inj)
	}
}

func TestStateNeverShowsValues(t *testing.T) {
	v := mustCreate(t, sample)
	b, _ := json.Marshal(v.State())
	for _, s := range v.Secrets() {
		if strings.Contains(string(b), s) {
			t.Errorf("state shows a value: %s", b)
		}
	}
	if strings.Contains(string(b), `"credential"`) {
		t.Errorf("state shows credential references: %s", b)
	}
	st := v.State()
	if st.Revision != 1 || len(st.Credentials) != 2 || st.Credentials[0].SourceType != "inline" || st.Bindings[0].Match.Ports[0] != 443 ||
		st.Bindings[0].Match.Hosts[0] != "api.github.com" || st.Bindings[1].Auth.Type != "customHeaders" {
		t.Errorf("state = %s", b)
	}
}

func TestMutateRevisionsAndErrors(t *testing.T) {
	v := mustCreate(t, sample)
	rev := func(n int64) *int64 { return &n }
	next, err := v.Mutate(MutationRequest{ExpectedRevision: rev(1), Credentials: &CredentialMutations{
		Replace: []Credential{{Name: "gh", Source: Source{Type: "inline", Value: "ghp_NEW"}}}}})
	if err != nil || next.Revision != 2 || next.State().Credentials[0].Revision != 2 || next.State().Credentials[1].Revision != 1 {
		t.Fatalf("replace = %+v %v", next.State(), err)
	}
	if inj := next.Match(Request{"https", "api.github.com", 443, "GET", "/"}); inj.Headers.Get("Authorization") != "Bearer ghp_NEW" {
		t.Errorf("after replace: %v", inj.Headers)
	}
	for _, tc := range []struct {
		name string
		req  MutationRequest
		want error
	}{
		{"stale revision", MutationRequest{ExpectedRevision: rev(1), Credentials: &CredentialMutations{Delete: []string{"k"}}}, ErrConflict},
		{"nothing", MutationRequest{}, ErrInvalid},
		{"delete missing", MutationRequest{Credentials: &CredentialMutations{Delete: []string{"nope"}}}, ErrNotFound},
		{"replace missing", MutationRequest{Bindings: &BindingMutations{Replace: []Binding{{Name: "nope"}}}}, ErrNotFound},
		{"add existing", MutationRequest{Credentials: &CredentialMutations{Add: []Credential{{Name: "k", Source: Source{Type: "inline", Value: "x"}}}}}, ErrConflict},
		{"dangling reference", MutationRequest{Credentials: &CredentialMutations{Delete: []string{"k"}}}, ErrInvalid},
	} {
		got, err := next.Mutate(tc.req)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
		if err == nil {
			t.Errorf("%s: mutated to %+v", tc.name, got.State())
		}
	}
	if next.Revision != 2 || len(next.Credentials) != 2 {
		t.Error("a failed mutation changed the vault")
	}
}

func TestCreateRejectsBadInput(t *testing.T) {
	for _, body := range []string{
		`{"credentials":[],"bindings":[],"extra":1}`,
		`{"credentials":[{"name":"a","source":{"type":"file","value":"x"}}],"bindings":[]}`,
		`{"credentials":[{"name":"a","source":{"type":"inline","value":""}}],"bindings":[]}`,
		`{"credentials":[{"name":"a","source":{"type":"inline","value":"x\r\ny"}}],"bindings":[]}`,
		`{"credentials":[{"name":"a","source":{"type":"inline","value":"x"}},{"name":"a","source":{"type":"inline","value":"y"}}],"bindings":[]}`,
		`{"credentials":[{"name":"a","source":{"type":"inline","value":"x"}}],"bindings":[{"name":"b","match":{"hosts":[]},"auth":{"type":"bearer","credential":"a"}}]}`,
		`{"credentials":[{"name":"a","source":{"type":"inline","value":"x"}}],"bindings":[{"name":"b","match":{"hosts":["x.com"]},"auth":{"type":"bearer","credential":"zz"}}]}`,
		`{"credentials":[{"name":"a","source":{"type":"inline","value":"x"}}],"bindings":[{"name":"b","match":{"hosts":["x.com"]},"auth":{"type":"apiKey","name":"bad name","credential":"a"}}]}`,
		`{"credentials":[{"name":"a","source":{"type":"inline","value":"x"}}],"bindings":[{"name":"b","match":{"hosts":["x.com"],"schemes":["ftp"]},"auth":{"type":"bearer","credential":"a"}}]}`,
		`{"credentials":[{"name":"a","source":{"type":"inline","value":"x"}}],"bindings":[{"name":"b","match":{"hosts":["x.com"],"ports":[0]},"auth":{"type":"bearer","credential":"a"}}]}`,
		`{"credentials":[{"name":"a","source":{"type":"inline","value":"x"}}],"bindings":[{"name":"b","match":{"hosts":["x.com"],"paths":["v1"]},"auth":{"type":"bearer","credential":"a"}}]}`,
		`{"credentials":[{"name":"a","source":{"type":"inline","value":"x"}}],"bindings":[{"name":"b","match":{"hosts":["http://x.com/"]},"auth":{"type":"bearer","credential":"a"}}]}`,
		`{"credentials":[{"name":"a","source":{"type":"inline","value":"x"}}],"bindings":[{"name":"b","match":{"hosts":["x.com"]},"auth":{"type":"oauth","credential":"a"}}]}`,
		`{"credentials":[{"name":"a","source":{"type":"inline","value":"x"}}],"bindings":[{"name":"b","match":{"hosts":["x.com"]},"auth":{"type":"customHeaders","headers":[]}}]}`,
	} {
		var req CreateRequest
		err := Decode([]byte(body), &req)
		if err == nil {
			_, err = Create(req)
		}
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want invalid", body, err)
		}
	}
}

func FuzzVault(f *testing.F) {
	f.Add([]byte(sample), "api.github.com", "/x")
	f.Fuzz(func(t *testing.T, body []byte, host, p string) {
		var req CreateRequest
		if Decode(body, &req) != nil {
			return
		}
		v, err := Create(req)
		if err != nil {
			return
		}
		inj := v.Match(Request{Scheme: "https", Host: host, Port: 443, Method: "GET", Path: p})
		if inj.Binding != "" && len(inj.Headers) == 0 {
			t.Errorf("binding %q matched but injects nothing", inj.Binding)
		}
		b, _ := json.Marshal(v.State())
		if strings.Contains(string(b), `"value"`) || strings.Contains(string(b), `"credential"`) {
			t.Errorf("state shows values or references: %s", b)
		}
	})
}

func TestIsToken(t *testing.T) {
	for s, want := range map[string]bool{"X-Api-Key": true, "GET": true, "a!#$%&'*+-.^_`|~z": true, "": false, "a b": false,
		"a:b": false, "a\"b": false, "é": false, "a/b": false} {
		if isToken(s) != want {
			t.Errorf("isToken(%q) = %v", s, !want)
		}
	}
}
