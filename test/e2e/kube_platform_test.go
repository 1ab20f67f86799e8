// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/internal/kube/apis/v1alpha1"
	"github.com/corral-dev/corral/internal/testutil"
	"github.com/corral-dev/corral/sdk"
)

// TestKubeReplicasShareEventsWebhooksAndQuotas: two replicas of one
// server on the kube tier. A quota set through one holds on both: of
// sixteen creates racing through the two for a tenant's room of two,
// exactly two are made and the others refused with 429. Both replicas run a
// webhook dispatcher, and each event reaches the receiver once. The
// stream read through one replica resumes by its last id through the
// other with no gap and no repeat. A template made through one is used
// through the other.
func TestKubeReplicasShareEventsWebhooksAndQuotas(t *testing.T) {
	w := newKubeWorld(t)
	args := []string{"--runtime", "kubernetes", "--kubeconfig", w.c.Kubeconfig, "--kube-namespace", w.ns,
		"--kube-image-pull-policy", "Never", "--server-id", "platform",
		"--webhook-allow-cidr", "127.0.0.0/8", "--webhook-retry-base", "100ms"}
	a := startServerOf(t, w.bin, t.TempDir(), args...)
	b := startServerOf(t, w.bin, t.TempDir(), args...)
	ca, cb := a.client(t), b.client(t)
	cx := ctx(t)

	rc := &hookReceiver{byID: map[string]api.Event{}}
	rc.accept.Store(true)
	hs := httptest.NewServer(rc)
	defer hs.Close()
	wh, err := ca.CreateWebhook(cx, api.WebhookRequest{URL: hs.URL + "/hook"})
	if err != nil {
		t.Fatal(err)
	}
	rc.secret.Store(&wh.Secret)
	testutil.WaitFor(t, 10*time.Second, "replica b to list the webhook", func() bool {
		ws, err := cb.ListWebhooks(cx)
		return err == nil && len(ws) == 1 && ws[0].ID == wh.ID
	})

	st, err := ca.Quota(cx)
	if err != nil {
		t.Fatal(err)
	}
	two, reject := int64(2), "reject"
	if _, err := ca.SetQuota(cx, st.Tenant, api.QuotaRequest{Running: &two, Policy: &reject}); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "replica b to hold the quota", func() bool {
		q, err := cb.Quota(cx)
		return err == nil && q.Limits.Running == 2
	})
	md := map[string]string{"test": "replicas"}
	stream, err := cb.Events(cx, sdk.EventStreamOptions{Metadata: md})
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()

	type result struct {
		id  string
		err error
	}
	results := make([]result, 16)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range results {
		c := ca
		if i%2 == 1 {
			c = cb
		}
		wg.Go(func() {
			<-start
			req := ociCreate(w.busybox)
			req.Metadata = md
			sb, err := c.CreateSandbox(cx, req, sdk.CreateOptions{})
			results[i].err = err
			if err == nil {
				results[i].id = sb.ID
			}
		})
	}
	time.Sleep(100 * time.Millisecond)
	close(start)
	wg.Wait()
	var made []string
	for _, r := range results {
		var ae *sdk.APIError
		switch {
		case r.err == nil:
			made = append(made, r.id)
		case errors.As(r.err, &ae) && ae.Status == http.StatusTooManyRequests && ae.Code == api.CodeQuotaExceeded:
		default:
			t.Errorf("a create = %v, want made or 429 %s", r.err, api.CodeQuotaExceeded)
		}
	}
	if len(made) != 2 {
		t.Fatalf("%d of 16 racing creates were made through two replicas, the quota is 2 (results %+v)", len(made), results)
	}
	for _, id := range made {
		if err := cb.WaitRunning(cx, id); err != nil {
			t.Fatal(err)
		}
	}
	// Created and running, for each: four events read through b.
	first := readEvents(t, stream, 4)
	stream.Close()
	// A template made through a is used through b (the room is full:
	// refused, but by the quota, not for want of the template).
	if _, err := ca.CreateTemplate(cx, api.Template{Name: "busy", Spec: mustJSONRaw(t, ociCreate(w.busybox))}); err != nil {
		t.Fatal(err)
	}
	var ae *sdk.APIError
	_, err = cb.CreateSandbox(cx, api.CreateSandboxRequest{Extensions: map[string]string{"corral.dev/template": "busy"}}, sdk.CreateOptions{})
	if !errors.As(err, &ae) || ae.Code != api.CodeQuotaExceeded {
		t.Errorf("a create from the template through the other replica = %v, want %s", err, api.CodeQuotaExceeded)
	}
	for _, id := range made {
		if err := ca.DeleteSandbox(cx, id); err != nil {
			t.Fatal(err)
		}
	}
	// Resumed through a after b's last id: the two deletions, nothing
	// before them again.
	resumed, err := ca.Events(cx, sdk.EventStreamOptions{Metadata: md, After: first[len(first)-1].ID})
	if err != nil {
		t.Fatal(err)
	}
	defer resumed.Close()
	rest := readEvents(t, resumed, 2)
	all := append(first, rest...)
	types := map[string]int{}
	for i, ev := range all {
		types[ev.Type]++
		if i > 0 && atoi(ev.ID) <= atoi(all[i-1].ID) {
			t.Errorf("ids not increasing across replicas: %s then %s", all[i-1].ID, ev.ID)
		}
		if !slices.Contains(made, ev.SandboxID) {
			t.Errorf("event %+v of a sandbox that was not made", ev)
		}
	}
	if types[api.EventSandboxCreated] != 2 || types[api.EventSandboxRunning] != 2 || types[api.EventSandboxDeleted] != 2 {
		t.Errorf("events through two replicas: %v", types)
	}

	// Each event of the sandboxes, and each refusal, delivered once
	// though both replicas dispatch.
	testutil.WaitFor(t, time.Minute, "every event delivered", func() bool {
		rc.mu.Lock()
		defer rc.mu.Unlock()
		for _, ev := range all {
			if rc.times[ev.ID] == 0 {
				return false
			}
		}
		return true
	})
	time.Sleep(2 * time.Second) // a second delivery would come now
	rc.mu.Lock()
	defer rc.mu.Unlock()
	refused := 0
	for id, n := range rc.times {
		if n != 1 {
			t.Errorf("event %s delivered %d times", id, n)
		}
		if rc.byID[id].Type == api.EventQuotaRefused {
			refused++
		}
	}
	if refused != 15 {
		t.Errorf("%d quota.refused events delivered, want 15", refused)
	}
	if rc.bad != 0 {
		t.Errorf("%d deliveries failed their signature or body check", rc.bad)
	}
}

