// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/internal/sandbox"
)

// The diagnostics routes serve the entrypoint's console and the event
// log: the diagnostics API's descriptor with a scope, text without one;
// what they cannot serve is a 501 naming what they can, bad input a 400,
// another tenant's sandbox a 404.
func TestDiagnostics(t *testing.T) {
	t.Parallel()
	s := newTS(t)
	id := s.create(s.keyA, basicCreate()).ID
	base := "/v1/sandboxes/" + id + "/diagnostics/"
	if err := s.mgr.AppendAudit(t.Context(), []sandbox.Event{{At: time.Now().UTC(), SandboxID: id, Type: "egress.dns", Reason: "deny", Message: "evil.test: default"}}); err != nil {
		t.Fatal(err)
	}

	var d api.DiagnosticContent
	r := s.call("GET", base+"logs?scope=container", s.keyA, nil)
	r.decode(t, &d)
	if r.status != 200 || d.SandboxID != id || d.Kind != "logs" || d.Scope != "container" || d.Delivery != "inline" ||
		!strings.Contains(d.Content, "python -m http.server") || d.ContentLength != len(d.Content) || d.Truncated {
		t.Errorf("logs = %d %s", r.status, r.body)
	}
	r = s.call("GET", base+"logs?tail=1", s.keyA, nil)
	if r.status != 200 || r.header.Get("Deprecation") != "true" || !strings.HasPrefix(r.header.Get("Content-Type"), "text/plain") ||
		strings.Count(string(r.body), "\n") != 1 || !strings.Contains(string(r.body), "http.server") {
		t.Errorf("legacy logs = %d %v %q", r.status, r.header, r.body)
	}

	events := func(scope string) string {
		t.Helper()
		var d api.DiagnosticContent
		r := s.call("GET", base+"events?scope="+scope, s.keyA, nil)
		r.decode(t, &d)
		if r.status != 200 || d.Kind != "events" || d.Scope != scope {
			t.Errorf("events %s = %d %s", scope, r.status, r.body)
		}
		return d.Content
	}
	if c := events("lifecycle"); !strings.Contains(c, " created ") || !strings.Contains(c, " started ") || strings.Contains(c, "egress.dns") {
		t.Errorf("lifecycle events = %q", c)
	}
	if c := events("network"); !strings.Contains(c, "egress.dns deny evil.test: default") || strings.Contains(c, " created ") {
		t.Errorf("network events = %q", c)
	}
	if c := events("all"); !strings.Contains(c, " created ") || !strings.Contains(c, "egress.dns") {
		t.Errorf("all events = %q", c)
	}
	var lim api.DiagnosticContent
	s.call("GET", base+"events?scope=all&limit=1", s.keyA, nil).decode(t, &lim)
	if strings.Count(lim.Content, "\n") != 1 || !lim.Truncated || len(lim.Warnings) != 1 || !strings.Contains(lim.Content, "egress.dns") {
		t.Errorf("the last event = %+v", lim)
	}
	if r := s.call("GET", base+"events?limit=2", s.keyA, nil); r.status != 200 || strings.Count(string(r.body), "\n") != 2 || r.header.Get("Deprecation") != "true" {
		t.Errorf("legacy events = %d %q", r.status, r.body)
	}

	for _, tc := range []struct {
		path, key string
		status    int
		code      string
	}{
		{base + "logs?scope=process", s.keyA, http.StatusNotImplemented, api.CodeDiagnosticsNotImplemented},
		{base + "events?scope=container", s.keyA, http.StatusNotImplemented, api.CodeDiagnosticsNotImplemented},
		{base + "logs?scope=everything", s.keyA, http.StatusBadRequest, api.CodeInvalidParameter},
		{base + "logs?tail=0", s.keyA, http.StatusBadRequest, api.CodeInvalidParameter},
		{base + "logs?since=10m", s.keyA, http.StatusBadRequest, api.CodeInvalidParameter},
		{base + "events?scope=all&limit=5000", s.keyA, http.StatusBadRequest, api.CodeInvalidParameter},
		{base + "logs?scope=all", s.keyB, http.StatusNotFound, api.CodeSandboxNotFound},
		{base + "events", s.keyB, http.StatusNotFound, api.CodeSandboxNotFound},
		{base + "logs", "", http.StatusUnauthorized, api.CodeMissingAPIKey},
	} {
		if r := s.call("GET", tc.path, tc.key, nil); r.status != tc.status || r.errCode(t) != tc.code {
			t.Errorf("GET %s = %d %s, want %d %s", tc.path, r.status, r.body, tc.status, tc.code)
		}
	}
	if r := s.call("POST", base+"logs", s.keyA, nil); r.status != http.StatusMethodNotAllowed {
		t.Errorf("POST logs = %d", r.status)
	}
}
