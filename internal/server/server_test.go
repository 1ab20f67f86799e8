// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"fmt"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/internal/sandbox"
	"github.com/corral-dev/corral/internal/testutil"
	"github.com/corral-dev/corral/internal/testutil/contracttest"
)

func TestHealthNeedsNoKey(t *testing.T) {
	t.Parallel()
	s := newTS(t)
	r := s.call("GET", "/health", "", nil)
	if r.status != 200 || !strings.Contains(string(r.body), `"healthy"`) {
		t.Fatalf("GET /health = %d %s", r.status, r.body)
	}
}

// What is wrong with the setup (a runtime open to known escapes) is for
// an admin to read, not for everyone who can reach /health.
func TestHealthWarningsForAdminsOnly(t *testing.T) {
	t.Parallel()
	s := newTSWith(t, func(c *Config) { c.HealthWarnings = []string{"runc 1.1.5 is open to CVE-X"} })
	for _, tc := range []struct {
		name string
		key  string
		want bool
	}{{"no key", "", false}, {"a tenant's key", s.keyB, false}, {"an admin key", s.keyA, true}, {"a bad key", "ck_nope", false}} {
		r := s.call("GET", "/health", tc.key, nil)
		if r.status != 200 || strings.Contains(string(r.body), "CVE-X") != tc.want {
			t.Errorf("%s: GET /health = %d %s", tc.name, r.status, r.body)
		}
	}
}

func TestAuthentication(t *testing.T) {
	t.Parallel()
	s := newTS(t)
	for _, prefix := range []string{"", "/v1"} {
		r := s.call("GET", prefix+"/sandboxes", "", nil)
		if r.status != 401 || r.errCode(t) != api.CodeMissingAPIKey {
			t.Errorf("no key: %d %s", r.status, r.body)
		}
		r = s.call("GET", prefix+"/sandboxes", "ck_wrong", nil)
		if r.status != 401 || r.errCode(t) != api.CodeInvalidAPIKey {
			t.Errorf("bad key: %d %s", r.status, r.body)
		}
		r = s.call("GET", prefix+"/sandboxes", "", nil, "Authorization", "Bearer "+s.keyA)
		if r.status != 200 {
			t.Errorf("bearer key: %d %s", r.status, r.body)
		}
	}
}

func TestRequestID(t *testing.T) {
	t.Parallel()
	s := newTS(t)
	r := s.call("GET", "/v1/sandboxes", s.keyA, nil, api.HeaderRequestID, "trace-123")
	if got := r.header.Get(api.HeaderRequestID); got != "trace-123" {
		t.Errorf("echoed X-Request-ID = %q", got)
	}
	r = s.call("GET", "/v1/sandboxes", s.keyA, nil)
	if got := r.header.Get(api.HeaderRequestID); len(got) != 36 || strings.Count(got, "-") != 4 {
		t.Errorf("generated X-Request-ID = %q, want a UUID", got)
	}
	r = s.call("GET", "/v1/sandboxes", "", nil, api.HeaderRequestID, "bad id\twith tab")
	if got := r.header.Get(api.HeaderRequestID); got == "bad id\twith tab" || got == "" {
		t.Errorf("unsafe X-Request-ID was echoed: %q", got)
	}
}

func TestCreateAndGet(t *testing.T) {
	t.Parallel()
	s := newTS(t)
	body := basicCreate()
	body["metadata"] = map[string]string{"project": "apollo"}
	body["env"] = map[string]any{"A": "1", "DROPPED": nil}
	body["platform"] = map[string]string{"os": "Linux", "arch": "AMD64"}
	r := s.call("POST", "/v1/sandboxes", s.keyA, body)
	if r.status != http.StatusAccepted {
		t.Fatalf("create = %d %s", r.status, r.body)
	}
	var created api.CreateSandboxResponse
	r.decode(t, &created)
	if created.Status.State != api.StateRunning || created.ExpiresAt == nil || created.Platform == nil || created.Platform.OS != "linux" {
		t.Fatalf("create answer = %s", r.body)
	}
	if loc := r.header.Get("Location"); loc != "/v1/sandboxes/"+created.ID {
		t.Errorf("Location = %q", loc)
	}
	for _, p := range []string{"/v1/sandboxes/", "/sandboxes/"} {
		g := s.call("GET", p+created.ID, s.keyA, nil)
		if g.status != 200 {
			t.Fatalf("GET %s = %d %s", p, g.status, g.body)
		}
		var sb api.Sandbox
		g.decode(t, &sb)
		if sb.Image == nil || sb.Image.URI != "fake:ok" || sb.Metadata["project"] != "apollo" || sb.Entrypoint[0] != "python" {
			t.Errorf("GET = %s", g.body)
		}
	}
	// A manual-cleanup sandbox has no expiresAt at all, not null.
	manual := basicCreate()
	delete(manual, "timeout")
	m := s.call("POST", "/v1/sandboxes", s.keyA, manual)
	if m.status != 202 || strings.Contains(string(m.body), "expiresAt") || strings.Contains(string(m.body), "null") {
		t.Errorf("manual cleanup create = %d %s", m.status, m.body)
	}
	// The image's credentials are never echoed.
	withAuth := basicCreate()
	withAuth["image"] = map[string]any{"uri": "fake:ok", "auth": map[string]string{"username": "u", "password": "hunter2"}}
	a := s.create(s.keyA, withAuth)
	g := s.call("GET", "/v1/sandboxes/"+a.ID, s.keyA, nil)
	if strings.Contains(string(g.body), "hunter2") {
		t.Errorf("GET leaks the registry password: %s", g.body)
	}
}

