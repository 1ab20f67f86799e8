// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/internal/testutil"
	"github.com/corral-dev/corral/internal/webhook"
)

// receiver is a webhook receiver on loopback: it keeps what it was sent
// and answers with answer(n), n counting requests from 1.
type receiver struct {
	srv    *httptest.Server
	mu     sync.Mutex
	got    []delivered
	answer func(n int) int
}

type delivered struct {
	header http.Header
	body   []byte
	at     time.Time
}

func newReceiver(t *testing.T, answer func(n int) int) *receiver {
	rc := &receiver{answer: answer}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		rc.got = append(rc.got, delivered{header: r.Header.Clone(), body: b, at: time.Now()})
		n := len(rc.got)
		rc.mu.Unlock()
		code := http.StatusOK
		if rc.answer != nil {
			code = rc.answer(n)
		}
		w.WriteHeader(code)
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *receiver) requests() []delivered {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]delivered(nil), rc.got...)
}

func (s *ts) subscribe(key string, req api.WebhookRequest) api.Webhook {
	s.t.Helper()
	r := s.call("POST", "/v1/webhooks", key, req)
	if r.status != http.StatusCreated {
		s.t.Fatalf("subscribe = %d %s", r.status, r.body)
	}
	var out api.Webhook
	r.decode(s.t, &out)
	return out
}

func (s *ts) deliveries(key, id string) []api.WebhookDelivery {
	s.t.Helper()
	var out api.WebhookDeliveryList
	s.call("GET", "/v1/webhooks/"+id+"/deliveries", key, nil).decode(s.t, &out)
	return out.Items
}

func TestWebhookDelivery(t *testing.T) {
	t.Parallel()
	s := newTS(t)
	// The first delivery is answered 500, then everything 204.
	rc := newReceiver(t, func(n int) int {
		if n == 1 {
			return http.StatusInternalServerError
		}
		return http.StatusNoContent
	})
	wh := s.subscribe(s.keyA, api.WebhookRequest{URL: rc.srv.URL + "/hook?x=1", Types: []string{api.EventSandboxCreated, api.EventSandboxPaused}})
	if !strings.HasPrefix(wh.Secret, "whsec_") || len(wh.Types) != 2 {
		t.Fatalf("subscription = %+v", wh)
	}
	id := s.create(s.keyA, basicCreate()).ID
	s.call("POST", "/v1/sandboxes/"+id+"/pause", s.keyA, nil)
	s.create(s.keyB, basicCreate()) // another tenant's: never sent here

	testutil.WaitFor(t, 10*time.Second, "two events delivered (one retried)", func() bool {
		n := 0
		for _, d := range s.deliveries(s.keyA, wh.ID) {
			if d.State == api.DeliveryDelivered {
				n++
			}
		}
		return n == 2
	})
	time.Sleep(200 * time.Millisecond) // nothing more comes
	got := rc.requests()
	if len(got) != 3 {
		t.Fatalf("%d requests, want 3 (created twice, paused once)", len(got))
	}
	ids := map[string][]int{}
	for i, d := range got {
		if err := webhook.Verify(wh.Secret, d.header.Get(api.HeaderWebhookSignature), d.body, time.Now(), time.Minute); err != nil {
			t.Errorf("request %d: %v", i, err)
		}
		if err := webhook.Verify("whsec_another", d.header.Get(api.HeaderWebhookSignature), d.body, time.Now(), time.Minute); err == nil {
			t.Errorf("request %d verifies under another secret", i)
		}
		var ev api.Event
		if err := json.Unmarshal(d.body, &ev); err != nil {
			t.Fatal(err)
		}
		if ev.ID != d.header.Get(api.HeaderWebhookEventID) || ev.Type != d.header.Get(api.HeaderWebhookEventType) || ev.SandboxID != id {
			t.Errorf("request %d: headers %v, event %+v", i, d.header, ev)
		}
		ids[ev.ID] = append(ids[ev.ID], i)
	}
	// The retried event came twice, with the same ID and body and the
	// attempt counted.
	var retried []int
	for _, reqs := range ids {
		if len(reqs) == 2 {
			retried = reqs
		}
	}
	if len(ids) != 2 || retried == nil || string(got[retried[0]].body) != string(got[retried[1]].body) ||
		got[retried[1]].header.Get(api.HeaderWebhookAttempt) != "2" {
		t.Errorf("event ids %v: want one event sent twice, identically, the second as attempt 2", ids)
	}
	ds := s.deliveries(s.keyA, wh.ID)
	if len(ds) != 2 {
		t.Fatalf("deliveries = %+v", ds)
	}
	for _, d := range ds {
		if d.State != api.DeliveryDelivered || d.LastStatus != 204 || d.DeliveredAt == nil {
			t.Errorf("delivery %+v", d)
		}
	}
	// Deliveries run side by side: whichever event's first attempt the
	// receiver answered 500 is the one with two attempts.
	twice := 0
	for _, d := range ds {
		if d.Attempts == 2 {
			twice++
			if len(ids[d.EventID]) != 2 {
				t.Errorf("delivery %+v has 2 attempts but its event reached the receiver %d times", d, len(ids[d.EventID]))
			}
		} else if d.Attempts != 1 {
			t.Errorf("delivery %+v", d)
		}
	}
	if twice != 1 {
		t.Errorf("%d deliveries took two attempts, want 1: %+v", twice, ds)
	}
}

