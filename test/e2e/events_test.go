// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/internal/testutil"
	"github.com/corral-dev/corral/internal/webhook"
	"github.com/corral-dev/corral/sdk"
)

// hookReceiver keeps the verified events it was sent, by id, and
// answers 500 until told to accept.
type hookReceiver struct {
	secret atomic.Pointer[string]
	accept atomic.Bool
	mu     sync.Mutex
	byID   map[string]api.Event
	// times counts the accepted deliveries of each id.
	times map[string]int
	bad   int
}

func (h *hookReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	h.mu.Lock()
	defer h.mu.Unlock()
	secret := h.secret.Load()
	if secret == nil || webhook.Verify(*secret, r.Header.Get(api.HeaderWebhookSignature), body, time.Now(), time.Minute) != nil {
		h.bad++
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	if !h.accept.Load() {
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	var ev api.Event
	if json.Unmarshal(body, &ev) != nil || ev.ID != r.Header.Get(api.HeaderWebhookEventID) {
		h.bad++
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	h.byID[ev.ID] = ev
	if h.times == nil {
		h.times = map[string]int{}
	}
	h.times[ev.ID]++
	w.WriteHeader(http.StatusNoContent)
}

func (h *hookReceiver) ids() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for id := range h.byID {
		out = append(out, id)
	}
	slices.SortFunc(out, func(a, b string) int { return atoi(a) - atoi(b) })
	return out
}

// readEvents reads n events of a stream, failing after a minute.
func readEvents(t *testing.T, st *sdk.EventStream, n int) []api.Event {
	t.Helper()
	out := make(chan []api.Event, 1)
	errs := make(chan error, 1)
	go func() {
		var evs []api.Event
		for len(evs) < n {
			ev, err := st.Next()
			if err != nil {
				errs <- err
				return
			}
			evs = append(evs, ev)
		}
		out <- evs
	}()
	select {
	case evs := <-out:
		return evs
	case err := <-errs:
		t.Fatalf("event stream: %v", err)
	case <-time.After(time.Minute):
		t.Fatalf("fewer than %d events within a minute", n)
	}
	return nil
}

func eventTypes(evs []api.Event) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = ev.Type
	}
	return out
}

