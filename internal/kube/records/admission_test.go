// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package records_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/corral-dev/corral/internal/driver/fakedriver"
	"github.com/corral-dev/corral/internal/kube/kubetest"
	"github.com/corral-dev/corral/internal/kube/records"
	"github.com/corral-dev/corral/internal/lifecycle"
	"github.com/corral-dev/corral/internal/quota"
	"github.com/corral-dev/corral/internal/sandbox"
	"github.com/corral-dev/corral/internal/store"
)

// slowInsert is the cluster's records with every insert held back, so
// the moment between a server letting a create in and its record
// reaching the other servers is wide: without claims both servers
// would let in the same room.
type slowInsert struct{ *records.Records }

func (s slowInsert) InsertSandbox(ctx context.Context, sb *sandbox.Sandbox, idem *sandbox.Idempotency, ev *sandbox.Event) (*sandbox.Idempotency, error) {
	time.Sleep(300 * time.Millisecond)
	return s.Records.InsertSandbox(ctx, sb, idem, ev)
}

// manager is a lifecycle Manager over rec with the fake runtime in dir
// (shared by the servers, as a cluster is) and the given quotas.
func manager(t *testing.T, rec lifecycle.Records, dir string, q quota.Limits) *lifecycle.Manager {
	t.Helper()
	st, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "corral.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	d, err := fakedriver.New(fakedriver.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	m, err := lifecycle.New(lifecycle.Config{Driver: d, DriverName: fakedriver.Name, Store: st, Records: rec, Quota: q,
		MaintainInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = m.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return m
}

// Two servers sharing records, a tenant's room of two, and eight
// creates racing through them while each record takes 300 ms to be
// written: two are made, six refused as over the quota. Once a sandbox
// is deleted, its room is taken again through the other server.
func TestTwoServersAdmitNoMoreThanTheQuota(t *testing.T) {
	c := kubetest.RequireKube(t)
	ns := c.Namespace(t)
	dir := t.TempDir()
	lim := quota.Limits{Running: 2, Policy: quota.PolicyReject}
	ms := []*lifecycle.Manager{
		manager(t, slowInsert{open(t, c, ns, "srv")}, dir, lim),
		manager(t, slowInsert{open(t, c, ns, "srv")}, dir, lim),
	}
	var mu sync.Mutex
	var made []string
	refused := 0
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			sb, err := ms[i%2].Create(context.Background(), lifecycle.CreateRequest{Tenant: "t1", Image: &sandbox.Image{URI: "fake:ok"},
				Entrypoint: []string{"sleep", "infinity"}, Timeout: time.Hour})
			mu.Lock()
			defer mu.Unlock()
			var qe *quota.Error
			switch {
			case err == nil:
				made = append(made, sb.ID)
			case errors.As(err, &qe) && qe.Limit == "running":
				refused++
			default:
				t.Errorf("create = %v", err)
			}
		})
	}
	wg.Wait()
	if len(made) != 2 || refused != 6 {
		t.Fatalf("made %d and refused %d of 8 creates through two servers, want 2 and 6", len(made), refused)
	}
	if err := ms[0].Delete(context.Background(), "t1", made[0]); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := ms[1].Create(context.Background(), lifecycle.CreateRequest{Tenant: "t1", Image: &sandbox.Image{URI: "fake:ok"},
			Entrypoint: []string{"sleep", "infinity"}, Timeout: time.Hour})
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the freed room was not let in through the other server: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