func TestWebhookDeadLetterAndPing(t *testing.T) {
	t.Parallel()
	s := newTS(t)
	rc := newReceiver(t, func(int) int { return http.StatusServiceUnavailable })
	wh := s.subscribe(s.keyA, api.WebhookRequest{URL: rc.srv.URL, Types: []string{api.EventSandboxCreated}})
	s.create(s.keyA, basicCreate())
	testutil.WaitFor(t, 10*time.Second, "the delivery dead-lettered", func() bool {
		ds := s.deliveries(s.keyA, wh.ID)
		return len(ds) == 1 && ds[0].State == api.DeliveryDead
	})
	if d := s.deliveries(s.keyA, wh.ID)[0]; d.Attempts != 4 || d.LastStatus != 503 || !strings.Contains(d.LastError, "503") || d.NextAt != nil {
		t.Errorf("dead delivery = %+v", d)
	}
	if n := len(rc.requests()); n != 4 {
		t.Errorf("receiver saw %d attempts, want 4", n)
	}
	// A ping is one attempt, answered with its outcome.
	var d api.WebhookDelivery
	r := s.call("POST", "/v1/webhooks/"+wh.ID+"/ping", s.keyA, nil)
	r.decode(t, &d)
	if r.status != 200 || d.State != api.DeliveryDead || d.Attempts != 1 || d.EventType != api.EventWebhookPing {
		t.Errorf("ping to a failing receiver = %d %+v", r.status, d)
	}
	rc.answer = nil
	s.call("POST", "/v1/webhooks/"+wh.ID+"/ping", s.keyA, nil).decode(t, &d)
	if d.State != api.DeliveryDelivered || d.LastStatus != 200 {
		t.Errorf("ping = %+v", d)
	}
	last := rc.requests()[len(rc.requests())-1]
	if err := webhook.Verify(wh.Secret, last.header.Get(api.HeaderWebhookSignature), last.body, time.Now(), time.Minute); err != nil {
		t.Error(err)
	}
}

// TestWebhookRedirectIsAFailure: a 3xx is an answer, and its Location is
// never requested.
func TestWebhookRedirectIsAFailure(t *testing.T) {
	t.Parallel()
	s := newTS(t)
	target := newReceiver(t, nil)
	rc := httptest.NewServer(http.RedirectHandler(target.srv.URL, http.StatusTemporaryRedirect))
	defer rc.Close()
	wh := s.subscribe(s.keyA, api.WebhookRequest{URL: rc.URL})
	var d api.WebhookDelivery
	s.call("POST", "/v1/webhooks/"+wh.ID+"/ping", s.keyA, nil).decode(t, &d)
	if d.State != api.DeliveryDead || d.LastStatus != http.StatusTemporaryRedirect || len(target.requests()) != 0 {
		t.Errorf("redirected ping = %+v; the target saw %d requests", d, len(target.requests()))
	}
}