func TestCreateRejectsBadInput(t *testing.T) {
	t.Parallel()
	s := newTS(t)
	with := func(mod func(map[string]any)) map[string]any {
		b := basicCreate()
		mod(b)
		return b
	}
	cases := []struct {
		name string
		body any
		code string
	}{
		{"empty body", "", api.CodeInvalidRequestBody},
		{"not json", "{nope", api.CodeInvalidRequestBody},
		{"trailing data", `{"image":{"uri":"x"}} {}`, api.CodeInvalidRequestBody},
		{"wrong type", `{"image":{"uri":"x"},"timeout":"soon"}`, api.CodeInvalidRequestBody},
		{"no image", with(func(b map[string]any) { delete(b, "image") }), api.CodeInvalidParameter},
		{"image and snapshot", with(func(b map[string]any) { b["snapshotId"] = "s" }), api.CodeInvalidParameter},
		{"blank uri", with(func(b map[string]any) { b["image"] = map[string]any{"uri": " "} }), api.CodeInvalidParameter},
		{"short timeout", with(func(b map[string]any) { b["timeout"] = 59 }), api.CodeInvalidParameter},
		{"negative timeout", with(func(b map[string]any) { b["timeout"] = -1 }), api.CodeInvalidParameter},
		{"bad cpu", with(func(b map[string]any) { b["resourceLimits"] = map[string]string{"cpu": "lots"} }), api.CodeInvalidResourceLimit},
		{"bad memory", with(func(b map[string]any) { b["resourceLimits"] = map[string]string{"memory": "12XB"} }), api.CodeInvalidResourceLimit},
		{"tiny memory", with(func(b map[string]any) { b["resourceLimits"] = map[string]string{"memory": "1Ki"} }), api.CodeInvalidResourceLimit},
		{"unknown resource", with(func(b map[string]any) { b["resourceLimits"] = map[string]string{"storage": "1Gi"} }), api.CodeInvalidResourceLimit},
		{"gpu", with(func(b map[string]any) { b["resourceLimits"] = map[string]string{"gpu": "1"} }), api.CodeInvalidResourceLimit},
		{"bad metadata key", with(func(b map[string]any) { b["metadata"] = map[string]string{"-bad": "x"} }), api.CodeInvalidMetadataLabel},
		{"reserved metadata", with(func(b map[string]any) { b["metadata"] = map[string]string{"opensandbox.io/id": "x"} }), api.CodeInvalidMetadataLabel},
		{"long metadata value", with(func(b map[string]any) { b["metadata"] = map[string]string{"k": strings.Repeat("v", 64)} }), api.CodeInvalidMetadataLabel},
		{"env key with =", with(func(b map[string]any) { b["env"] = map[string]string{"A=B": "x"} }), api.CodeInvalidParameter},
		{"empty entrypoint", with(func(b map[string]any) { b["entrypoint"] = []string{} }), api.CodeInvalidParameter},
		{"bad platform", with(func(b map[string]any) { b["platform"] = map[string]string{"os": "plan9", "arch": "amd64"} }), api.CodeInvalidParameter},
		{"windows", with(func(b map[string]any) { b["platform"] = map[string]string{"os": "windows", "arch": "amd64"} }), api.CodeAPINotSupported},
		{"bad policy action", with(func(b map[string]any) {
			b["networkPolicy"] = map[string]any{"egress": []map[string]string{{"action": "maybe", "target": "x.com"}}}
		}), api.CodeInvalidParameter},
		{"bad default action", with(func(b map[string]any) { b["networkPolicy"] = map[string]any{"defaultAction": "drop"} }), api.CodeInvalidParameter},
		{"policy target that is a URL", with(func(b map[string]any) {
			b["networkPolicy"] = map[string]any{"egress": []map[string]string{{"action": "allow", "target": "ok.com"}, {"action": "allow", "target": "https://x.com/"}}}
		}), api.CodeInvalidParameter},
		{"policy target with a bad CIDR", with(func(b map[string]any) {
			b["networkPolicy"] = map[string]any{"egress": []map[string]string{{"action": "deny", "target": "10.0.0.0/40"}}}
		}), api.CodeInvalidParameter},
		{"credential proxy without policy", with(func(b map[string]any) { b["credentialProxy"] = map[string]bool{"enabled": true} }), api.CodeInvalidParameter},
		{"secure access", with(func(b map[string]any) { b["secureAccess"] = true }), api.CodeAPINotSupported},
		{"volume without a backend", with(func(b map[string]any) { b["volumes"] = []map[string]string{{"name": "v", "mountPath": "/x"}} }), api.CodeVolumeInvalidBackend},
		{"host volumes off", with(func(b map[string]any) {
			b["volumes"] = []map[string]any{{"name": "v", "host": map[string]string{"path": "/srv"}, "mountPath": "/x"}}
		}), api.CodeVolumeHostPathForbidden},
		{"pool ref", with(func(b map[string]any) { b["extensions"] = map[string]string{"poolRef": "p"} }), api.CodeUnsupportedPoolRef},
		{"renew extension", with(func(b map[string]any) { b["extensions"] = map[string]string{"access.renew.extend.seconds": "5"} }), api.CodeInvalidParameter},
		{"unknown snapshot", map[string]any{"snapshotId": "nope"}, "SNAPSHOT::NOT_FOUND"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := s.call("POST", "/v1/sandboxes", s.keyA, tc.body)
			if r.status != 400 || r.errCode(t) != tc.code {
				t.Errorf("create(%s) = %d %s, want 400 %s", tc.name, r.status, r.body, tc.code)
			}
		})
	}
	if _, total := s.mgr.List(t.Context(), "t1", listAll()); total != 0 {
		t.Errorf("bad requests created %d sandboxes", total)
	}
}

