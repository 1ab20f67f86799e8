// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package records_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/errdefs"
	"github.com/corral-dev/corral/internal/kube/kubetest"
	"github.com/corral-dev/corral/internal/kube/records"
	"github.com/corral-dev/corral/internal/lifecycle"
	"github.com/corral-dev/corral/internal/quota"
	"github.com/corral-dev/corral/internal/sandbox"
	"github.com/corral-dev/corral/internal/template"
	"github.com/corral-dev/corral/internal/testutil"
	"github.com/corral-dev/corral/internal/webhook"
)

var (
	_ lifecycle.EventLog        = (*records.Records)(nil)
	_ lifecycle.AuditLog        = (*records.Records)(nil)
	_ lifecycle.EventFollower   = (*records.Records)(nil)
	_ lifecycle.SharedAdmission = (*records.Records)(nil)
	_ lifecycle.QuotaStore      = (*records.Quotas)(nil)
	_ template.Store            = (*records.Templates)(nil)
	_ webhook.Store             = (*records.Webhooks)(nil)
)

// Two servers append to one published log at once, past several
// segments, while a third reads it as a stream follower does: every
// event has one position, positions only grow, and the follower (which
// resumes after the last position it read) ends with every event, none
// twice, in the order of their positions. Record changes of a published
// type join the log; other tenants' and other servers' logs stay apart.
func TestEventLogAcrossServers(t *testing.T) {
	c := kubetest.RequireKube(t)
	ns := c.Namespace(t)
	a, b, r := open(t, c, ns, "srv"), open(t, c, ns, "srv"), open(t, c, ns, "srv")
	other := open(t, c, ns, "someone-else")
	cx := context.Background()

	woken := atomic.Int64{}
	fctx, cancel := context.WithCancel(cx)
	defer cancel()
	if err := r.FollowEvents(fctx, func() { woken.Add(1) }); err != nil {
		t.Fatal(err)
	}
	const perServer = 2*records.SegmentEvents/2 + 40 // the two together cross two segment ends
	var read []sandbox.Event
	done := make(chan struct{})
	readErr := make(chan error, 1)
	go func() {
		// Reads until it has every event, or 30 seconds after the writers
		// are done.
		var after int64
		var deadline <-chan time.Time
		for len(read) < 2*perServer {
			evs, err := r.TenantEvents(cx, sandbox.EventQuery{Tenant: "t1", After: after, Limit: 100})
			if err != nil {
				readErr <- err
				return
			}
			read = append(read, evs...)
			if len(evs) > 0 {
				after = evs[len(evs)-1].Seq
			}
			select {
			case <-done:
				done, deadline = nil, time.After(30*time.Second)
			case <-deadline:
				readErr <- nil
				return
			default:
				time.Sleep(5 * time.Millisecond)
			}
		}
		readErr <- nil
	}()
	var wg sync.WaitGroup
	for name, s := range map[string]*records.Records{"a": a, "b": b} {
		wg.Go(func() {
			for i := 0; i < perServer; i += 3 {
				var evs []sandbox.Event
				for j := i; j < min(i+3, perServer); j++ {
					evs = append(evs, sandbox.Event{At: time.Now().UTC(), Tenant: "t1", SandboxID: "sb-" + name, Type: "app",
						Kind: api.EventApp, Message: fmt.Sprintf("%s-%d", name, j), Metadata: map[string]string{"k": name}})
				}
				// One not published, one of another tenant.
				evs = append(evs, sandbox.Event{Tenant: "t1", SandboxID: "sb-" + name, Type: "egress.allow"},
					sandbox.Event{Tenant: "t2", SandboxID: "sb-x", Type: "app", Kind: api.EventApp, Message: "other tenant"})
				if err := s.AppendAudit(cx, evs); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(done)
	if err := <-readErr; err != nil {
		t.Fatal(err)
	}
	if len(read) != 2*perServer {
		t.Fatalf("the follower read %d events, want %d", len(read), 2*perServer)
	}
	msgs := map[string]bool{}
	for i, ev := range read {
		if i > 0 && ev.Seq <= read[i-1].Seq {
			t.Fatalf("position %d after %d", ev.Seq, read[i-1].Seq)
		}
		if msgs[ev.Message] || ev.Tenant != "t1" || ev.Kind != api.EventApp || ev.Metadata["k"] == "" {
			t.Fatalf("event %+v: repeated, or not as written", ev)
		}
		msgs[ev.Message] = true
	}
	// A reader resuming anywhere gets exactly the rest.
	mid := read[len(read)/2].Seq
	rest, err := a.TenantEvents(cx, sandbox.EventQuery{Tenant: "t1", After: mid, Limit: 10000})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.EqualFunc(rest, read[len(read)/2+1:], func(x, y sandbox.Event) bool { return x.Seq == y.Seq }) {
		t.Errorf("resumed after %d: %d events, want %d", mid, len(rest), len(read)/2-1)
	}
	if last, err := r.LastSeq(cx); err != nil || last < read[len(read)-1].Seq {
		t.Errorf("LastSeq = %d, %v; the newest read is %d", last, err, read[len(read)-1].Seq)
	}
	if woken.Load() == 0 {
		t.Error("the follower of the log was never woken")
	}
	if evs, _ := other.TenantEvents(cx, sandbox.EventQuery{Tenant: "t1", Limit: 10}); len(evs) != 0 {
		t.Errorf("another server's log has %d events of ours", len(evs))
	}
	if evs, _ := r.TenantEvents(cx, sandbox.EventQuery{Tenant: "t2", Limit: 10000}); len(evs) != 2*((perServer+2)/3) {
		t.Errorf("tenant t2 has %d events, want %d", len(evs), 2*((perServer+2)/3))
	}

	// A record's published changes join the log; intermediate ones do not.
	sb := record("pub1")
	created := ev(sb, "created")
	created.Kind = api.EventSandboxCreated
	if _, err := a.InsertSandbox(cx, sb, nil, created); err != nil {
		t.Fatal(err)
	}
	if err := a.UpdateSandbox(cx, sb, ev(sb, "pausing")); err != nil {
		t.Fatal(err)
	}
	deleted := ev(sb, "deleted")
	deleted.Kind = api.EventSandboxDeleted
	if err := b.DeleteSandbox(cx, sb.ID, deleted); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "the record's events in the log", func() bool {
		evs, _ := r.TenantEvents(cx, sandbox.EventQuery{Tenant: "t1", SandboxID: "pub1", Limit: 10})
		return len(evs) == 2 && evs[0].Kind == api.EventSandboxCreated && evs[1].Kind == api.EventSandboxDeleted
	})
}

// Ten claims race through two servers for a tenant's room of three:
// exactly three are let in; an unclaimed one frees its room; another
// tenant's claims are apart.
func TestClaimsAdmitNoMoreThanTheRoom(t *testing.T) {
	c := kubetest.RequireKube(t)
	ns := c.Namespace(t)
	a, b := open(t, c, ns, "srv"), open(t, c, ns, "srv")
	cx := context.Background()
	room := func(others []quota.Claim) error {
		if len(others) >= 3 {
			return errors.New("full")
		}
		return nil
	}
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for i := range 10 {
		s := a
		if i%2 == 1 {
			s = b
		}
		wg.Go(func() {
			err := s.Claim(cx, "t1", quota.Claim{ID: fmt.Sprintf("sb%d", i), Need: quota.Usage{Running: 1}, At: time.Now()}, room)
			switch {
			case err == nil:
				admitted.Add(1)
			case err.Error() != "full":
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if n := admitted.Load(); n != 3 {
		t.Fatalf("%d claims let in, want 3", n)
	}
	var held []string
	if err := b.Claim(cx, "t1", quota.Claim{ID: "probe", At: time.Now()}, func(others []quota.Claim) error {
		for _, o := range others {
			held = append(held, o.ID)
		}
		return errors.New("full")
	}); err == nil {
		t.Fatal("the probe was let in")
	}
	if err := a.Unclaim(cx, "t1", held[0]); err != nil {
		t.Fatal(err)
	}
	if err := b.Rebind(cx, "t1", held[1], "renamed"); err != nil {
		t.Fatal(err)
	}
	if err := b.Claim(cx, "t1", quota.Claim{ID: "late", At: time.Now()}, room); err != nil {
		t.Errorf("a claim after an unclaim: %v", err)
	}
	var ids []string
	_ = a.Claim(cx, "t1", quota.Claim{ID: "probe", At: time.Now()}, func(others []quota.Claim) error {
		ids = ids[:0]
		for _, o := range others {
			ids = append(ids, o.ID)
		}
		return errors.New("full")
	})
	if slices.Sort(ids); !slices.Contains(ids, "renamed") || !slices.Contains(ids, "late") || slices.Contains(ids, held[0]) || len(ids) != 3 {
		t.Errorf("claims held = %v", ids)
	}
	if err := a.Claim(cx, "t2", quota.Claim{ID: "x", At: time.Now()}, room); err != nil {
		t.Errorf("another tenant's claim: %v", err)
	}
	// Claims older than ClaimTTL are not shown.
	if err := a.Claim(cx, "t3", quota.Claim{ID: "old", At: time.Now().Add(-quota.ClaimTTL - time.Second)}, room); err != nil {
		t.Fatal(err)
	}
	if err := b.Claim(cx, "t3", quota.Claim{ID: "new", At: time.Now()}, func(others []quota.Claim) error {
		if len(others) != 0 {
			return fmt.Errorf("an expired claim is shown: %v", others)
		}
		return nil
	}); err != nil {
		t.Error(err)
	}
}

// Two servers' webhook dispatchers share subscriptions: an event batch
// enqueued by both is kept once, a due delivery is claimed by one of
// them only, outcomes and pings are recorded, finished deliveries are
// purged; deletes are the tenant's own.
func TestWebhookStoreAcrossServers(t *testing.T) {
	c := kubetest.RequireKube(t)
	ns := c.Namespace(t)
	cx := context.Background()
	openHooks := func() *records.Webhooks {
		w, err := records.NewWebhooks(cx, records.Config{REST: c.REST, Namespace: ns, ServerID: "srv"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { w.Close() })
		return w
	}
	a, b := openHooks(), openHooks()
	w := &webhook.Webhook{ID: "wh1", Tenant: "t1", URL: "https://example.invalid/x", Secret: "s", CreatedAt: time.Now().UTC()}
	if err := a.InsertWebhook(cx, w); err != nil {
		t.Fatal(err)
	}
	if err := b.InsertWebhook(cx, w); !errors.Is(err, errdefs.ErrAlreadyExists) {
		t.Errorf("a second insert = %v", err)
	}
	now := time.Now().UTC()
	batch := func() []*webhook.Delivery {
		var ds []*webhook.Delivery
		for i := int64(1); i <= 5; i++ {
			ds = append(ds, &webhook.Delivery{WebhookID: "wh1", EventSeq: i, EventID: fmt.Sprint(i), Body: []byte(`{}`),
				State: api.DeliveryPending, NextAt: now, CreatedAt: now, UpdatedAt: now})
		}
		return ds
	}
	var wg sync.WaitGroup
	for _, s := range []*records.Webhooks{a, b} {
		wg.Go(func() {
			if err := s.Enqueue(cx, "wh1", batch(), 5); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	ds, err := b.Deliveries(cx, "wh1", 100)
	if err != nil || len(ds) != 5 {
		t.Fatalf("deliveries after two enqueues = %d, %v; want 5", len(ds), err)
	}
	testutil.WaitFor(t, 10*time.Second, "both caches to hold the outbox", func() bool {
		for _, s := range []*records.Webhooks{a, b} {
			ws, _ := s.Webhooks(cx, "t1")
			if len(ws) != 1 || ws[0].Cursor != 5 {
				return false
			}
		}
		return true
	})
	var mu sync.Mutex
	claimed := map[int64]int{}
	for _, s := range []*records.Webhooks{a, b, a, b} {
		wg.Go(func() {
			got, _, err := s.ClaimDue(cx, now.Add(time.Second), time.Minute, 3)
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			for _, d := range got {
				claimed[d.ID]++
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	if len(claimed) != 5 {
		t.Errorf("claimed %v, want each of 5 deliveries", claimed)
	}
	for id, n := range claimed {
		if n != 1 {
			t.Errorf("delivery %d claimed %d times", id, n)
		}
	}
	for _, d := range ds {
		d.State, d.Attempts, d.LastStatus, d.UpdatedAt = api.DeliveryDelivered, 1, 204, now.Add(-time.Hour)
		if err := a.UpdateDelivery(cx, d); err != nil {
			t.Fatal(err)
		}
	}
	ping := &webhook.Delivery{WebhookID: "wh1", EventID: "ping", State: api.DeliveryDelivered, CreatedAt: now, UpdatedAt: now}
	if err := b.InsertDelivery(cx, ping); err != nil || ping.ID != 6 {
		t.Fatalf("ping = %d, %v", ping.ID, err)
	}
	testutil.WaitFor(t, 10*time.Second, "the cache to show the outcomes", func() bool {
		ws, _ := a.Webhooks(cx, "")
		return len(ws) == 1
	})
	testutil.WaitFor(t, 10*time.Second, "the purge of the old deliveries", func() bool {
		if err := a.PurgeDeliveries(cx, now.Add(-time.Minute)); err != nil {
			t.Fatal(err)
		}
		ds, _ := a.Deliveries(cx, "wh1", 100)
		return len(ds) == 1 && ds[0].ID == 6
	})
	if err := b.DeleteWebhook(cx, "t2", "wh1"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("another tenant's delete = %v", err)
	}
	if err := b.DeleteWebhook(cx, "t1", "wh1"); err != nil {
		t.Fatal(err)
	}
	if err := a.Enqueue(cx, "wh1", batch(), 10); err != nil {
		t.Errorf("an enqueue to a deleted subscription = %v", err)
	}
}

// Quota overrides and templates written through one server are read
// through another.
func TestQuotasAndTemplatesAcrossServers(t *testing.T) {
	c := kubetest.RequireKube(t)
	ns := c.Namespace(t)
	cx := context.Background()
	cfg := records.Config{REST: c.REST, Namespace: ns, ServerID: "srv"}
	qa, err := records.NewQuotas(cx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer qa.Close()
	qb, err := records.NewQuotas(cx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer qb.Close()
	two, queue := int64(2), quota.PolicyQueue
	o, err := quota.FromWire(api.QuotaRequest{Running: &two, Policy: &queue})
	if err != nil {
		t.Fatal(err)
	}
	if err := qa.PutQuota(cx, "t1", o); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "the other server to read the override", func() bool {
		all, err := qb.Quotas(cx)
		return err == nil && all["t1"].Wire().Running != nil && *all["t1"].Wire().Running == 2
	})
	if err := qb.DeleteQuota(cx, "t1"); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "the other server to forget it", func() bool {
		all, err := qa.Quotas(cx)
		_, ok := all["t1"]
		return err == nil && !ok
	})

	ta, err := records.NewTemplates(cx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer ta.Close()
	tb, err := records.NewTemplates(cx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer tb.Close()
	made := time.Now().UTC().Add(-time.Hour).Truncate(time.Second)
	tp := &template.Template{Tenant: "t1", Name: "py", Spec: []byte(`{"image":{"uri":"python"}}`), CreatedAt: made, UpdatedAt: made}
	if created, err := ta.PutTemplate(cx, tp); err != nil || !created {
		t.Fatalf("put = %v, %v", created, err)
	}
	again := &template.Template{Tenant: "t1", Name: "py", Spec: []byte(`{"image":{"uri":"python:3"}}`), CreatedAt: time.Now().UTC(), UpdatedAt: time.Now().UTC()}
	if created, err := tb.PutTemplate(cx, again); err != nil || created || !again.CreatedAt.Equal(made) {
		t.Fatalf("replace = %v, %v, created at %v (want %v)", created, err, again.CreatedAt, made)
	}
	got, err := ta.GetTemplate(cx, "t1", "py")
	if err != nil || string(got.Spec) != `{"image":{"uri":"python:3"}}` {
		t.Fatalf("get = %+v, %v", got, err)
	}
	if _, err := ta.GetTemplate(cx, "t2", "py"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("another tenant's get = %v", err)
	}
	testutil.WaitFor(t, 10*time.Second, "the list", func() bool {
		l, err := tb.ListTemplates(cx, "t1")
		return err == nil && len(l) == 1 && l[0].Name == "py"
	})
	if err := tb.DeleteTemplate(cx, "t2", "py"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("another tenant's delete = %v", err)
	}
	if err := tb.DeleteTemplate(cx, "t1", "py"); err != nil {
		t.Fatal(err)
	}
	if err := ta.DeleteTemplate(cx, "t1", "py"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("a second delete = %v", err)
	}
}

// A replica that wrote a record's change and died before its event
// reached the published log: the next replica to start adds the event
// (once, however many start), and a stream then reads it.
func TestEventLogRecoversAfterACrash(t *testing.T) {
	c := kubetest.RequireKube(t)
	ns := c.Namespace(t)
	a := open(t, c, ns, "srv")
	cx := context.Background()
	sb := record("crash1")
	created := ev(sb, "created")
	created.Kind = api.EventSandboxCreated
	if _, err := a.InsertSandbox(cx, sb, nil, created); err != nil {
		t.Fatal(err)
	}
	// What the dead replica left: the record's change with its event, no
	// event in the log.
	var sec corev1.Secret
	if err := c.Client.Get(cx, client.ObjectKey{Namespace: ns, Name: "corral-crash1-record"}, &sec); err != nil {
		t.Fatal(err)
	}
	var evs []sandbox.Event
	if err := json.Unmarshal(sec.Data["events"], &evs); err != nil {
		t.Fatal(err)
	}
	paused := *ev(sb, "paused")
	paused.Kind, paused.Seq = api.EventSandboxPaused, evs[len(evs)-1].Seq+1
	evs = append(evs, paused)
	sec.Data["events"], _ = json.Marshal(evs)
	if err := c.Client.Update(cx, &sec); err != nil {
		t.Fatal(err)
	}
	kinds := func(r *records.Records) []string {
		got, err := r.TenantEvents(cx, sandbox.EventQuery{Tenant: "t1", SandboxID: "crash1", Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range got {
			out = append(out, e.Kind)
		}
		return out
	}
	testutil.WaitFor(t, 10*time.Second, "the record's change in the caches", func() bool {
		var s corev1.Secret
		return c.Client.Get(cx, client.ObjectKeyFromObject(&sec), &s) == nil && s.ResourceVersion == sec.ResourceVersion
	})
	time.Sleep(500 * time.Millisecond) // the informers of the replicas opened next list after it
	b, d := open(t, c, ns, "srv"), open(t, c, ns, "srv")
	want := []string{api.EventSandboxCreated, api.EventSandboxPaused}
	testutil.WaitFor(t, 10*time.Second, "the missed event in the log", func() bool { return slices.Equal(kinds(a), want) })
	for _, r := range []*records.Records{b, d} {
		if got := kinds(r); !slices.Equal(got, want) {
			t.Errorf("a replica reads %v, want %v (the missed event once)", got, want)
		}
	}
}
