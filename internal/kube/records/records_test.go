// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package records_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/corral-dev/corral/errdefs"
	"github.com/corral-dev/corral/internal/auth"
	"github.com/corral-dev/corral/internal/kube/kubetest"
	"github.com/corral-dev/corral/internal/kube/records"
	"github.com/corral-dev/corral/internal/lifecycle"
	"github.com/corral-dev/corral/internal/sandbox"
	"github.com/corral-dev/corral/internal/testutil"
)

var _ lifecycle.SharedRecords = (*records.Records)(nil)

func open(t *testing.T, c *kubetest.Cluster, ns, server string) *records.Records {
	t.Helper()
	r, err := records.New(context.Background(), records.Config{REST: c.REST, Namespace: ns, ServerID: server})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func record(id string) *sandbox.Sandbox {
	now := time.Now().UTC().Truncate(time.Millisecond)
	return &sandbox.Sandbox{
		ID: id, Tenant: "t1", Image: &sandbox.Image{URI: "busybox"}, Entrypoint: []string{"sleep", "1d"},
		Metadata: map[string]string{"team": "a"}, Resources: sandbox.Resources{CPUMillis: 500, MemoryBytes: 64 << 20},
		CreatedAt: now, UpdatedAt: now, ExpiresAt: now.Add(time.Hour), Driver: "kubernetes",
		ExecdToken: sandbox.NewToken(), EgressToken: sandbox.NewToken(),
		Status: sandbox.Status{State: sandbox.StatePending, Reason: "provisioning", LastTransitionAt: now},
	}
}

func ev(sb *sandbox.Sandbox, typ string) *sandbox.Event {
	return &sandbox.Event{At: time.Now().UTC(), Tenant: sb.Tenant, SandboxID: sb.ID, Type: typ, State: sb.Status.State.String()}
}

// Two servers sharing records: what one writes the other reads back
// exactly and is told about; a write computed from a stale revision is
// refused; events are numbered and bounded; deletes are followed.
func TestRecordsAreSharedAndVersioned(t *testing.T) {
	c := kubetest.RequireKube(t)
	ns := c.Namespace(t)
	a, b := open(t, c, ns, "srv"), open(t, c, ns, "srv")
	other := open(t, c, ns, "someone-else")

	var mu sync.Mutex
	seen, gone := map[string]string{}, map[string]bool{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := b.Follow(ctx, func(sb *sandbox.Sandbox) {
		mu.Lock()
		seen[sb.ID] = sb.Metadata["team"]
		mu.Unlock()
	}, func(id string) {
		mu.Lock()
		gone[id] = true
		mu.Unlock()
	}); err != nil {
		t.Fatal(err)
	}

	sb := record(sandbox.NewID())
	if _, err := a.InsertSandbox(ctx, sb, nil, ev(sb, "created")); err != nil {
		t.Fatal(err)
	}
	if sb.Version == "" {
		t.Fatal("insert set no version")
	}
	got, err := b.GetSandbox(ctx, sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Tenant != sb.Tenant || got.Image.URI != "busybox" || got.Resources != sb.Resources || !got.ExpiresAt.Equal(sb.ExpiresAt) ||
		got.ExecdToken != sb.ExecdToken || got.Status.State != sandbox.StatePending || got.Version != sb.Version || got.Metadata["team"] != "a" {
		t.Errorf("read back %+v, wrote %+v", got, sb)
	}
	if _, err := other.GetSandbox(ctx, sb.ID); err == nil {
		t.Error("a server with another id reads the record")
	}

	// b updates; a's copy is now stale and its update is refused.
	stale := sb.Clone()
	next := got.Clone()
	next.Metadata = map[string]string{"team": "b"}
	if err := b.UpdateSandbox(ctx, next, ev(next, "metadata_patched")); err != nil {
		t.Fatal(err)
	}
	stale.Metadata = map[string]string{"team": "lost"}
	if err := a.UpdateSandbox(ctx, stale, ev(stale, "metadata_patched")); !errors.Is(err, sandbox.ErrConflict) {
		t.Fatalf("update from a stale revision = %v, want a conflict", err)
	}
	testutil.WaitFor(t, 10*time.Second, "the follower to see the update", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return seen[sb.ID] == "b"
	})

	// Events: numbered in order, only the newest MaxEvents kept.
	cur := next
	for i := range records.MaxEvents + 5 {
		n := cur.Clone()
		n.Status.Message = fmt.Sprint(i)
		if err := a.UpdateSandbox(ctx, n, ev(n, "renewed")); err != nil {
			t.Fatalf("update %d: %v", i, err)
		}
		cur = n
	}
	evs, err := b.Events(ctx, sb.ID, 0, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != records.MaxEvents || evs[len(evs)-1].Seq != int64(records.MaxEvents+7) || evs[0].Seq != 8 {
		t.Errorf("%d events, seq %d..%d; want %d ending at %d", len(evs), evs[0].Seq, evs[len(evs)-1].Seq, records.MaxEvents, records.MaxEvents+7)
	}
	if evs, _ := b.Events(ctx, sb.ID, int64(records.MaxEvents+5), 10, "renew"); len(evs) != 2 {
		t.Errorf("events after a cursor = %d, want 2", len(evs))
	}

	all, err := a.LoadSandboxes(ctx)
	if err != nil || len(all) != 1 || all[0].ID != sb.ID {
		t.Errorf("load = %v, %v", all, err)
	}
	if err := a.DeleteSandbox(ctx, sb.ID, nil); err != nil {
		t.Fatal(err)
	}
	if err := a.DeleteSandbox(ctx, sb.ID, nil); err != nil {
		t.Errorf("deleting twice: %v", err)
	}
	testutil.WaitFor(t, 10*time.Second, "the follower to see the delete", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return gone[sb.ID]
	})
	if _, err := b.GetSandbox(ctx, sb.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("get after delete = %v", err)
	}
}

// An idempotency key is bound once even when two servers race for it,
// is per tenant, can be released only by its sandbox, and is purged when
// old.
func TestIdempotencyKeysAcrossServers(t *testing.T) {
	c := kubetest.RequireKube(t)
	ns := c.Namespace(t)
	a, b := open(t, c, ns, "srv"), open(t, c, ns, "srv")
	ctx := context.Background()

	type result struct {
		id   string
		prev *sandbox.Idempotency
		err  error
	}
	res := make(chan result, 2)
	for _, r := range []*records.Records{a, b} {
		go func() {
			sb := record(sandbox.NewID())
			idem := &sandbox.Idempotency{Tenant: "t1", Key: "k1", RequestHash: "h", SandboxID: sb.ID, CreatedAt: time.Now().UTC()}
			prev, err := r.InsertSandbox(ctx, sb, idem, ev(sb, "created"))
			res <- result{sb.ID, prev, err}
		}()
	}
	r1, r2 := <-res, <-res
	if (r1.err == nil) == (r2.err == nil) {
		t.Fatalf("both or neither create won the key: %v / %v", r1.err, r2.err)
	}
	win, lose := r1, r2
	if r1.err != nil {
		win, lose = r2, r1
	}
	if !errors.Is(lose.err, errdefs.ErrAlreadyExists) || lose.prev == nil || lose.prev.SandboxID != win.id {
		t.Errorf("the loser got %v, %+v; want the winner's binding to %s", lose.err, lose.prev, win.id)
	}
	if _, err := a.GetSandbox(ctx, lose.id); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("the loser's record was written: %v", err)
	}
	if got, err := b.LookupIdempotency(ctx, "t1", "k1"); err != nil || got.SandboxID != win.id {
		t.Errorf("lookup = %+v, %v", got, err)
	}
	if _, err := b.LookupIdempotency(ctx, "t2", "k1"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("another tenant's lookup = %v, want not found", err)
	}
	// Another server in the namespace has keys of its own.
	other := open(t, c, ns, "someone-else")
	if _, err := other.LookupIdempotency(ctx, "t1", "k1"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("another server sees the key: %v", err)
	}
	osb := record(sandbox.NewID())
	if _, err := other.InsertSandbox(ctx, osb, &sandbox.Idempotency{Tenant: "t1", Key: "k1", SandboxID: osb.ID, CreatedAt: time.Now().UTC()}, nil); err != nil {
		t.Errorf("another server cannot use the same key: %v", err)
	}
	if err := a.ReleaseIdempotency(ctx, "t1", "k1", lose.id); err != nil {
		t.Fatal(err)
	}
	if _, err := b.LookupIdempotency(ctx, "t1", "k1"); err != nil {
		t.Errorf("released by a sandbox it is not bound to: %v", err)
	}
	if err := a.PurgeIdempotency(ctx, time.Now().Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := b.LookupIdempotency(ctx, "t1", "k1"); err != nil {
		t.Errorf("a fresh key was purged: %v", err)
	}
	if err := a.PurgeIdempotency(ctx, time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if _, err := b.LookupIdempotency(ctx, "t1", "k1"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("an old key survived the purge: %v", err)
	}
	// What is stored is a Secret: tokens are not in a ConfigMap or the CR.
	var l corev1.SecretList
	if err := c.Client.List(ctx, &l, client.InNamespace(ns), client.MatchingLabels{records.LabelRecord: "true"}); err != nil || len(l.Items) != 2 { // the winner's and the other server's
		t.Errorf("record Secrets: %d, %v", len(l.Items), err)
	}
}

// API keys kept in the cluster: two servers seeding the same key at once
// both start; a key made on one authenticates on the other, and revoked
// on the other it is refused on the first; the Secrets hold hashes only.
func TestAPIKeysAcrossServers(t *testing.T) {
	c := kubetest.RequireKube(t)
	ns := c.Namespace(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stores := make([]*records.Keys, 2)
	rings := make([]*auth.Keyring, 2)
	for i := range stores {
		ks, err := records.NewKeys(ctx, records.Config{REST: c.REST, Namespace: ns, ServerID: "srv"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ks.Close() })
		stores[i] = ks
		if rings[i], err = auth.Open(ctx, ks); err != nil {
			t.Fatal(err)
		}
	}
	const seed = "ck_seeded-by-two-servers-at-once"
	// A server of another identity in the namespace seeds it too, apart.
	otherStore, err := records.NewKeys(ctx, records.Config{REST: c.REST, Namespace: ns, ServerID: "someone-else"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { otherStore.Close() })
	otherRing, err := auth.Open(ctx, otherStore)
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 2)
	for _, r := range rings {
		go func() { errs <- r.Seed(ctx, seed) }()
	}
	for range rings {
		if err := <-errs; err != nil {
			t.Fatalf("seeding the same key on two servers: %v", err)
		}
	}
	if err := otherRing.Seed(ctx, seed); err != nil {
		t.Fatalf("a server of another identity cannot seed the same key: %v", err)
	}
	key, rec, err := rings[0].Create(ctx, "team-x", "shared", false)
	if err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "the other server to accept the key", func() bool {
		p, err := rings[1].Authenticate(key)
		return err == nil && p.Tenant == "team-x"
	})
	if err := rings[1].Revoke(ctx, rec.ID); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "the first server to refuse the revoked key", func() bool {
		_, err := rings[0].Authenticate(key)
		return err != nil
	})
	if _, err := rings[0].Authenticate(seed); err != nil {
		t.Errorf("the seeded key: %v", err)
	}
	var l corev1.SecretList
	if err := c.Client.List(ctx, &l, client.InNamespace(ns), client.MatchingLabels{records.LabelAPIKey: "true"}); err != nil || len(l.Items) != 3 {
		t.Fatalf("key Secrets: %d, %v", len(l.Items), err)
	}
	for _, s := range l.Items {
		for _, v := range s.Data {
			if strings.Contains(string(v), key) || strings.Contains(string(v), seed) {
				t.Errorf("Secret %s holds a key itself", s.Name)
			}
		}
	}
	// A key that was revoked stays refused when seeded again.
	if err := rings[1].Seed(ctx, key); err == nil {
		t.Error("seeding a revoked key succeeded")
	}
	if _, err := rings[1].Authenticate(key); err == nil {
		t.Error("a revoked key authenticates after a seed")
	}
}