func TestCreateFailureAnswers(t *testing.T) {
	t.Parallel()
	s := newTS(t)
	b := basicCreate()
	b["image"] = map[string]string{"uri": "fake:missing"}
	r := s.call("POST", "/v1/sandboxes", s.keyA, b)
	if r.status != 400 || !strings.Contains(string(r.body), "not found") {
		t.Errorf("missing image = %d %s", r.status, r.body)
	}
	b["image"] = map[string]string{"uri": "fake:fail"}
	r = s.call("POST", "/v1/sandboxes", s.keyA, b)
	if r.status != 503 || r.errCode(t) != "SANDBOX::START_FAILED" {
		t.Errorf("runtime failure = %d %s", r.status, r.body)
	}
	l := s.call("GET", "/v1/sandboxes?state=Failed", s.keyA, nil)
	var list api.ListSandboxesResponse
	l.decode(t, &list)
	if list.Pagination.TotalItems != 2 || list.Items[0].Status.Reason != "runtime_unavailable" || list.Items[1].Status.Reason != "start_failed" || list.Items[0].Status.Message == "" {
		t.Errorf("failed sandboxes = %s", l.body)
	}
}

func TestIdempotencyKeyOverHTTP(t *testing.T) {
	t.Parallel()
	s := newTS(t)
	a := s.call("POST", "/v1/sandboxes", s.keyA, basicCreate(), api.HeaderIdempotencyKey, "abc")
	b := s.call("POST", "/v1/sandboxes", s.keyA, basicCreate(), api.HeaderIdempotencyKey, "abc")
	var ra, rb api.CreateSandboxResponse
	a.decode(t, &ra)
	b.decode(t, &rb)
	if a.status != 202 || b.status != 202 || ra.ID != rb.ID {
		t.Fatalf("retried create = %d %s / %d %s", a.status, a.body, b.status, b.body)
	}
	other := basicCreate()
	other["timeout"] = 900
	c := s.call("POST", "/v1/sandboxes", s.keyA, other, api.HeaderIdempotencyKey, "abc")
	if c.status != 400 || c.errCode(t) != api.CodeIdempotencyKeyMismatch {
		t.Fatalf("reused key, other body = %d %s", c.status, c.body)
	}
}

func TestListFilteringAndPagination(t *testing.T) {
	t.Parallel()
	s := newTS(t)
	var ids []string
	for i := range 5 {
		b := basicCreate()
		team := "red"
		if i%2 == 1 {
			team = "blue"
		}
		b["metadata"] = map[string]string{"example.com/team": team, "note": "demo_test"}
		ids = append(ids, s.create(s.keyA, b).ID)
	}
	if r := s.call("POST", "/v1/sandboxes/"+ids[0]+"/pause", s.keyA, nil); r.status != 202 {
		t.Fatalf("pause = %d %s", r.status, r.body)
	}
	s.create(s.keyB, basicCreate())

	var list api.ListSandboxesResponse
	r := s.call("GET", "/v1/sandboxes?pageSize=2", s.keyA, nil)
	r.decode(t, &list)
	if list.Pagination != (api.PaginationInfo{Page: 1, PageSize: 2, TotalItems: 5, TotalPages: 3, HasNextPage: true}) {
		t.Errorf("pagination = %+v", list.Pagination)
	}
	if len(list.Items) != 2 || list.Items[0].ID != ids[4] || list.Items[1].ID != ids[3] {
		t.Errorf("first page is not newest first: %s", r.body)
	}
	r = s.call("GET", "/v1/sandboxes?pageSize=2&page=3", s.keyA, nil)
	r.decode(t, &list)
	if len(list.Items) != 1 || list.Items[0].ID != ids[0] || list.Pagination.HasNextPage {
		t.Errorf("last page = %s", r.body)
	}
	r = s.call("GET", "/v1/sandboxes?state=paused&state=RUNNING", s.keyA, nil)
	r.decode(t, &list)
	if list.Pagination.TotalItems != 5 {
		t.Errorf("state=paused&state=RUNNING matched %d, want 5", list.Pagination.TotalItems)
	}
	r = s.call("GET", "/v1/sandboxes?state=Paused", s.keyA, nil)
	r.decode(t, &list)
	if list.Pagination.TotalItems != 1 || list.Items[0].ID != ids[0] {
		t.Errorf("state=Paused = %s", r.body)
	}
	// The SDKs double-encode the metadata filter: example.com/team=blue&note=demo_test.
	r = s.call("GET", "/v1/sandboxes?metadata=example.com%252Fteam%3Dblue%26note%3Ddemo_test", s.keyA, nil)
	r.decode(t, &list)
	if list.Pagination.TotalItems != 2 {
		t.Errorf("metadata filter matched %d, want 2: %s", list.Pagination.TotalItems, r.body)
	}
	r = s.call("GET", "/v1/sandboxes?page=9", s.keyA, nil)
	r.decode(t, &list)
	if len(list.Items) != 0 || list.Items == nil {
		t.Errorf("a page past the end must be an empty array: %s", r.body)
	}
	for _, bad := range []struct{ q, code string }{
		{"pageSize=201", api.CodeInvalidParameter},
		{"pageSize=0", api.CodeInvalidParameter},
		{"page=0", api.CodeInvalidParameter},
		{"page=x", api.CodeInvalidParameter},
		{"state=Sleeping", api.CodeInvalidParameter},
		{"metadata=a%3D1%26broken", api.CodeInvalidMetadataFormat},
	} {
		r := s.call("GET", "/v1/sandboxes?"+bad.q, s.keyA, nil)
		if r.status != 400 || r.errCode(t) != bad.code {
			t.Errorf("list ?%s = %d %s, want 400 %s", bad.q, r.status, r.body, bad.code)
		}
	}
}

