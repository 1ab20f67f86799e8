// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package webhook_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/errdefs"
	"github.com/corral-dev/corral/internal/sandbox"
	"github.com/corral-dev/corral/internal/store"
	"github.com/corral-dev/corral/internal/testutil"
	"github.com/corral-dev/corral/internal/webhook"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

// storeEvents is the event log of a real store, without the wake-ups a
// Manager adds (the dispatcher polls).
type storeEvents struct{ *store.Store }

func (storeEvents) EventsChanged() <-chan struct{} { return nil }
func (s storeEvents) LastEventSeq(ctx context.Context) (int64, error) {
	return s.LastSeq(ctx)
}

func openStore(t *testing.T) *store.Store {
	st, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "corral.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// rebinder is a DNS server on loopback whose one name resolves to
// whatever answer holds at the moment of the query.
func rebinder(t *testing.T, name string, answer *atomic.Value) *net.Resolver {
	h := dns.HandlerFunc(func(w dns.ResponseWriter, req *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(req)
		q := req.Question[0]
		switch {
		case !strings.EqualFold(q.Name, name+"."):
			m.Rcode = dns.RcodeNameError
		case q.Qtype == dns.TypeA:
			rr, _ := dns.NewRR(q.Name + " 0 IN A " + answer.Load().(string))
			m.Answer = append(m.Answer, rr)
		}
		_ = w.WriteMsg(m)
	})
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &dns.Server{PacketConn: pc, Handler: h}
	go func() { _ = srv.ActivateAndServe() }()
	t.Cleanup(func() { _ = srv.Shutdown() })
	addr := pc.LocalAddr().String()
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp", addr)
	}}
}