func TestWebhooksAreTheTenants(t *testing.T) {
	t.Parallel()
	s := newTS(t)
	rc := newReceiver(t, nil)
	wh := s.subscribe(s.keyA, api.WebhookRequest{URL: rc.srv.URL, Description: "ci"})
	var l api.WebhookList
	s.call("GET", "/v1/webhooks", s.keyB, nil).decode(t, &l)
	if len(l.Items) != 0 {
		t.Errorf("tenant t2 lists %+v", l.Items)
	}
	for _, c := range []struct{ method, path string }{
		{"GET", "/v1/webhooks/" + wh.ID}, {"DELETE", "/v1/webhooks/" + wh.ID},
		{"GET", "/v1/webhooks/" + wh.ID + "/deliveries"}, {"POST", "/v1/webhooks/" + wh.ID + "/ping"},
	} {
		if r := s.call(c.method, c.path, s.keyB, nil); r.status != 404 || r.errCode(t) != api.CodeWebhookNotFound {
			t.Errorf("t2 %s %s = %d %s", c.method, c.path, r.status, r.body)
		}
	}
	if len(rc.requests()) != 0 {
		t.Error("another tenant's ping was sent")
	}
	s.call("GET", "/v1/webhooks", s.keyA, nil).decode(t, &l)
	if len(l.Items) != 1 || l.Items[0].Secret != "" || l.Items[0].Description != "ci" || len(l.Items[0].Types) != 0 {
		t.Errorf("list = %+v (the secret is shown once only)", l.Items)
	}
	if r := s.call("DELETE", "/v1/webhooks/"+wh.ID, s.keyA, nil); r.status != 204 {
		t.Errorf("delete = %d", r.status)
	}
	if r := s.call("DELETE", "/v1/webhooks/"+wh.ID, s.keyA, nil); r.status != 404 {
		t.Errorf("delete again = %d", r.status)
	}
}

