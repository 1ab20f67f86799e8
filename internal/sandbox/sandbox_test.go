// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package sandbox

import (
	"encoding/json"
	"errors"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/corral-dev/corral/errdefs"
)

func TestParseStateIgnoresCase(t *testing.T) {
	t.Parallel()
	for _, s := range States() {
		for _, name := range []string{s.String(), strings.ToLower(s.String()), strings.ToUpper(s.String())} {
			got, err := ParseState(name)
			if err != nil || got != s {
				t.Errorf("ParseState(%q) = %v, %v; want %v", name, got, err, s)
			}
		}
	}
	if _, err := ParseState("Unknown"); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("ParseState(Unknown) = %v, want ErrInvalidArgument", err)
	}
}

func TestTransitionTable(t *testing.T) {
	t.Parallel()
	allowed := map[[2]State]bool{}
	for _, p := range [][2]State{
		{StatePending, StateRunning}, {StatePending, StateStopping}, {StatePending, StateFailed},
		{StateRunning, StatePausing}, {StateRunning, StateStopping}, {StateRunning, StateTerminated}, {StateRunning, StateFailed},
		{StatePausing, StatePaused}, {StatePausing, StateRunning}, {StatePausing, StateStopping}, {StatePausing, StateTerminated}, {StatePausing, StateFailed},
		{StatePaused, StateResuming}, {StatePaused, StateStopping}, {StatePaused, StateFailed},
		{StateResuming, StateRunning}, {StateResuming, StatePaused}, {StateResuming, StateStopping}, {StateResuming, StateTerminated}, {StateResuming, StateFailed},
		{StateStopping, StateTerminated}, {StateStopping, StateFailed},
	} {
		allowed[p] = true
	}
	for _, from := range States() {
		for _, to := range States() {
			if got := CanTransition(from, to); got != allowed[[2]State{from, to}] {
				t.Errorf("CanTransition(%v, %v) = %v", from, to, got)
			}
		}
		if from.Terminal() != (from == StateTerminated || from == StateFailed) {
			t.Errorf("%v.Terminal() = %v", from, from.Terminal())
		}
	}
}

func TestSetStatus(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(100, 0)
	sb := &Sandbox{ID: "x", Status: Status{State: StateRunning, LastTransitionAt: t0}}
	if err := sb.SetStatus(StateRunning, "r", "m", t0.Add(time.Second)); err != nil || !sb.Status.LastTransitionAt.Equal(t0) {
		t.Errorf("same-state SetStatus moved lastTransitionAt: %v %v", sb.Status, err)
	}
	if err := sb.SetStatus(StatePaused, "", "", t0); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Errorf("Running → Paused = %v, want ErrFailedPrecondition", err)
	}
	if err := sb.SetStatus(StatePausing, "p", "", t0.Add(2*time.Second)); err != nil || !sb.Status.LastTransitionAt.Equal(t0.Add(2*time.Second)) {
		t.Errorf("Running → Pausing: %v %v", sb.Status, err)
	}
}

func TestNewIDIsUUIDv4(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for range 1000 {
		id := NewID()
		if len(id) != 36 || id[14] != '4' || !strings.ContainsRune("89ab", rune(id[19])) || seen[id] {
			t.Fatalf("NewID() = %q", id)
		}
		seen[id] = true
	}
}

func TestParseResources(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in   map[string]string
		want Resources
		ok   bool
	}{
		{map[string]string{"cpu": "500m", "memory": "512Mi"}, Resources{CPUMillis: 500, MemoryBytes: 512 << 20}, true},
		{map[string]string{"cpu": "2", "memory": "1G"}, Resources{CPUMillis: 2000, MemoryBytes: 1e9}, true},
		{map[string]string{"cpu": "0.25", "memory": "256m"}, Resources{CPUMillis: 250, MemoryBytes: 256e6}, true},
		{map[string]string{"memory": "1.5Gi", "pids": "100"}, Resources{MemoryBytes: 3 << 29, Pids: 100}, true},
		{map[string]string{"memory": "67108864"}, Resources{MemoryBytes: 64 << 20}, true},
		{map[string]string{"gpu": "0"}, Resources{}, true},
		{nil, Resources{}, true},
		{map[string]string{"cpu": "0"}, Resources{}, false},
		{map[string]string{"cpu": "0.0001"}, Resources{}, false},
		{map[string]string{"cpu": "-1"}, Resources{}, false},
		{map[string]string{"cpu": "1e3"}, Resources{}, false},
		{map[string]string{"cpu": "5000"}, Resources{}, false},
		{map[string]string{"memory": "1Ki"}, Resources{}, false},
		{map[string]string{"memory": "lots"}, Resources{}, false},
		{map[string]string{"memory": ""}, Resources{}, false},
		{map[string]string{"memory": "1.2.3Gi"}, Resources{}, false},
		{map[string]string{"pids": "0"}, Resources{}, false},
		{map[string]string{"gpu": "1"}, Resources{}, false},
		{map[string]string{"disk": "1Gi"}, Resources{DiskBytes: 1 << 30}, true},
		{map[string]string{"storage": "1Gi"}, Resources{}, false},
	}
	for _, tc := range cases {
		got, err := ParseResources(tc.in)
		if tc.ok != (err == nil) || tc.ok && got != tc.want {
			t.Errorf("ParseResources(%v) = %+v, %v; want %+v ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
		if err != nil && !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("ParseResources(%v) error %v is not ErrInvalidArgument", tc.in, err)
		}
		if tc.ok {
			back, err := ParseResources(got.Map())
			if err != nil || back != got {
				t.Errorf("Map round trip of %+v = %+v, %v", got, back, err)
			}
		}
	}
}