// TestRebindingIsRefusedAtDelivery: a name that resolved to an allowed
// address at subscription and resolves to a metadata or private one at
// delivery is refused when the connection is made; no packet leaves for
// either address (the refusal comes before the connect).
func TestRebindingIsRefusedAtDelivery(t *testing.T) {
	st := openStore(t)
	var answer atomic.Value
	answer.Store("203.0.113.7") // TEST-NET-3: public as far as the guard knows; never dialed here
	res := rebinder(t, "hooks.example.test", &answer)
	guard, err := webhook.NewGuard(nil)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := webhook.New(webhook.Config{Store: st, Events: storeEvents{st}, Guard: guard, Resolver: res, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	wh, err := svc.Create(t.Context(), "t1", api.WebhookRequest{URL: "http://hooks.example.test:8080/in"})
	if err != nil {
		t.Fatal(err)
	}
	for _, addr := range []string{"169.254.169.254", "10.0.0.5", "127.0.0.1", "0.0.0.0"} {
		answer.Store(addr)
		d, err := svc.Ping(t.Context(), "t1", wh.ID)
		if err != nil {
			t.Fatal(err)
		}
		if d.State != api.DeliveryDead || d.LastStatus != 0 || !strings.Contains(d.LastError, addr) || !strings.Contains(d.LastError, "not allowed") {
			t.Errorf("ping after the name moved to %s = %+v", addr, d.Public())
		}
		// A new subscription of the name is refused at once.
		_, err = svc.Create(t.Context(), "t1", api.WebhookRequest{URL: "http://hooks.example.test/"})
		var e *errdefs.Error
		if !errors.Is(err, errdefs.ErrInvalidArgument) || !errors.As(err, &e) || e.Code != api.CodeWebhookAddressRefused {
			t.Errorf("subscribing while it resolves to %s: %v", addr, err)
		}
	}
}

func TestGuard(t *testing.T) {
	allow := []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("10.20.0.0/16")}
	g, err := webhook.NewGuard(allow)
	if err != nil {
		t.Fatal(err)
	}
	for addr, ok := range map[string]bool{
		"127.0.0.1": true, "10.20.3.4": true, "::ffff:127.0.0.1": true, "93.184.216.34": true, "2001:db8::1": true,
		"10.21.0.1": false, "192.168.1.1": false, "172.16.0.1": false, "169.254.169.254": false, "::ffff:169.254.169.254": false,
		"100.100.100.200": false, "168.63.129.16": false, "fd00:ec2::254": false, "::1": false, "fe80::1": false,
		"0.0.0.0": false, "224.0.0.1": false, "255.255.255.255": false, "fc00::1": false,
	} {
		err := g.Check(netip.MustParseAddr(addr))
		if (err == nil) != ok || err != nil && !errors.Is(err, webhook.ErrAddressRefused) {
			t.Errorf("Check(%s) = %v, want allowed %v", addr, err, ok)
		}
	}
}

func TestSignature(t *testing.T) {
	body := []byte(`{"id":"7","type":"sandbox.created"}`)
	now := time.Unix(1_800_000_000, 0)
	h := webhook.Sign("whsec_k", now, body)
	if !strings.HasPrefix(h, "t=1800000000,v1=") || len(h) != len("t=1800000000,v1=")+64 {
		t.Fatalf("header %q", h)
	}
	if err := webhook.Verify("whsec_k", h, body, now.Add(30*time.Second), time.Minute); err != nil {
		t.Error(err)
	}
	for name, c := range map[string]struct {
		secret, header string
		body           []byte
		at             time.Time
	}{
		"another secret":  {"whsec_x", h, body, now},
		"a changed body":  {"whsec_k", h, []byte(`{"id":"8","type":"sandbox.created"}`), now},
		"a replay":        {"whsec_k", h, body, now.Add(10 * time.Minute)},
		"a moved stamp":   {"whsec_k", strings.Replace(h, "t=1800000000", "t=1800000001", 1), body, now},
		"no signature":    {"whsec_k", "t=1800000000", body, now},
		"garbage":         {"whsec_k", "v1=,t=", body, now},
		"an empty header": {"whsec_k", "", body, now},
	} {
		if err := webhook.Verify(c.secret, c.header, c.body, c.at, time.Minute); err == nil {
			t.Errorf("%s verified", name)
		}
	}
}

// TestEnqueueIsOncePerEvent: making the deliveries of events already
// queued (a crash between the enqueue and the cursor's move cannot
// happen, but a replayed page can) adds none.
func TestEnqueueIsOncePerEvent(t *testing.T) {
	st := openStore(t)
	ctx := t.Context()
	w := &webhook.Webhook{ID: "wh-000000000000000000000001", Tenant: "t1", URL: "http://127.0.0.1:1/", Secret: "whsec_0123456789abcdef", CreatedAt: time.Now()}
	if err := st.InsertWebhook(ctx, w); err != nil {
		t.Fatal(err)
	}
	ds := func() []*webhook.Delivery {
		now := time.Now()
		return []*webhook.Delivery{
			{EventSeq: 5, EventID: "5", EventType: api.EventSandboxCreated, Body: []byte(`{}`), State: api.DeliveryPending, NextAt: now, CreatedAt: now, UpdatedAt: now},
			{EventSeq: 6, EventID: "6", EventType: api.EventSandboxRunning, Body: []byte(`{}`), State: api.DeliveryPending, NextAt: now, CreatedAt: now, UpdatedAt: now},
		}
	}
	for range 2 {
		if err := st.Enqueue(ctx, w.ID, ds(), 6); err != nil {
			t.Fatal(err)
		}
	}
	got, err := st.Deliveries(ctx, w.ID, 10)
	if err != nil || len(got) != 2 {
		t.Fatalf("deliveries = %d, %v", len(got), err)
	}
	// A claim hides them until the lease ends.
	claimed, _, err := st.ClaimDue(ctx, time.Now(), time.Minute, 10)
	if err != nil || len(claimed) != 2 {
		t.Fatalf("claimed %d, %v", len(claimed), err)
	}
	again, next, err := st.ClaimDue(ctx, time.Now(), time.Minute, 10)
	if err != nil || len(again) != 0 || time.Until(next) < 50*time.Second {
		t.Errorf("claimed again %d, next %v, %v", len(again), next, err)
	}
	ws, _ := st.Webhooks(ctx, "t1")
	if len(ws) != 1 || ws[0].Cursor != 6 {
		t.Errorf("cursor = %+v", ws)
	}
	if err := st.DeleteWebhook(ctx, "t2", w.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("another tenant's delete: %v", err)
	}
	if err := st.DeleteWebhook(ctx, "t1", w.ID); err != nil {
		t.Fatal(err)
	}
	if got, _ := st.Deliveries(ctx, w.ID, 10); len(got) != 0 {
		t.Errorf("deliveries outlived their webhook: %d", len(got))
	}
}

// TestDeliveredAfterRestart: events recorded while no dispatcher ran
// (the server down, or killed before it delivered) are delivered by the
// next one, from the subscription's cursor.
func TestDeliveredAfterRestart(t *testing.T) {
	st := openStore(t)
	var hits atomic.Int32
	rc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer rc.Close()
	guard, _ := webhook.NewGuard([]netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")})
	cfg := webhook.Config{Store: st, Events: storeEvents{st}, Guard: guard}
	first, err := webhook.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	wh, err := first.Create(t.Context(), "t1", api.WebhookRequest{URL: rc.URL})
	if err != nil {
		t.Fatal(err)
	}
	first.Close()
	// Events written while no dispatcher runs.
	for i := range 3 {
		sb := &sandbox.Sandbox{ID: "sb" + string(rune('a'+i)), Tenant: "t1", Status: sandbox.Status{State: sandbox.StatePending}, Driver: "fake"}
		ev := &sandbox.Event{At: time.Now(), Tenant: "t1", SandboxID: sb.ID, Type: "created", Kind: api.EventSandboxCreated}
		if _, err := st.InsertSandbox(t.Context(), sb, nil, ev); err != nil {
			t.Fatal(err)
		}
	}
	second, err := webhook.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error)
	go func() { done <- second.Run(ctx) }()
	testutil.WaitFor(t, 10*time.Second, "three deliveries recorded", func() bool {
		ds, _ := st.Deliveries(t.Context(), wh.ID, 10)
		n := 0
		for _, d := range ds {
			if d.State == api.DeliveryDelivered {
				n++
			}
		}
		return n == 3
	})
	cancel()
	<-done
	if n := hits.Load(); n != 3 {
		t.Errorf("the receiver was sent %d requests, want 3", n)
	}
}
