// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package lifecycle

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/corral-dev/corral/internal/driver"
	"github.com/corral-dev/corral/internal/driver/fakedriver"
	"github.com/corral-dev/corral/internal/quota"
	"github.com/corral-dev/corral/internal/sandbox"
	"github.com/corral-dev/corral/internal/store"
)

// slowInserts are the store's records with every insert held back.
type slowInserts struct{ *store.Store }

func (s slowInserts) InsertSandbox(ctx context.Context, sb *sandbox.Sandbox, idem *sandbox.Idempotency, ev *sandbox.Event) (*sandbox.Idempotency, error) {
	time.Sleep(200 * time.Millisecond)
	return s.Store.InsertSandbox(ctx, sb, idem, ev)
}

// slowResumes is the fake runtime taking its time to resume.
type slowResumes struct{ *fakedriver.Driver }

func (d slowResumes) Resume(ctx context.Context, id string) error {
	time.Sleep(500 * time.Millisecond)
	return d.Driver.Resume(ctx, id)
}

// A request's room counts once: while its record is written (the
// record enters the table first) and while a resumed sandbox is
// Resuming, the reservation and the record are not both counted. Two
// creates racing for a room of two are both made; a create during a
// slow resume takes the last of a room of three.
func TestRoomCountsOnceWhileARequestRuns(t *testing.T) {
	lim := quota.Limits{Running: 2, Policy: quota.PolicyReject}
	r := newRigWith(t, t.TempDir(), func(c *Config, _ *fakedriver.Config) { c.Quota = lim },
		func(st *store.Store) Records { return slowInserts{st} })
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range errs {
		wg.Go(func() { _, errs[i] = r.m.Create(context.Background(), req("t1", "fake:ok")) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("two creates for a room of two: %v", err)
	}
	var qe *quota.Error
	if _, err := r.m.Create(context.Background(), req("t1", "fake:ok")); !errors.As(err, &qe) {
		t.Fatalf("a third create = %v, want refused", err)
	}

	// A room of three: one running, one paused and resumed slowly; a
	// create during the resume takes the last room, the next is refused.
	dir := t.TempDir()
	d, err := fakedriver.New(fakedriver.Config{Dir: filepath.Join(dir, "fake")})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	st, err := store.Open(t.Context(), filepath.Join(dir, "corral.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	m, err := New(Config{Driver: slowResumes{d}, DriverName: fakedriver.Name, Store: st, MaintainInterval: time.Hour,
		Quota: quota.Limits{Running: 3, Policy: quota.PolicyReject}})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = m.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	mustCreate(t, m, req("t1", "fake:ok"))
	paused := mustCreate(t, m, req("t1", "fake:ok"))
	if err := m.Pause(ctx, "t1", paused.ID); err != nil {
		t.Fatal(err)
	}
	resumed := make(chan error, 1)
	go func() { resumed <- m.Resume(ctx, "t1", paused.ID) }()
	deadline := time.Now().Add(5 * time.Second)
	for {
		sb, err := m.Get(ctx, "t1", paused.ID)
		if err != nil {
			t.Fatal(err)
		}
		if sb.Status.State == sandbox.StateResuming {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the sandbox is %s, never Resuming", sb.Status.State)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, err := m.Create(ctx, req("t1", "fake:ok")); err != nil {
		t.Errorf("a create during a resume, with one room of three left: %v", err)
	}
	if err := <-resumed; err != nil {
		t.Fatal(err)
	}
	if _, err := m.Create(ctx, req("t1", "fake:ok")); !errors.As(err, &qe) {
		t.Errorf("a fourth create = %v, want refused", err)
	}
}

// warmFake is the fake runtime with a warm pool of any size: every
// claim hands out a sandbox of a new ID, made at the create.
type warmFake struct{ *fakedriver.Driver }

func (warmFake) Claim(driver.Spec) (string, bool) { return sandbox.NewID(), true }

// A create that takes a warm sandbox (of another ID than the one it was
// let in under) counts its room once too: two such creates racing for a
// room of two, while their records are written slowly, are both made.
func TestRoomCountsOnceForAWarmCreate(t *testing.T) {
	dir := t.TempDir()
	d, err := fakedriver.New(fakedriver.Config{Dir: filepath.Join(dir, "fake")})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	st, err := store.Open(t.Context(), filepath.Join(dir, "corral.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	m, err := New(Config{Driver: warmFake{d}, DriverName: fakedriver.Name, Store: st, Records: slowInserts{st}, MaintainInterval: time.Hour,
		Quota: quota.Limits{Running: 2, Policy: quota.PolicyReject}})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = m.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range errs {
		wg.Go(func() { _, errs[i] = m.Create(ctx, req("t1", "fake:ok")) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("two warm creates for a room of two: %v", err)
	}
	var qe *quota.Error
	if _, err := m.Create(ctx, req("t1", "fake:ok")); !errors.As(err, &qe) {
		t.Fatalf("a third create = %v, want refused", err)
	}
}
