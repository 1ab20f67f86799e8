// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/corral-dev/corral/errdefs"
	"github.com/corral-dev/corral/internal/auth"
	"github.com/corral-dev/corral/internal/sandbox"
)

func openTemp(t *testing.T) (*Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "corral.db")
	s, err := Open(t.Context(), path)
	if err != nil {
		t.Fatalf("Open = %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, path
}

func sample(id string) *sandbox.Sandbox {
	now := time.Now().UTC().Truncate(time.Microsecond)
	return &sandbox.Sandbox{
		ID: id, Tenant: "t1", Image: &sandbox.Image{URI: "python:3.12"}, Platform: &sandbox.Platform{OS: "linux", Arch: "amd64"},
		Entrypoint: []string{"sleep", "infinity"}, Metadata: map[string]string{"team": "a"},
		Resources:  sandbox.Resources{CPUMillis: 500, MemoryBytes: 512 << 20},
		Extensions: map[string]string{"x": "y"}, NetworkPolicy: json.RawMessage(`{"defaultAction":"deny"}`),
		Status:    sandbox.Status{State: sandbox.StatePending, Reason: sandbox.ReasonProvisioning, LastTransitionAt: now},
		CreatedAt: now, UpdatedAt: now, ExpiresAt: now.Add(time.Hour), Driver: "fake",
		ExecdToken: "tok", EgressToken: "etok",
	}
}

func TestSandboxRoundTripSurvivesReopen(t *testing.T) {
	t.Parallel()
	s, path := openTemp(t)
	sb := sample("a")
	if _, err := s.InsertSandbox(t.Context(), sb, nil, &sandbox.Event{At: sb.CreatedAt, Tenant: "t1", SandboxID: "a", Type: "created"}); err != nil {
		t.Fatalf("InsertSandbox = %v", err)
	}
	sb.Handle = json.RawMessage(`{"id":"a","driver":"fake"}`)
	if err := sb.SetStatus(sandbox.StateRunning, sandbox.ReasonStarted, "", sb.CreatedAt.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := s.UpdateSandbox(t.Context(), sb, &sandbox.Event{Tenant: "t1", SandboxID: "a", Type: "started"}); err != nil {
		t.Fatalf("UpdateSandbox = %v", err)
	}
	_ = s.Close()

	s2, err := Open(t.Context(), path)
	if err != nil {
		t.Fatalf("reopen = %v", err)
	}
	defer s2.Close()
	got, err := s2.LoadSandboxes(t.Context())
	if err != nil || len(got) != 1 {
		t.Fatalf("LoadSandboxes = %v, %v; want one", got, err)
	}
	if diff := cmp.Diff(sb, got[0]); diff != "" {
		t.Errorf("reloaded sandbox differs (-want +got):\n%s", diff)
	}
	evs, err := s2.Events(t.Context(), "a", 0, 10, "")
	if err != nil || len(evs) != 2 || evs[0].Type != "created" || evs[1].Type != "started" {
		t.Errorf("Events = %+v, %v; want created, started", evs, err)
	}
}

func TestInsertSandboxIdempotencyConflictWritesNothing(t *testing.T) {
	t.Parallel()
	s, _ := openTemp(t)
	idem := &sandbox.Idempotency{Tenant: "t1", Key: "k", RequestHash: "h", SandboxID: "a", CreatedAt: time.Now()}
	if _, err := s.InsertSandbox(t.Context(), sample("a"), idem, nil); err != nil {
		t.Fatal(err)
	}
	idem2 := *idem
	idem2.SandboxID = "b"
	prev, err := s.InsertSandbox(t.Context(), sample("b"), &idem2, nil)
	if !errors.Is(err, errdefs.ErrAlreadyExists) || prev == nil || prev.SandboxID != "a" {
		t.Fatalf("InsertSandbox with a used key = %+v, %v; want the binding to a and ErrAlreadyExists", prev, err)
	}
	all, _ := s.LoadSandboxes(t.Context())
	if len(all) != 1 {
		t.Fatalf("after conflict there are %d sandboxes, want 1", len(all))
	}
	// Another tenant may use the same key.
	idem3 := *idem
	idem3.Tenant, idem3.SandboxID = "t2", "c"
	if _, err := s.InsertSandbox(t.Context(), sample("c"), &idem3, nil); err != nil {
		t.Fatalf("same key, other tenant = %v", err)
	}
}

func TestUpdateUnknownSandboxIsNotFound(t *testing.T) {
	t.Parallel()
	s, _ := openTemp(t)
	if err := s.UpdateSandbox(t.Context(), sample("nope"), nil); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("UpdateSandbox(unknown) = %v, want ErrNotFound", err)
	}
}

func TestKeys(t *testing.T) {
	t.Parallel()
	s, _ := openTemp(t)
	k := &auth.APIKey{ID: "k1", Tenant: "t1", Hash: "abc", Prefix: "ck_ab", Admin: true, CreatedAt: time.Now().UTC()}
	if err := s.InsertKey(t.Context(), k); err != nil {
		t.Fatal(err)
	}
	if err := s.InsertKey(t.Context(), &auth.APIKey{ID: "k2", Hash: "abc"}); !errors.Is(err, errdefs.ErrAlreadyExists) {
		t.Fatalf("duplicate hash = %v, want ErrAlreadyExists", err)
	}
	if err := s.RevokeKey(t.Context(), "k1", time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := s.RevokeKey(t.Context(), "zz", time.Now()); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("RevokeKey(unknown) = %v", err)
	}
	keys, _ := s.LoadKeys(t.Context())
	if len(keys) != 1 || keys[0].RevokedAt.IsZero() || !keys[0].Admin {
		t.Fatalf("LoadKeys = %+v", keys)
	}
}

func TestNewerSchemaIsRefused(t *testing.T) {
	t.Parallel()
	s, path := openTemp(t)
	if _, err := s.db.Exec(`INSERT INTO schema_version (version) VALUES (999)`); err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	if _, err := Open(t.Context(), path); err == nil {
		t.Fatal("Open of a database from a newer corral succeeded")
	}
}

// One sandbox's flood of audit events evicts only its own oldest: another
// tenant's sandbox keeps all of its audit.
func TestAuditQuotaIsPerSandbox(t *testing.T) {
	t.Parallel()
	s, _ := openTemp(t)
	ctx := t.Context()
	var victim []sandbox.Event
	for i := range 100 {
		victim = append(victim, sandbox.Event{At: time.Now().UTC(), SandboxID: "victim", Type: "egress.dns", Message: fmt.Sprint(i)})
	}
	if err := s.AppendAudit(ctx, victim); err != nil {
		t.Fatal(err)
	}
	batch := make([]sandbox.Event, 1000)
	for i := range batch {
		batch[i] = sandbox.Event{At: time.Now().UTC(), SandboxID: "flood", Type: "egress.dns", Message: "x"}
	}
	for range 3 * MaxAuditPerSandbox / len(batch) {
		if err := s.AppendAudit(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	count := func(id string) int {
		evs, err := s.Events(ctx, id, 0, 1_000_000, "egress")
		if err != nil {
			t.Fatal(err)
		}
		return len(evs)
	}
	if n := count("victim"); n != 100 {
		t.Errorf("the victim's audit has %d events after another sandbox's flood, want 100", n)
	}
	if n := count("flood"); n > MaxAuditPerSandbox+MaxAuditPerSandbox/10 || n < MaxAuditPerSandbox {
		t.Errorf("the flooding sandbox kept %d events, want about %d", n, MaxAuditPerSandbox)
	}
}
