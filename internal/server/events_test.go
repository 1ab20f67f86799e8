// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/internal/lifecycle"
	"github.com/corral-dev/corral/internal/testutil"
	"github.com/corral-dev/corral/sdk"
)

func (s *ts) sdk(key string) *sdk.Client {
	s.t.Helper()
	c, err := sdk.New(sdk.WithBaseURL(s.url), sdk.WithAPIKey(key))
	if err != nil {
		s.t.Fatal(err)
	}
	return c
}

// next reads one event within a few seconds.
func next(t *testing.T, st *sdk.EventStream) api.Event {
	t.Helper()
	type res struct {
		ev  api.Event
		err error
	}
	ch := make(chan res, 1)
	go func() { ev, err := st.Next(); ch <- res{ev, err} }()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatalf("next event: %v", r.err)
		}
		return r.ev
	case <-time.After(10 * time.Second):
		t.Fatal("no event within 10s")
	}
	return api.Event{}
}

// drain reads an unfollowed stream to its end.
func drain(t *testing.T, st *sdk.EventStream) []api.Event {
	t.Helper()
	var out []api.Event
	for {
		ev, err := st.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ev)
	}
}

func types(evs []api.Event) string {
	var out []string
	for _, ev := range evs {
		out = append(out, ev.Type)
	}
	return strings.Join(out, ",")
}

