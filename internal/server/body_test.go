// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/internal/sandbox"
)

// TestSandboxBodyIsTheWireShape: what the server writes for a sandbox
// (sandboxBody) has api.Sandbox's fields, names and options in its order,
// and encodes to the same bytes for records with and without each
// optional part, times with and without fractions and zones.
func TestSandboxBodyIsTheWireShape(t *testing.T) {
	sameFields(t, reflect.TypeFor[api.Sandbox](), reflect.TypeFor[sandboxBody]())
	sameFields(t, reflect.TypeFor[api.SandboxStatus](), reflect.TypeFor[statusBody]())
	sameFields(t, reflect.TypeFor[api.ListSandboxesResponse](), reflect.TypeFor[listBody]())

	s := newTS(t)
	zone := time.FixedZone("x", 5*3600+1800)
	for i, sb := range []*sandbox.Sandbox{
		{ID: "a", CreatedAt: time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC), Status: sandbox.Status{State: sandbox.StatePending}},
		{
			ID: "b", SnapshotID: "snap", Image: &sandbox.Image{URI: "host"}, Platform: &sandbox.Platform{OS: "linux", Arch: "amd64"},
			Metadata: map[string]string{"k": `<img src=x onerror=alert(1)> "q" \ ü`, "e": ""}, Entrypoint: []string{"sleep", "9"},
			CreatedAt: time.Date(2026, 12, 7, 10, 0, 0, 123456789, zone), ExpiresAt: time.Date(2027, 1, 1, 0, 0, 0, 120000, time.UTC),
			Status: sandbox.Status{State: sandbox.StateRunning, Reason: "started", Message: "with\nnewline \u2028",
				LastTransitionAt: time.Date(2026, 12, 7, 10, 0, 1, 500000000, zone)},
			Handle: []byte(`{"driver":"fake","id":"b"}`), Driver: "fake",
		},
	} {
		want := s.srv.toSandbox(sb)
		got := s.srv.body(sb)
		wb, err := json.Marshal(want)
		if err != nil {
			t.Fatal(err)
		}
		gb, err := json.Marshal(got)
		if err != nil {
			t.Fatal(err)
		}
		if string(wb) != string(gb) {
			t.Errorf("record %d:\napi.Sandbox  %s\nsandboxBody %s", i, wb, gb)
		}
		lw, _ := json.Marshal(api.ListSandboxesResponse{Items: []api.Sandbox{want}})
		lg, _ := json.Marshal(listBody{Items: []sandboxBody{got}})
		if string(lw) != string(lg) {
			t.Errorf("list %d:\n%s\n%s", i, lw, lg)
		}
	}
}

// sameFields checks that a and b have fields of the same names and JSON
// tags in the same order, those of time type in a being strings in b.
func sameFields(t *testing.T, a, b reflect.Type) {
	t.Helper()
	if a.NumField() != b.NumField() {
		t.Fatalf("%v has %d fields, %v %d", a, a.NumField(), b, b.NumField())
	}
	for i := range a.NumField() {
		fa, fb := a.Field(i), b.Field(i)
		if fa.Name != fb.Name || fa.Tag.Get("json") != fb.Tag.Get("json") {
			t.Errorf("%v field %d: %s %q, %v has %s %q", a, i, fa.Name, fa.Tag.Get("json"), b, fb.Name, fb.Tag.Get("json"))
		}
	}
}