func TestWebhookRejectsBadInput(t *testing.T) {
	t.Parallel()
	s := newTSHooks(t, func(c *webhook.Config) { c.MaxPerTenant = 2 })
	rc := newReceiver(t, nil)
	long := rc.srv.URL + "/" + strings.Repeat("a", 2100)
	for body, code := range map[string]string{
		`{}`:                                api.CodeWebhookInvalidURL,
		`{"url":""}`:                        api.CodeWebhookInvalidURL,
		`{"url":"ftp://127.0.0.1/x"}`:       api.CodeWebhookInvalidURL,
		`{"url":"http://"}`:                 api.CodeWebhookInvalidURL,
		`{"url":"http://u:p@127.0.0.1/"}`:   api.CodeWebhookInvalidURL,
		`{"url":"http://127.0.0.1/#frag"}`:  api.CodeWebhookInvalidURL,
		`{"url":"::not a url"}`:             api.CodeWebhookInvalidURL,
		`{"url":"` + long + `"}`:            api.CodeWebhookInvalidURL,
		`{"url":"http://169.254.169.254/"}`: api.CodeWebhookAddressRefused,
		`{"url":"http://10.1.2.3/"}`:        api.CodeWebhookAddressRefused,
		`{"url":"http://[::1]/"}`:           api.CodeWebhookAddressRefused,
		`{"url":"http://[fe80::1]/"}`:       api.CodeWebhookAddressRefused,
		`{"url":"http://0.0.0.0/"}`:         api.CodeWebhookAddressRefused,
		`{"url":"` + rc.srv.URL + `","types":["sandbox.bogus"]}`:                        api.CodeEventInvalidType,
		`{"url":"` + rc.srv.URL + `","types":"sandbox.created"}`:                        api.CodeInvalidRequestBody,
		`{"url":"` + rc.srv.URL + `","secret":"short"}`:                                 api.CodeInvalidParameter,
		`{"url":"` + rc.srv.URL + `","secret":"with a space in it, long"}`:              api.CodeInvalidParameter,
		`{"url":"` + rc.srv.URL + `","secret":"` + strings.Repeat("s", 257) + `"}`:      api.CodeInvalidParameter,
		`{"url":"` + rc.srv.URL + `","description":"` + strings.Repeat("d", 257) + `"}`: api.CodeInvalidParameter,
		`{"url":"` + rc.srv.URL + `","extra":1}`:                                        api.CodeInvalidParameter,
		`{"url":"` + rc.srv.URL + `"} {}`:                                               api.CodeInvalidRequestBody,
		`[1]`:                                                                           api.CodeInvalidRequestBody,
		``:                                                                              api.CodeInvalidRequestBody,
	} {
		if r := s.call("POST", "/v1/webhooks", s.keyA, body); r.status != 400 || r.errCode(t) != code {
			t.Errorf("%.80s = %d %s, want 400 %s", body, r.status, r.body, code)
		}
	}
	var l api.WebhookList
	s.call("GET", "/v1/webhooks", s.keyA, nil).decode(t, &l)
	if len(l.Items) != 0 {
		t.Fatalf("stored after bad input: %+v", l.Items)
	}
	s.subscribe(s.keyA, api.WebhookRequest{URL: rc.srv.URL})
	if wh := s.subscribe(s.keyA, api.WebhookRequest{URL: rc.srv.URL, Secret: "a-secret-of-my-own"}); wh.Secret != "a-secret-of-my-own" {
		t.Errorf("the secret given = %q", wh.Secret)
	}
	s.call("GET", "/v1/webhooks", s.keyA, nil).decode(t, &l)
	if r := s.call("POST", "/v1/webhooks", s.keyA, api.WebhookRequest{URL: rc.srv.URL}); r.status != 409 || r.errCode(t) != api.CodeWebhookLimit {
		t.Errorf("a third webhook = %d %s", r.status, r.body)
	}
	for _, q := range []string{"limit=0", "limit=1001", "limit=x"} {
		if r := s.call("GET", "/v1/webhooks/"+l.Items[0].ID+"/deliveries?"+q, s.keyA, nil); r.status != 400 {
			t.Errorf("deliveries?%s = %d", q, r.status)
		}
	}
	for _, id := range []string{"nope", "wh-zz", "../x"} {
		if r := s.call("GET", "/v1/webhooks/"+id+"/deliveries", s.keyA, nil); r.status != 404 {
			t.Errorf("deliveries of %q = %d", id, r.status)
		}
	}
	if r := s.call("PUT", "/v1/webhooks", s.keyA, nil); r.status != 405 {
		t.Errorf("PUT = %d", r.status)
	}
}

// TestWebhookLoopbackNeedsTheOperator: without an allowed range, a
// receiver on loopback is refused; no range holding a metadata address
// can be allowed.
func TestWebhookLoopbackNeedsTheOperator(t *testing.T) {
	t.Parallel()
	strict, err := webhook.NewGuard(nil)
	if err != nil {
		t.Fatal(err)
	}
	s := newTSHooks(t, func(c *webhook.Config) { c.Guard = strict })
	rc := newReceiver(t, nil)
	if r := s.call("POST", "/v1/webhooks", s.keyA, api.WebhookRequest{URL: rc.srv.URL}); r.status != 400 || r.errCode(t) != api.CodeWebhookAddressRefused {
		t.Errorf("loopback receiver = %d %s", r.status, r.body)
	}
	for _, p := range []string{"169.254.0.0/16", "0.0.0.0/0", "100.64.0.0/10", "::/0"} {
		if _, err := webhook.NewGuard([]netip.Prefix{netip.MustParsePrefix(p)}); err == nil {
			t.Errorf("allowing %s, which holds a metadata address, was accepted", p)
		}
	}
}
