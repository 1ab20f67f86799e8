// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"testing"
	"time"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/internal/testutil"
)

// A sandbox created with access.renew.extend.seconds is renewed by the
// requests the server proxies to it: its expiry moves to now + N when
// that is later, at most once per interval; a sandbox without the
// extension keeps its expiry, and so does one whose expiry is later.
func TestRenewOnAccess(t *testing.T) {
	t.Parallel()
	s := newTS(t)
	expiry := func(id string) time.Time {
		t.Helper()
		var sb api.Sandbox
		s.call("GET", "/v1/sandboxes/"+id, s.keyA, nil).decode(t, &sb)
		if sb.ExpiresAt == nil {
			t.Fatalf("sandbox %s has no expiry", id)
		}
		return *sb.ExpiresAt
	}
	create := func(timeout int, extend string) string {
		b := basicCreate()
		b["timeout"] = timeout
		if extend != "" {
			b["extensions"] = map[string]string{"access.renew.extend.seconds": extend}
		}
		return s.create(s.keyA, b).ID
	}
	renewing, plain, later := create(60, "300"), create(60, ""), create(3600, "300")
	before := map[string]time.Time{renewing: expiry(renewing), plain: expiry(plain), later: expiry(later)}
	for _, id := range []string{renewing, plain, later} {
		if r := s.call("GET", "/v1/sandboxes/"+id+"/proxy/8080/", s.keyA, nil); r.status != 200 {
			t.Fatalf("proxy = %d %s", r.status, r.body)
		}
	}
	testutil.WaitFor(t, 10*time.Second, "the proxied request to renew the sandbox", func() bool {
		return expiry(renewing).Sub(before[renewing]) > 200*time.Second
	})
	if left := time.Until(expiry(renewing)); left < 290*time.Second || left > 301*time.Second {
		t.Errorf("renewed expiry is %v from now, want about 300 s", left)
	}
	// Within the interval (a minute), another request starts no renewal;
	// the others never had one to start.
	for _, id := range []string{renewing, plain, later} {
		sb, err := s.mgr.ByID(id)
		if err != nil {
			t.Fatal(err)
		}
		if s.mgr.RenewOnAccess(sb) {
			t.Errorf("sandbox %s was renewed again", id)
		}
	}
	for id, want := range map[string]time.Time{plain: before[plain], later: before[later]} {
		if got := expiry(id); !got.Equal(want) {
			t.Errorf("sandbox %s expires at %v, want %v", id, got, want)
		}
	}
}

// A GET through the proxy marked Corral-Observe: 1 (a console watching
// metrics) neither renews a sandbox on access nor resumes a paused one;
// the same request unmarked does both.
func TestObservingKeepsNothingAwake(t *testing.T) {
	t.Parallel()
	s := newTS(t)
	b := basicCreate()
	b["timeout"] = 60
	b["extensions"] = map[string]string{"access.renew.extend.seconds": "300"}
	id := s.create(s.keyA, b).ID
	expiry := func() time.Time {
		t.Helper()
		var sb api.Sandbox
		s.call("GET", "/v1/sandboxes/"+id, s.keyA, nil).decode(t, &sb)
		return *sb.ExpiresAt
	}
	before := expiry()
	for range 3 {
		if r := s.call("GET", "/v1/sandboxes/"+id+"/proxy/8080/", s.keyA, nil, api.HeaderObserve, "1"); r.status != 200 {
			t.Fatalf("an observing request = %d %s", r.status, r.body)
		}
	}
	time.Sleep(300 * time.Millisecond)
	if got := expiry(); !got.Equal(before) {
		t.Errorf("observing renewed the sandbox: %v → %v", before, got)
	}
	if r := s.call("POST", "/v1/sandboxes/"+id+"/pause", s.keyA, nil); r.status != 202 {
		t.Fatalf("pause = %d %s", r.status, r.body)
	}
	if r := s.call("GET", "/v1/sandboxes/"+id+"/proxy/8080/", s.keyA, nil, api.HeaderObserve, "1"); r.status != 409 {
		t.Errorf("an observing request to a paused sandbox = %d %s, want 409", r.status, r.body)
	}
	var sb api.Sandbox
	if s.call("GET", "/v1/sandboxes/"+id, s.keyA, nil).decode(t, &sb); sb.Status.State != "Paused" {
		t.Errorf("observing resumed the sandbox: %s", sb.Status.State)
	}
	// Unmarked, the same request resumes and renews it.
	if r := s.call("GET", "/v1/sandboxes/"+id+"/proxy/8080/", s.keyA, nil); r.status != 200 {
		t.Fatalf("a plain request to the paused sandbox = %d %s", r.status, r.body)
	}
	testutil.WaitFor(t, 10*time.Second, "the plain request to renew the sandbox", func() bool { return expiry().Sub(before) > 200*time.Second })
}