func TestPatchMetadataOverHTTP(t *testing.T) {
	t.Parallel()
	s := newTS(t)
	b := basicCreate()
	b["metadata"] = map[string]string{"team": "a", "old": "x"}
	id := s.create(s.keyA, b).ID
	r := s.call("PATCH", "/v1/sandboxes/"+id+"/metadata", s.keyA, `{"old":null,"env":"prod","missing":null}`)
	var sb api.Sandbox
	r.decode(t, &sb)
	if r.status != 200 || len(sb.Metadata) != 2 || sb.Metadata["env"] != "prod" || sb.Metadata["team"] != "a" {
		t.Fatalf("patch = %d %s", r.status, r.body)
	}
	if r := s.call("PATCH", "/v1/sandboxes/"+id+"/metadata", s.keyA, `{}`); r.status != 200 {
		t.Errorf("empty patch = %d %s", r.status, r.body)
	}
	for _, bad := range []string{`{"x":"bad value!"}`, `{"opensandbox.io/x":"1"}`, `[1]`, `{"x":1}`, ``} {
		if r := s.call("PATCH", "/v1/sandboxes/"+id+"/metadata", s.keyA, bad); r.status != 400 {
			t.Errorf("patch %s = %d %s, want 400", bad, r.status, r.body)
		}
	}
	if r := s.call("PATCH", "/v1/sandboxes/nope/metadata", s.keyA, `{}`); r.status != 404 {
		t.Errorf("patch unknown = %d", r.status)
	}
}

func TestPauseResumeOverHTTP(t *testing.T) {
	t.Parallel()
	s := newTS(t)
	id := s.create(s.keyA, basicCreate()).ID
	state := func() string {
		var sb api.Sandbox
		s.call("GET", "/v1/sandboxes/"+id, s.keyA, nil).decode(t, &sb)
		return sb.Status.State
	}
	steps := []struct {
		op     string
		status int
		state  string
	}{
		{"resume", 409, api.StateRunning},
		{"pause", 202, api.StatePaused},
		{"pause", 409, api.StatePaused},
		{"resume", 202, api.StateRunning},
	}
	for _, st := range steps {
		r := s.call("POST", "/v1/sandboxes/"+id+"/"+st.op, s.keyA, nil)
		if r.status != st.status {
			t.Fatalf("%s = %d %s, want %d", st.op, r.status, r.body, st.status)
		}
		// Completed before the 202: the state is visible at once.
		if got := state(); got != st.state {
			t.Fatalf("after %s state = %s, want %s", st.op, got, st.state)
		}
	}
	if r := s.call("POST", "/v1/sandboxes/nope/pause", s.keyA, nil); r.status != 404 {
		t.Errorf("pause unknown = %d", r.status)
	}
}

