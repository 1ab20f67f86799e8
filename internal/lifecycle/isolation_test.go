// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package lifecycle

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/errdefs"
	"github.com/corral-dev/corral/internal/driver/fakedriver"
	"github.com/corral-dev/corral/internal/sandbox"
	"github.com/corral-dev/corral/internal/secrets"
	"github.com/corral-dev/corral/internal/store"
)

func codeOf(err error) string {
	var e *errdefs.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

func TestIsolationTierIsChosenPerSandbox(t *testing.T) {
	r := newRig(t, t.TempDir(), func(c *Config, f *fakedriver.Config) {
		f.Tiers = []string{api.IsolationRunc, api.IsolationRunsc}
		c.Isolation = []string{api.IsolationRunsc, api.IsolationRunc}
	})
	if got := r.m.IsolationTiers(); strings.Join(got, ",") != "runsc,runc" {
		t.Errorf("IsolationTiers = %v", got)
	}
	for _, tc := range []struct{ ask, want string }{{"", "runsc"}, {"runc", "runc"}, {"runsc", "runsc"}} {
		rq := req("t1", "fake:ok")
		if tc.ask != "" {
			rq.Extensions = map[string]string{api.ExtensionIsolation: tc.ask}
		}
		sb := waitState(t, r.m, "t1", mustCreate(t, r.m, rq).ID, sandbox.StateRunning)
		if got := r.m.Isolation(sb); got != tc.want {
			t.Errorf("asked %q: isolation %q, want %q", tc.ask, got, tc.want)
		}
	}
}

func TestIsolationTierNotAllowedIsA400NamingTheAllowed(t *testing.T) {
	r := newRig(t, t.TempDir(), func(c *Config, f *fakedriver.Config) {
		f.Tiers = []string{api.IsolationRunc, api.IsolationRunsc}
	})
	for _, ask := range []string{"runsc", "kata", "", "RUNC", "runc-userns"} {
		rq := req("t1", "fake:ok")
		rq.Extensions = map[string]string{api.ExtensionIsolation: ask}
		_, err := r.m.Create(t.Context(), rq)
		if !errors.Is(err, errdefs.ErrInvalidArgument) || codeOf(err) != api.CodeIsolationNotAllowed ||
			!strings.Contains(err.Error(), "allows runc") {
			t.Errorf("asked %q: %v (code %q), want a 400 naming runc", ask, err, codeOf(err))
		}
	}
	if ids := backendIDs(t, r.d); len(ids) != 0 {
		t.Errorf("refused creates left sandboxes: %v", ids)
	}
}

func TestIsolationOnARuntimeWithoutTiers(t *testing.T) {
	r := newRig(t, t.TempDir(), nil)
	if got := r.m.IsolationTiers(); len(got) != 0 {
		t.Errorf("IsolationTiers = %v, want none", got)
	}
	rq := req("t1", "fake:ok")
	rq.Extensions = map[string]string{api.ExtensionIsolation: "runc"}
	if _, err := r.m.Create(t.Context(), rq); codeOf(err) != api.CodeIsolationNotAllowed {
		t.Errorf("create asking a tier = %v, want %s", err, api.CodeIsolationNotAllowed)
	}
}

func TestIsolationTiersTheDriverCannotRunStopTheStart(t *testing.T) {
	for _, tc := range []struct {
		name         string
		driverTiers  []string
		allowed      []string
		wantContains string
	}{
		{"no tiers", nil, []string{"runsc"}, "one isolation tier"},
		{"unknown", []string{"runc"}, []string{"runc", "kata"}, `unknown tier "kata"`},
		{"twice", []string{"runc", "runsc"}, []string{"runc", "runc"}, "named twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			d, err := fakedriver.New(fakedriver.Config{Dir: filepath.Join(dir, "fake"), Tiers: tc.driverTiers})
			if err != nil {
				t.Fatal(err)
			}
			st, err := store.Open(t.Context(), filepath.Join(dir, "corral.db"))
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			_, err = New(Config{Driver: d, DriverName: fakedriver.Name, Store: st, MaintainInterval: time.Hour, Isolation: tc.allowed})
			if err == nil || !strings.Contains(err.Error(), tc.wantContains) {
				t.Errorf("New = %v, want an error containing %q", err, tc.wantContains)
			}
		})
	}
}

// gVisor sandboxes cannot reach the host's secrets socket: a create that
// asks for both is a clear 400, not a sandbox whose fetches never answer.
func TestSecretsOnDemandAreRefusedUnderRunsc(t *testing.T) {
	r := newRig(t, t.TempDir(), func(c *Config, f *fakedriver.Config) {
		f.Tiers = []string{api.IsolationRunc, api.IsolationRunsc}
		c.Isolation = []string{api.IsolationRunc, api.IsolationRunsc}
	})
	rq := req("t1", "fake:ok")
	rq.Extensions = map[string]string{api.ExtensionIsolation: api.IsolationRunsc, secrets.Extension: "db-password"}
	_, err := r.m.Create(t.Context(), rq)
	if !errors.Is(err, errdefs.ErrInvalidArgument) || codeOf(err) != api.CodeAPINotSupported || !strings.Contains(err.Error(), "runsc") {
		t.Errorf("create = %v (code %q), want a 400 naming runsc", err, codeOf(err))
	}
	if ids := backendIDs(t, r.d); len(ids) != 0 {
		t.Errorf("the refused create left sandboxes: %v", ids)
	}
}