func mustJSONRaw(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestKubeTemplateWarmPool: on the kube tier a template's warmPool is a
// SandboxPool the server writes; the template shows its ready pods; a
// create from the template is adopted from it, personalised with the
// create's environment; a create of the same image without the template
// is not; deleting the template deletes the pool.
func TestKubeTemplateWarmPool(t *testing.T) {
	w := newKubeWorld(t)
	s := w.server(t)
	c := s.client(t)
	cx := ctx(t)
	spec := ociCreate(w.busybox)
	if _, err := c.CreateTemplate(cx, api.Template{Name: "kwarm", Spec: mustJSONRaw(t, spec), WarmPool: 1}); err != nil {
		t.Fatal(err)
	}
	var pools v1alpha1.SandboxPoolList
	if err := w.c.Client.List(cx, &pools, client.InNamespace(w.ns)); err != nil || len(pools.Items) != 1 {
		t.Fatalf("SandboxPools after the template = %d, %v", len(pools.Items), err)
	}
	pool := pools.Items[0].Name
	testutil.WaitFor(t, 2*time.Minute, "a warm pod, as the template shows", func() bool {
		tp, err := c.GetTemplate(cx, "kwarm")
		return err == nil && tp.WarmReady == 1
	})
	podOf := func(id string) string {
		var cr v1alpha1.Sandbox
		if err := w.c.Client.Get(cx, client.ObjectKey{Namespace: w.ns, Name: id}, &cr); err != nil {
			t.Fatal(err)
		}
		return cr.Status.PodName
	}
	cold, err := c.CreateSandbox(cx, spec, sdk.CreateOptions{Wait: true})
	if err != nil {
		t.Fatal(err)
	}
	if pod := podOf(cold.ID); strings.HasPrefix(pod, pool+"-") {
		t.Errorf("a create without the template adopted its warm pod %s", pod)
	}
	who := "claimer"
	sb, err := c.CreateSandbox(cx, api.CreateSandboxRequest{Env: map[string]*string{"WHO": &who},
		Extensions: map[string]string{"corral.dev/template": "kwarm"}}, sdk.CreateOptions{Wait: true})
	if err != nil {
		t.Fatal(err)
	}
	if pod := podOf(sb.ID); !strings.HasPrefix(pod, pool+"-") {
		t.Errorf("the template's create runs in pod %q, not one of pool %s", pod, pool)
	}
	box, err := c.Sandbox(cx, sb.ID, sdk.SandboxOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if out, _, code, err := box.Run(cx, `echo "$WHO"`, sdk.CommandOptions{}); err != nil || code != 0 || out != "claimer\n" {
		t.Errorf("in the adopted pod: %q, %d, %v", out, code, err)
	}
	if err := c.DeleteTemplate(cx, "kwarm", false); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 30*time.Second, "the template's pool deleted", func() bool {
		var l v1alpha1.SandboxPoolList
		return w.c.Client.List(cx, &l, client.InNamespace(w.ns)) == nil && len(l.Items) == 0
	})
	for _, id := range []string{sb.ID, cold.ID} {
		if err := c.DeleteSandbox(cx, id); err != nil {
			t.Fatal(err)
		}
		podGone(t, w, id)
	}
}