func TestRenewOverHTTP(t *testing.T) {
	t.Parallel()
	s := newTS(t)
	id := s.create(s.keyA, basicCreate()).ID
	at := time.Now().Add(2 * time.Hour).UTC().Truncate(time.Second)
	r := s.call("POST", "/v1/sandboxes/"+id+"/renew-expiration", s.keyA, map[string]string{"expiresAt": at.Format(time.RFC3339)})
	var out api.RenewSandboxExpirationResponse
	r.decode(t, &out)
	if r.status != 200 || !out.ExpiresAt.Equal(at) {
		t.Fatalf("renew = %d %s", r.status, r.body)
	}
	naive := time.Now().Add(3 * time.Hour).UTC().Format("2006-01-02T15:04:05")
	if r := s.call("POST", "/v1/sandboxes/"+id+"/renew-expiration", s.keyA, map[string]string{"expiresAt": naive}); r.status != 200 {
		t.Errorf("naive timestamp (UTC) = %d %s", r.status, r.body)
	}
	for _, bad := range []struct {
		body string
		code string
	}{
		{`{"expiresAt":"2001-01-01T00:00:00Z"}`, api.CodeInvalidExpiration},
		{`{"expiresAt":"tomorrow"}`, api.CodeInvalidExpiration},
		{`{}`, api.CodeInvalidParameter},
		{`{"expiresAt":12}`, api.CodeInvalidRequestBody},
	} {
		r := s.call("POST", "/v1/sandboxes/"+id+"/renew-expiration", s.keyA, bad.body)
		if r.status != 400 || r.errCode(t) != bad.code {
			t.Errorf("renew %s = %d %s, want 400 %s", bad.body, r.status, r.body, bad.code)
		}
	}
	manual := basicCreate()
	delete(manual, "timeout")
	mid := s.create(s.keyA, manual).ID
	r = s.call("POST", "/v1/sandboxes/"+mid+"/renew-expiration", s.keyA, map[string]string{"expiresAt": at.Format(time.RFC3339)})
	if r.status != 409 || r.errCode(t) != api.CodeInvalidExpiration {
		t.Errorf("renew manual-cleanup = %d %s", r.status, r.body)
	}
}

func TestDeleteOverHTTP(t *testing.T) {
	t.Parallel()
	s := newTS(t)
	id := s.create(s.keyA, basicCreate()).ID
	if r := s.call("DELETE", "/v1/sandboxes/"+id, s.keyA, nil); r.status != 204 || len(r.body) != 0 {
		t.Fatalf("delete = %d %s", r.status, r.body)
	}
	if r := s.call("GET", "/v1/sandboxes/"+id, s.keyA, nil); r.status != 404 || r.errCode(t) != api.CodeSandboxNotFound {
		t.Errorf("get after delete = %d %s", r.status, r.body)
	}
	if r := s.call("DELETE", "/v1/sandboxes/"+id, s.keyA, nil); r.status != 404 {
		t.Errorf("second delete = %d %s", r.status, r.body)
	}
}

func TestEndpoints(t *testing.T) {
	t.Parallel()
	s := newTS(t)
	id := s.create(s.keyA, basicCreate()).ID
	var ep api.Endpoint
	r := s.call("GET", "/v1/sandboxes/"+id+"/endpoints/44772", s.keyA, nil)
	r.decode(t, &ep)
	if r.status != 200 || !strings.HasPrefix(ep.Endpoint, "127.0.0.1:") || ep.Headers[api.HeaderExecdToken] == "" {
		t.Fatalf("execd endpoint = %d %s", r.status, r.body)
	}
	if strings.Contains(ep.Endpoint, "://") {
		t.Errorf("endpoint has a scheme: %q", ep.Endpoint)
	}
	r = s.call("GET", "/v1/sandboxes/"+id+"/endpoints/8080", s.keyA, nil)
	ep = api.Endpoint{}
	r.decode(t, &ep)
	if ep.Headers[api.HeaderExecdToken] != "" {
		t.Errorf("a user port's endpoint carries the execd token: %s", r.body)
	}
	r = s.call("GET", "/v1/sandboxes/"+id+"/endpoints/18080", s.keyA, nil)
	ep = api.Endpoint{}
	r.decode(t, &ep)
	if ep.Headers[api.HeaderEgressToken] == "" {
		t.Errorf("egress endpoint lacks its token header: %s", r.body)
	}
	r = s.call("GET", "/v1/sandboxes/"+id+"/endpoints/8080?use_server_proxy=true", s.keyA, nil)
	r.decode(t, &ep)
	if !strings.HasSuffix(ep.Endpoint, "/sandboxes/"+id+"/proxy/8080") || strings.Contains(ep.Endpoint, "://") {
		t.Errorf("proxy endpoint = %q", ep.Endpoint)
	}
	for _, bad := range []string{"0", "65536", "http", "-1"} {
		if r := s.call("GET", "/v1/sandboxes/"+id+"/endpoints/"+bad, s.keyA, nil); r.status != 400 {
			t.Errorf("endpoint port %s = %d", bad, r.status)
		}
	}
	for _, q := range []string{"use_server_proxy=perhaps", "expires=1700000000", "use_server_proxy=true&expires=1"} {
		if r := s.call("GET", "/v1/sandboxes/"+id+"/endpoints/8080?"+q, s.keyA, nil); r.status != 400 {
			t.Errorf("endpoint ?%s = %d %s", q, r.status, r.body)
		}
	}
	if r := s.call("GET", "/v1/sandboxes/nope/endpoints/8080", s.keyA, nil); r.status != 404 {
		t.Errorf("endpoint of unknown = %d", r.status)
	}
}