// TestEventsAcrossACrash, on the native runtime: a webhook whose
// receiver fails every delivery until the server is killed (SIGKILL)
// gets every event once the server runs again, signed; a stream resumed
// by the last id read before the crash continues with no gap and no
// repeat.
func TestEventsAcrossACrash(t *testing.T) {
	requireOCI(t)
	t.Parallel()
	dir := t.TempDir()
	args := []string{"--webhook-allow-cidr", "127.0.0.0/8", "--webhook-retry-base", "100ms"}
	s1 := startServer(t, dir, args...)
	c1 := s1.client(t)
	rc := &hookReceiver{byID: map[string]api.Event{}}
	hs := httptest.NewServer(rc)
	defer hs.Close()
	wh, err := c1.CreateWebhook(ctx(t), api.WebhookRequest{URL: hs.URL + "/events"})
	if err != nil {
		t.Fatal(err)
	}
	rc.secret.Store(&wh.Secret)
	st, err := c1.Events(ctx(t), sdk.EventStreamOptions{Metadata: map[string]string{"test": "crash"}})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()

	sb, err := c1.CreateSandbox(ctx(t), api.CreateSandboxRequest{Image: &api.ImageSpec{URI: "host"},
		Metadata: map[string]string{"test": "crash"}, Entrypoint: []string{"sleep", "1d"}}, sdk.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c1.WaitRunning(ctx(t), sb.ID); err != nil {
		t.Fatal(err)
	}
	before := readEvents(t, st, 2)
	if got := eventTypes(before); !slices.Equal(got, []string{api.EventSandboxCreated, api.EventSandboxRunning}) {
		t.Fatalf("events before the crash = %v", got)
	}
	// Both were attempted and refused, then the server dies.
	testutil.WaitFor(t, 30*time.Second, "both deliveries refused once", func() bool {
		ds, err := c1.WebhookDeliveries(ctx(t), wh.ID, 10)
		refused := 0
		for _, d := range ds {
			if d.LastStatus == http.StatusInternalServerError {
				refused++
			}
		}
		return err == nil && refused == 2
	})
	s1.kill9(t)
	st.Close()
	rc.accept.Store(true)

	s2 := startServer(t, dir, args...)
	c2 := s2.client(t)
	resumed, err := c2.Events(ctx(t), sdk.EventStreamOptions{After: before[1].ID, Metadata: map[string]string{"test": "crash"}})
	if err != nil {
		t.Fatal(err)
	}
	defer resumed.Close()
	if err := c2.PauseSandbox(ctx(t), sb.ID); err != nil {
		t.Fatal(err)
	}
	if err := c2.ResumeSandbox(ctx(t), sb.ID); err != nil {
		t.Fatal(err)
	}
	if err := c2.DeleteSandbox(ctx(t), sb.ID); err != nil {
		t.Fatal(err)
	}
	after := readEvents(t, resumed, 3)
	if got := eventTypes(after); !slices.Equal(got, []string{api.EventSandboxPaused, api.EventSandboxResumed, api.EventSandboxDeleted}) {
		t.Fatalf("events after the restart = %v", got)
	}
	all := append(before, after...)
	for i := 1; i < len(all); i++ {
		if atoi(all[i].ID) <= atoi(all[i-1].ID) {
			t.Errorf("ids not increasing across the restart: %s then %s", all[i-1].ID, all[i].ID)
		}
	}
	// The webhook: every event, the two from before the crash included.
	want := make([]string, len(all))
	for i, ev := range all {
		want[i] = ev.ID
	}
	testutil.WaitFor(t, time.Minute, "every event delivered", func() bool { return len(rc.ids()) >= len(want) })
	if got := rc.ids(); !slices.Equal(got, want) {
		t.Errorf("delivered %v, want %v", got, want)
	}
	rc.mu.Lock()
	bad := rc.bad
	rc.mu.Unlock()
	if bad != 0 {
		t.Errorf("%d deliveries failed their signature or body check", bad)
	}
	// The receiver keeps an event before it answers, and the server
	// records the delivery once the answer is read: wait for the record.
	var ds []api.WebhookDelivery
	testutil.WaitFor(t, 30*time.Second, "every delivery recorded as delivered", func() bool {
		ds, err = c2.WebhookDeliveries(ctx(t), wh.ID, 100)
		if err != nil || len(ds) != len(want) {
			return false
		}
		for _, d := range ds {
			if d.State != api.DeliveryDelivered {
				return false
			}
		}
		return true
	})
	for _, d := range ds {
		if (d.EventID == before[0].ID || d.EventID == before[1].ID) && d.Attempts < 2 {
			t.Errorf("delivery %+v: refused before the crash, so at least its second attempt", d)
		}
	}
}

// TestEventsFromInside, on the native runtime: code in a sandbox that
// asked for the events socket posts an application event, which joins
// its tenant's stream marked as the sandbox's; it cannot post as another
// sandbox; a sandbox that did not ask has no socket.
func TestEventsFromInside(t *testing.T) {
	requireOCI(t)
	t.Parallel()
	if _, err := os.Stat("/usr/bin/curl"); err != nil {
		t.Fatal("curl is needed on this machine (the host image runs it): apt-get install curl")
	}
	s := startServer(t, t.TempDir(), "--runtime", "oci")
	c := s.client(t)
	bad := ociCreate("host")
	bad.Extensions = map[string]string{"corral.dev/events": "yes"}
	if _, err := c.CreateSandbox(ctx(t), bad, sdk.CreateOptions{}); err == nil || !strings.Contains(err.Error(), "corral.dev/events") {
		t.Errorf("a create with a bad events extension = %v", err)
	}
	req := ociCreate("host")
	req.Extensions = map[string]string{"corral.dev/events": "true"}
	req.Metadata = map[string]string{"job": "42"}
	sb, err := c.CreateSandbox(ctx(t), req, sdk.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	plain, err := c.CreateSandbox(ctx(t), ociCreate("host"), sdk.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st, err := c.Events(ctx(t), sdk.EventStreamOptions{Types: []string{api.EventApp}})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	x := sandboxExecd(t, c, sb.ID)
	post := func(id, body string) string {
		out, _, _ := x.run(`curl -s -o /dev/null -w '%{http_code}' --unix-socket "$CORRAL_SECRETS_SOCKET" -H "Corral-Session-Key: $CORRAL_SESSION_KEY" `+
			`-d '`+body+`' http://corral/v1/sandboxes/`+id+`/events`, nil)
		return strings.TrimSpace(out)
	}
	if code := post("$CORRAL_SANDBOX_ID", `{"name":"build.done","data":{"tests":118,"ok":true}}`); code != "202" {
		t.Fatalf("post = %s", code)
	}
	ev := readEvents(t, st, 1)[0]
	var data struct {
		Name string
		Data struct {
			Tests int
			OK    bool
		}
	}
	if err := json.Unmarshal(ev.Data, &data); err != nil || ev.Source != api.EventSourceSandbox || ev.SandboxID != sb.ID ||
		ev.Metadata["job"] != "42" || data.Name != "build.done" || data.Data.Tests != 118 || !data.Data.OK {
		t.Errorf("event = %+v (%v)", ev, err)
	}
	// As another sandbox, with its own key: refused, and nothing joins.
	if code := post(plain.ID, `{"name":"forged"}`); code != "403" {
		t.Errorf("a post naming another sandbox = %s", code)
	}
	if code := post("$CORRAL_SANDBOX_ID", `{"name":"Not A Name"}`); code != "400" {
		t.Errorf("a bad name = %s", code)
	}
	y := sandboxExecd(t, c, plain.ID)
	if out, _, _ := y.run(`test -e /run/corral/secrets.sock && echo socket; echo "key=$CORRAL_SESSION_KEY"`, nil); strings.TrimSpace(out) != "key=" {
		t.Errorf("a sandbox that did not ask has %q", out)
	}
	if code := post("$CORRAL_SANDBOX_ID", `{"name":"second"}`); code != "202" {
		t.Fatalf("second post = %s", code)
	}
	if ev := readEvents(t, st, 1)[0]; !strings.Contains(string(ev.Data), `"second"`) {
		t.Errorf("the next event = %+v, want the second post (the forged one never joined)", ev)
	}
}