func TestEventStream(t *testing.T) {
	t.Parallel()
	s := newTS(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	a, b := s.sdk(s.keyA), s.sdk(s.keyB)
	live, err := a.Events(ctx, sdk.EventStreamOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	other, err := b.Events(ctx, sdk.EventStreamOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()

	body := basicCreate()
	body["metadata"] = map[string]string{"team": "red"}
	id := s.create(s.keyA, body).ID
	plain := s.create(s.keyA, basicCreate()).ID
	if r := s.call("POST", "/v1/sandboxes/"+id+"/pause", s.keyA, nil); r.status != http.StatusAccepted {
		t.Fatalf("pause = %d %s", r.status, r.body)
	}
	var got []api.Event
	for len(got) < 5 {
		got = append(got, next(t, live))
	}
	if ts := types(got); ts != "sandbox.created,sandbox.running,sandbox.created,sandbox.running,sandbox.paused" {
		t.Fatalf("followed stream = %s", ts)
	}
	for i, ev := range got {
		n, err := strconv.ParseInt(ev.ID, 10, 64)
		if err != nil || i > 0 && n <= mustInt(got[i-1].ID) {
			t.Errorf("event ids not increasing: %+v", got)
		}
		if ev.Source != api.EventSourceServer || ev.Time.IsZero() || ev.SandboxID == "" {
			t.Errorf("event %+v lacks a source, time or sandbox", ev)
		}
	}
	if got[0].SandboxID != id || got[0].Metadata["team"] != "red" || got[4].State != api.StatePaused {
		t.Errorf("events = %+v", got)
	}

	// Tenant t2 sees none of it, and its own sandbox only.
	idB := s.create(s.keyB, basicCreate()).ID
	if ev := next(t, other); ev.SandboxID != idB || ev.Type != api.EventSandboxCreated {
		t.Errorf("tenant t2's stream began with %+v", ev)
	}

	// Resuming after an event gives the rest, once each.
	rest, err := a.Events(ctx, sdk.EventStreamOptions{After: got[1].ID, NoFollow: true})
	if err != nil {
		t.Fatal(err)
	}
	if r := drain(t, rest); types(r) != types(got[2:]) || r[0].ID != got[2].ID {
		t.Errorf("resumed after %s = %s", got[1].ID, types(r))
	}
	// Filters: type, sandbox, metadata; the header form of the position.
	for _, c := range []struct {
		opts sdk.EventStreamOptions
		want string
	}{
		{sdk.EventStreamOptions{Types: []string{api.EventSandboxPaused, api.EventSandboxCreated}}, "sandbox.created,sandbox.created,sandbox.paused"},
		{sdk.EventStreamOptions{SandboxID: plain}, "sandbox.created,sandbox.running"},
		{sdk.EventStreamOptions{Metadata: map[string]string{"team": "red"}}, "sandbox.created,sandbox.running,sandbox.paused"},
		{sdk.EventStreamOptions{Metadata: map[string]string{"team": "blue"}}, ""},
		{sdk.EventStreamOptions{Limit: 2}, "sandbox.created,sandbox.running"},
	} {
		c.opts.NoFollow = true
		st, err := a.Events(ctx, c.opts)
		if err != nil {
			t.Fatal(err)
		}
		if r := types(drain(t, st)); r != c.want {
			t.Errorf("%+v = %s, want %s", c.opts, r, c.want)
		}
	}
	r := s.call("GET", "/v1/events?follow=false", s.keyA, nil, "Last-Event-ID", got[3].ID)
	if r.status != 200 || strings.Count(string(r.body), "\nevent: ") != 1 || !strings.Contains(string(r.body), "id: "+got[4].ID+"\n") {
		t.Errorf("Last-Event-ID %s = %d %q", got[3].ID, r.status, r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("Content-Type = %q", ct)
	}
}

func mustInt(s string) int64 {
	n, _ := strconv.ParseInt(s, 10, 64)
	return n
}

func TestEventStreamRejectsBadInput(t *testing.T) {
	t.Parallel()
	s := newTS(t)
	for q, code := range map[string]string{
		"type=sandbox.bogus":       api.CodeEventInvalidType,
		"type=sandbox.created,,x":  api.CodeEventInvalidType,
		"after=-1":                 api.CodeInvalidParameter,
		"after=x":                  api.CodeInvalidParameter,
		"follow=maybe":             api.CodeInvalidParameter,
		"limit=0":                  api.CodeInvalidParameter,
		"limit=x":                  api.CodeInvalidParameter,
		"sandboxId=..%2Fx":         api.CodeInvalidParameter,
		"metadata=novalue":         api.CodeInvalidMetadataFormat,
		"tenant=t2":                api.CodeInvalidParameter,
		"after=5&follow=false&x=1": api.CodeInvalidParameter,
	} {
		if r := s.call("GET", "/v1/events?"+q, s.keyA, nil); r.status != 400 || r.errCode(t) != code {
			t.Errorf("%s = %d %s", q, r.status, r.body)
		}
	}
	if r := s.call("GET", "/v1/events?after=3", s.keyA, nil, "Last-Event-ID", "4"); r.status != 400 {
		t.Errorf("disagreeing positions = %d %s", r.status, r.body)
	}
	if r := s.call("GET", "/v1/events", "", nil); r.status != 401 {
		t.Errorf("no key = %d", r.status)
	}
	if r := s.call("POST", "/v1/events", s.keyA, nil); r.status != 405 {
		t.Errorf("POST = %d", r.status)
	}
}

// TestEventStreamKeepsUp: a follower that connected before a burst
// reads every event of it once, in order, while it is written.
func TestEventStreamKeepsUp(t *testing.T) {
	t.Parallel()
	s := newTS(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	st, err := s.sdk(s.keyA).Events(ctx, sdk.EventStreamOptions{Types: []string{api.EventSandboxRenewed}})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	id := s.create(s.keyA, basicCreate()).ID
	const n = 2 * eventPage
	done := make(chan error, 1)
	go func() {
		for i := range n {
			at := time.Now().Add(time.Hour + time.Duration(i)*time.Second)
			if _, err := s.mgr.Renew(ctx, "t1", id, at); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	var ids []string
	for len(ids) < n {
		ids = append(ids, next(t, st).ID)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !slices.IsSortedFunc(ids, func(a, b string) int { return int(mustInt(a) - mustInt(b)) }) || len(slices.Compact(slices.Clone(ids))) != n {
		t.Errorf("ids out of order or repeated")
	}
}

// TestExpiringWarnsBeforeTheKill: sandbox.expiring arrives before
// sandbox.expired, once, carrying the expiry it warns of.
func TestExpiringWarnsBeforeTheKill(t *testing.T) {
	t.Parallel()
	s := newTSFull(t, nil, nil, func(c *lifecycle.Config) { c.ExpiryWarning = 2 * time.Second })
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	st, err := s.sdk(s.keyA).Events(ctx, sdk.EventStreamOptions{Types: []string{api.EventSandboxExpiring, api.EventSandboxExpired}})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	id := s.create(s.keyA, basicCreate()).ID
	if _, err := s.mgr.Renew(ctx, "t1", id, time.Now().Add(4*time.Second)); err != nil {
		t.Fatal(err)
	}
	warn, kill := next(t, st), next(t, st)
	if warn.Type != api.EventSandboxExpiring || kill.Type != api.EventSandboxExpired || warn.SandboxID != id || kill.SandboxID != id {
		t.Fatalf("events = %+v, %+v", warn, kill)
	}
	var data struct {
		ExpiresAt time.Time `json:"expiresAt"`
	}
	if err := json.Unmarshal(warn.Data, &data); err != nil || data.ExpiresAt.IsZero() {
		t.Fatalf("warning data %s: %v", warn.Data, err)
	}
	// About 2s before; a loaded machine's reaper may wake late, never
	// early.
	if lead := data.ExpiresAt.Sub(warn.Time); lead <= 0 || lead > 2*time.Second+100*time.Millisecond {
		t.Errorf("warned %v before the expiry, want up to 2s", lead)
	}
	if !kill.Time.After(warn.Time) || kill.Time.Before(data.ExpiresAt) {
		t.Errorf("warned at %v, expired at %v, expiry %v", warn.Time, kill.Time, data.ExpiresAt)
	}
}

// TestEventStreamsAreBounded: a tenant holds at most maxStreams open
// streams; another tenant is not held back by it.
func TestEventStreamsAreBounded(t *testing.T) {
	t.Parallel()
	s := newTS(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var open []*sdk.EventStream
	for range maxStreams {
		st, err := s.sdk(s.keyB).Events(ctx, sdk.EventStreamOptions{})
		if err != nil {
			t.Fatal(err)
		}
		open = append(open, st)
	}
	r := s.call("GET", "/v1/events?follow=false", s.keyB, nil)
	if r.status != 429 || r.errCode(t) != api.CodeEventTooManyStreams {
		t.Errorf("one stream too many = %d %s", r.status, r.body)
	}
	if r := s.call("GET", "/v1/events?follow=false", s.keyA, nil); r.status != 200 {
		t.Errorf("another tenant's stream = %d", r.status)
	}
	open[0].Close()
	testutil.WaitFor(t, 5*time.Second, "a closed stream's slot freed", func() bool {
		return s.call("GET", "/v1/events?follow=false", s.keyB, nil).status == 200
	})
	for _, st := range open[1:] {
		st.Close()
	}
}