func TestSnapshotsOverHTTP(t *testing.T) {
	t.Parallel()
	s := newTS(t)
	id := s.create(s.keyA, basicCreate()).ID
	r := s.call("POST", "/v1/sandboxes/"+id+"/snapshots", s.keyA, map[string]string{"name": "before-import"})
	var sn api.Snapshot
	r.decode(t, &sn)
	if r.status != 202 || sn.Status.State != api.SnapshotCreating || sn.Name != "before-import" || r.header.Get("Location") != "/v1/snapshots/"+sn.ID {
		t.Fatalf("create snapshot = %d %s", r.status, r.body)
	}
	testutil.WaitFor(t, 5*time.Second, "snapshot Ready", func() bool {
		s.call("GET", "/v1/snapshots/"+sn.ID, s.keyA, nil).decode(t, &sn)
		return sn.Status.State == api.SnapshotReady
	})
	if r := s.call("POST", "/v1/sandboxes/"+id+"/snapshots", s.keyA, nil); r.status != 202 {
		t.Errorf("snapshot without a body = %d %s", r.status, r.body)
	}
	var list api.ListSnapshotsResponse
	s.call("GET", "/v1/snapshots?sandboxId="+id+"&state=Ready&state=Creating", s.keyA, nil).decode(t, &list)
	if list.Pagination.TotalItems != 2 {
		t.Errorf("list snapshots = %+v", list.Pagination)
	}
	if r := s.call("GET", "/v1/snapshots?state=Bogus", s.keyA, nil); r.status != 400 {
		t.Errorf("bad state filter = %d", r.status)
	}
	restored := s.create(s.keyA, map[string]any{"snapshotId": sn.ID, "timeout": 600})
	var got api.Sandbox
	s.call("GET", "/v1/sandboxes/"+restored.ID, s.keyA, nil).decode(t, &got)
	if got.SnapshotID != sn.ID || got.Image != nil || strings.Join(got.Entrypoint, " ") != "tail -f /dev/null" {
		t.Errorf("restored sandbox = %+v", got)
	}
	if r := s.call("GET", "/v1/snapshots/"+sn.ID, s.keyB, nil); r.status != 404 {
		t.Errorf("other tenant's snapshot = %d", r.status)
	}
	if r := s.call("DELETE", "/v1/snapshots/"+sn.ID, s.keyA, nil); r.status != 204 {
		t.Errorf("delete snapshot = %d %s", r.status, r.body)
	}
	if r := s.call("DELETE", "/v1/snapshots/"+sn.ID, s.keyA, nil); r.status != 404 {
		t.Errorf("delete snapshot twice = %d %s", r.status, r.body)
	}
	s.call("POST", "/v1/sandboxes/"+id+"/pause", s.keyA, nil)
	if r := s.call("POST", "/v1/sandboxes/"+id+"/snapshots", s.keyA, nil); r.status != 409 || r.errCode(t) != api.CodeSnapshotInvalidSource {
		t.Errorf("snapshot of paused = %d %s", r.status, r.body)
	}
	if r := s.call("POST", "/v1/sandboxes/"+id+"/snapshots", s.keyA, `{"name":""}`); r.status != 409 && r.status != 400 {
		t.Errorf("snapshot with empty name = %d", r.status)
	}
}

func TestUnknownRoutesAndMethods(t *testing.T) {
	t.Parallel()
	s := newTS(t)
	if r := s.call("GET", "/v1/nothing", s.keyA, nil); r.status != 404 || r.errCode(t) != api.CodeRouteNotFound {
		t.Errorf("unknown route = %d %s", r.status, r.body)
	}
	if r := s.call("PUT", "/v1/sandboxes/x", s.keyA, nil); r.status != 405 || r.errCode(t) != api.CodeMethodNotAllowed {
		t.Errorf("PUT sandbox = %d %s", r.status, r.body)
	}
}

// No web page gets to use the API unless its origin is listed: no
// Access-Control-Allow-Origin for others (never "*"), and a listed one
// gets its own origin back.
func TestCORSOnlyForListedOrigins(t *testing.T) {
	t.Parallel()
	s := newTSWith(t, func(c *Config) { c.CORSOrigins = []string{"https://console.example"} })
	r := s.call("OPTIONS", "/v1/sandboxes", "", nil, "Origin", "https://console.example", "Access-Control-Request-Method", "POST")
	if r.status != 204 || r.header.Get("Access-Control-Allow-Origin") != "https://console.example" {
		t.Errorf("a listed origin's preflight = %d %v", r.status, r.header)
	}
	for _, origin := range []string{"http://evil.example", "null", "https://console.example.evil"} {
		r := s.call("OPTIONS", "/v1/sandboxes", "", nil, "Origin", origin, "Access-Control-Request-Method", "POST")
		if r.status == 204 || r.header.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("preflight from %s = %d %v", origin, r.status, r.header)
		}
		r = s.call("GET", "/v1/sandboxes", s.keyA, nil, "Origin", origin)
		if got := r.header.Get("Access-Control-Allow-Origin"); got != "" {
			t.Errorf("an authenticated answer to %s carries Access-Control-Allow-Origin %q", origin, got)
		}
	}
}