func TestValidateMetadata(t *testing.T) {
	t.Parallel()
	good := []map[string]string{
		{"team": "a"}, {"app.kubernetes.io/name": "web"}, {"a": ""}, {"x_y.z-1": strings.Repeat("v", 63)},
		{strings.Repeat("k", 63): "v"},
	}
	for _, md := range good {
		if err := ValidateMetadata(md); err != nil {
			t.Errorf("ValidateMetadata(%v) = %v", md, err)
		}
	}
	bad := []map[string]string{
		{"": "v"}, {"-a": "v"}, {"a-": "v"}, {"a b": "v"}, {"Upper.Case/x": "v"}, {"/x": "v"}, {"a/": "v"},
		{strings.Repeat("k", 64): "v"}, {"k": strings.Repeat("v", 64)}, {"k": "-v"}, {"k": "v v"},
		{"opensandbox.io/id": "x"}, {"corral.dev/tenant": "x"}, {"a/b/c": "v"},
	}
	for _, md := range bad {
		if err := ValidateMetadata(md); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("ValidateMetadata(%v) = %v, want ErrInvalidArgument", md, err)
		}
	}
}

func TestMergePatch(t *testing.T) {
	t.Parallel()
	v := func(s string) *string { return &s }
	got, err := MergePatch(map[string]string{"a": "1", "b": "2"}, map[string]*string{"a": nil, "b": v("3"), "c": v("4"), "zz": nil})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"b": "3", "c": "4"}, got); diff != "" {
		t.Errorf("MergePatch (-want +got):\n%s", diff)
	}
	orig := map[string]string{"a": "1"}
	if _, err := MergePatch(orig, map[string]*string{"a": v("bad value")}); err == nil || orig["a"] != "1" {
		t.Errorf("a bad patch was applied or changed its input: %v %v", err, orig)
	}
}

func TestParseMetadataQuery(t *testing.T) {
	t.Parallel()
	got, err := ParseMetadataQuery("team=a&note=demo%20test&empty=")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"team": "a", "note": "demo test", "empty": ""}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	for _, bad := range []string{"a=1&broken", "=v", "a=1&a=2", "a=%zz", "&"} {
		if _, err := ParseMetadataQuery(bad); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("ParseMetadataQuery(%q) = %v, want ErrInvalidArgument", bad, err)
		}
	}
}

func FuzzParseMetadataQuery(f *testing.F) {
	for _, s := range []string{"a=1", "a=1&b=2", "a%3D=1", "a=1&broken", "", "=", "k=%ff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, q string) {
		md, err := ParseMetadataQuery(q)
		if err != nil {
			if !errors.Is(err, errdefs.ErrInvalidArgument) {
				t.Fatalf("error %v is not ErrInvalidArgument", err)
			}
			return
		}
		for k := range md {
			if k == "" {
				t.Fatalf("empty key accepted from %q", q)
			}
		}
		if !MatchesMetadata(md, md) {
			t.Fatalf("a filter does not match itself")
		}
	})
}

func FuzzParseResources(f *testing.F) {
	for _, s := range []string{"500m", "2", "0.5", "512Mi", "1G", "1e9", "-1", ".", "9999999999999999999Ti"} {
		f.Add("cpu", s)
		f.Add("memory", s)
	}
	f.Fuzz(func(t *testing.T, key, val string) {
		r, err := ParseResources(map[string]string{key: val})
		if err != nil {
			if !errors.Is(err, errdefs.ErrInvalidArgument) {
				t.Fatalf("error %v is not ErrInvalidArgument", err)
			}
			return
		}
		if r.CPUMillis < 0 || r.MemoryBytes < 0 || r.Pids < 0 {
			t.Fatalf("negative limits %+v from %q=%q", r, key, val)
		}
		if r.MemoryBytes != 0 && r.MemoryBytes < MinMemoryBytes {
			t.Fatalf("memory %d below the minimum accepted", r.MemoryBytes)
		}
	})
}

// A metadata PATCH body: whatever it holds, the result is a valid label
// set (or an invalid-argument error), the input map is never modified,
// and applying the same patch again changes nothing.
func FuzzMergePatch(f *testing.F) {
	for _, s := range []string{`{"a":"1"}`, `{"a":null}`, `{"team":"x","app.io/name":"y"}`, `{"corral.dev/x":"1"}`,
		`{"":"x"}`, `{"a":"` + strings.Repeat("v", 64) + `"}`, `{"a/":"1"}`, `{"a":1}`, `[]`, `null`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		var patch map[string]*string
		if json.Unmarshal([]byte(body), &patch) != nil {
			return // the server answers 400 before a patch exists
		}
		md := map[string]string{"keep": "1", "a": "old"}
		out, err := MergePatch(md, patch)
		if md["keep"] != "1" || md["a"] != "old" || len(md) != 2 {
			t.Fatalf("the input was modified: %v", md)
		}
		if err != nil {
			if !errors.Is(err, errdefs.ErrInvalidArgument) {
				t.Fatalf("error %v is not ErrInvalidArgument", err)
			}
			return
		}
		if err := ValidateMetadata(out); err != nil {
			t.Fatalf("patch %q made invalid metadata %v: %v", body, out, err)
		}
		again, err := MergePatch(out, patch)
		if err != nil || !maps.Equal(again, out) {
			t.Fatalf("the patch applied twice: %v, %v (once: %v)", again, err, out)
		}
	})
}