// With --insecure-no-auth a web page must not be able to drive the
// server: not by DNS rebinding (a Host that is a page's name), not from
// another origin; clients without a browser (no Origin, an IP or
// localhost Host) work.
func TestInsecureNoAuthRefusesWebPages(t *testing.T) {
	t.Parallel()
	s := newTSWith(t, func(c *Config) { c.InsecureNoAuth = true })
	for _, tc := range []struct {
		name   string
		hdr    []string
		status int
	}{
		{"an IP address", []string{"Host", "127.0.0.1:8080"}, 200},
		{"IPv6 loopback", []string{"Host", "[::1]:8080"}, 200},
		{"localhost", []string{"Host", "localhost:8080"}, 200},
		{"a localhost subdomain", []string{"Host", "api.localhost"}, 200},
		{"a rebinding page's name", []string{"Host", "attacker.example:8080"}, 401},
		{"a name that only starts like localhost", []string{"Host", "localhost.attacker.example"}, 401},
		{"a web page's request", []string{"Host", "127.0.0.1:8080", "Origin", "http://attacker.example"}, 401},
		{"another port's page", []string{"Host", "127.0.0.1:8080", "Origin", "http://127.0.0.1:9999"}, 401},
		{"a sandbox's page (opaque origin)", []string{"Host", "127.0.0.1:8080", "Origin", "null"}, 401},
		{"the console (this origin)", []string{"Host", "127.0.0.1:8080", "Origin", "http://127.0.0.1:8080"}, 200},
	} {
		if r := s.call("GET", "/v1/sandboxes", "", nil, tc.hdr...); r.status != tc.status {
			t.Errorf("%s: %d %s, want %d", tc.name, r.status, r.body, tc.status)
		}
	}
}

// TestContractCatchesDrift proves the validation the other tests rely on
// fails on a renamed field, a missing required field and an undocumented
// status.
func TestContractCatchesDrift(t *testing.T) {
	t.Parallel()
	c := contracts.Get(t, contracttest.Lifecycle)
	h := http.Header{"Content-Type": {"application/json"}, api.HeaderRequestID: {"8cb2e1d5-7961-40f7-b810-fa48f383fc97"}}
	good := `{"id":"a","status":{"state":"Running"},"entrypoint":["x"],"createdAt":"2026-01-01T00:00:00Z"}`
	if err := c.Check("GET", "/sandboxes/a", "", 200, h, []byte(good)); err != nil {
		t.Fatalf("a correct answer fails validation: %v", err)
	}
	for name, tc := range map[string]struct {
		status int
		body   string
	}{
		"missing createdAt":  {200, `{"id":"a","status":{"state":"Running"},"entrypoint":["x"]}`},
		"status as string":   {200, `{"id":"a","status":"Running","entrypoint":["x"],"createdAt":"2026-01-01T00:00:00Z"}`},
		"undocumented 418":   {418, `{"code":"x","message":"y"}`},
		"error without code": {404, `{"message":"y"}`},
		"null expiresAt":     {200, `{"id":"a","status":{"state":"Running"},"entrypoint":["x"],"createdAt":"2026-01-01T00:00:00Z","expiresAt":null}`},
	} {
		if err := c.Check("GET", "/sandboxes/a", "", tc.status, h, []byte(tc.body)); err == nil {
			t.Errorf("%s: drift not caught", name)
		}
	}
}

func TestEventsOverHTTP(t *testing.T) {
	t.Parallel()
	s := newTS(t)
	id := s.create(s.keyA, basicCreate()).ID
	s.call("POST", "/v1/sandboxes/"+id+"/pause", s.keyA, nil)
	var page api.SandboxEventList
	s.call("GET", "/v1/sandboxes/"+id+"/events", s.keyA, nil).decode(t, &page)
	var types []string
	for _, ev := range page.Items {
		types = append(types, ev.Type)
	}
	if got := strings.Join(types, ","); !strings.HasPrefix(got, "created,") || !strings.HasSuffix(got, ",paused") {
		t.Errorf("event types = %s", got)
	}
	if len(page.Items) == 0 || page.Next != page.Items[len(page.Items)-1].Seq {
		t.Fatalf("page = %+v", page)
	}
	var rest api.SandboxEventList
	s.call("GET", fmt.Sprintf("/v1/sandboxes/%s/events?after=%d&limit=5", id, page.Next), s.keyA, nil).decode(t, &rest)
	if len(rest.Items) != 0 || rest.Next != page.Next {
		t.Errorf("after the last = %+v", rest)
	}
	var egress api.SandboxEventList
	s.call("GET", "/v1/sandboxes/"+id+"/events?type=egress", s.keyA, nil).decode(t, &egress)
	if len(egress.Items) != 0 {
		t.Errorf("type=egress without a policy = %+v", egress)
	}
	for _, q := range []string{"after=-1", "after=x", "limit=0", "limit=1001", "limit=x"} {
		if r := s.call("GET", "/v1/sandboxes/"+id+"/events?"+q, s.keyA, nil); r.status != 400 || r.errCode(t) != api.CodeInvalidParameter {
			t.Errorf("%s = %d %s", q, r.status, r.body)
		}
	}
	if r := s.call("GET", "/v1/sandboxes/"+id+"/events", s.keyB, nil); r.status != 404 {
		t.Errorf("another tenant's events = %d %s", r.status, r.body)
	}
	if r := s.call("GET", "/v1/sandboxes/nope/events", s.keyA, nil); r.status != 404 {
		t.Errorf("unknown sandbox = %d", r.status)
	}
	if r := s.call("POST", "/v1/sandboxes/"+id+"/events", s.keyA, nil); r.status != 405 {
		t.Errorf("POST = %d", r.status)
	}
}

// TestConsoleIsServed: the console's files need no key and carry its
// CSP; the API beside them still does.
func TestConsoleIsServed(t *testing.T) {
	t.Parallel()
	s := newTS(t)
	for _, p := range []string{"/ui/", "/ui/sandboxes/x"} {
		r := s.call("GET", p, "", nil)
		if r.status != 200 || !strings.Contains(string(r.body), `<div id="app">`) || !strings.Contains(r.header.Get("Content-Security-Policy"), "frame-ancestors 'none'") {
			t.Errorf("GET %s = %d %v", p, r.status, r.header)
		}
	}
	// /ui redirects to /ui/ (which the client follows).
	if r := s.call("GET", "/ui", "", nil); r.status != 200 || !strings.Contains(string(r.body), `<div id="app">`) {
		t.Errorf("GET /ui = %d %v", r.status, r.header)
	}
	if r := s.call("GET", "/v1/sandboxes", "", nil); r.status != http.StatusUnauthorized {
		t.Errorf("the API without a key = %d", r.status)
	}
}

// TestGetAnswersEachChange: GET answers from a kept encoding of the
// record, which every change replaces: each change shows in the next GET,
// and another tenant's key still finds nothing.
func TestGetAnswersEachChange(t *testing.T) {
	t.Parallel()
	s := newTS(t)
	id := s.create(s.keyA, basicCreate()).ID
	get := func() api.Sandbox {
		t.Helper()
		r := s.call("GET", "/v1/sandboxes/"+id, s.keyA, nil)
		var sb api.Sandbox
		r.decode(t, &sb)
		if r.status != 200 || !strings.HasSuffix(string(r.body), "}\n") {
			t.Fatalf("GET = %d %q", r.status, r.body)
		}
		return sb
	}
	if first, again := get(), get(); first.ID != id || !reflect.DeepEqual(first, again) {
		t.Fatalf("two GETs differ: %+v, %+v", first, again)
	}
	if r := s.call("PATCH", "/v1/sandboxes/"+id+"/metadata", s.keyA, `{"env":"prod"}`); r.status != 200 {
		t.Fatalf("patch = %d %s", r.status, r.body)
	}
	if sb := get(); sb.Metadata["env"] != "prod" {
		t.Errorf("after a patch, GET has metadata %v", sb.Metadata)
	}
	at := time.Now().Add(5 * time.Hour).UTC().Truncate(time.Second)
	if r := s.call("POST", "/v1/sandboxes/"+id+"/renew-expiration", s.keyA, map[string]string{"expiresAt": at.Format(time.RFC3339)}); r.status != 200 {
		t.Fatalf("renew = %d %s", r.status, r.body)
	}
	if sb := get(); sb.ExpiresAt == nil || !sb.ExpiresAt.Equal(at) {
		t.Errorf("after a renewal, GET has expiresAt %v, want %v", sb.ExpiresAt, at)
	}
	if r := s.call("POST", "/v1/sandboxes/"+id+"/pause", s.keyA, nil); r.status != 202 {
		t.Fatalf("pause = %d %s", r.status, r.body)
	}
	if sb := get(); sb.Status.State != api.StatePaused {
		t.Errorf("after a pause, GET has state %s", sb.Status.State)
	}
	if r := s.call("GET", "/v1/sandboxes/"+id, s.keyB, nil); r.status != 404 {
		t.Errorf("another tenant's GET = %d %s", r.status, r.body)
	}
	if r := s.call("DELETE", "/v1/sandboxes/"+id, s.keyA, nil); r.status != 204 {
		t.Fatalf("delete = %d %s", r.status, r.body)
	}
	if r := s.call("GET", "/v1/sandboxes/"+id, s.keyA, nil); r.status == 200 {
		var sb api.Sandbox
		r.decode(t, &sb)
		if sb.Status.State == api.StatePaused {
			t.Errorf("after a delete, GET still has the paused record: %s", r.body)
		}
	}
}

// TestBodyCacheStaysBounded: bodies of sandboxes long gone do not pile
// up; a body is served only for the very record it was made from.
func TestBodyCacheStaysBounded(t *testing.T) {
	var c bodyCache
	for i := range 3 * maxCachedBodies {
		c.put(&sandbox.Sandbox{ID: strconv.Itoa(i)}, []byte("x"))
		if len(c.bodies) > maxCachedBodies {
			t.Fatalf("%d bodies kept after %d puts", len(c.bodies), i+1)
		}
	}
	sb := &sandbox.Sandbox{ID: "a"}
	c.put(sb, []byte("a"))
	if b, ok := c.get(sb); !ok || string(b) != "a" {
		t.Fatalf("get = %q %v", b, ok)
	}
	if _, ok := c.get(&sandbox.Sandbox{ID: "a"}); ok {
		t.Fatal("a body was served for another record of the same sandbox")
	}
}
