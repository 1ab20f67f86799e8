// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package lifecycle

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/errdefs"
	"github.com/corral-dev/corral/internal/driver"
	"github.com/corral-dev/corral/internal/driver/fakedriver"
	"github.com/corral-dev/corral/internal/quota"
	"github.com/corral-dev/corral/internal/sandbox"
	"github.com/corral-dev/corral/internal/store"
	"github.com/corral-dev/corral/internal/testutil"
)

type rig struct {
	dir string
	m   *Manager
	d   *fakedriver.Driver
	st  *store.Store
	// stop ends Run and waits for it.
	stop func()
}

// newRig starts a manager over a fake driver and a store in dir. Calling it
// again with the same dir simulates a server restart.
func newRig(t *testing.T, dir string, tweak func(*Config, *fakedriver.Config)) *rig {
	t.Helper()
	return newRigWith(t, dir, tweak, nil)
}

// newRigWith is newRig with the records the Manager keeps wrapped (nil:
// the store itself).
func newRigWith(t *testing.T, dir string, tweak func(*Config, *fakedriver.Config), records func(*store.Store) Records) *rig {
	t.Helper()
	fcfg := fakedriver.Config{Dir: filepath.Join(dir, "fake")}
	cfg := Config{DriverName: fakedriver.Name, MaintainInterval: time.Hour}
	if tweak != nil {
		tweak(&cfg, &fcfg)
	}
	d, err := fakedriver.New(fcfg)
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(t.Context(), filepath.Join(dir, "corral.db"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Driver, cfg.Store = d, st
	if records != nil {
		cfg.Records = records(st)
	}
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(t.Context()); err != nil {
		t.Fatalf("Start = %v", err)
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(t.Context()))
	done := make(chan struct{})
	go func() { _ = m.Run(ctx); close(done) }()
	var once sync.Once
	r := &rig{dir: dir, m: m, d: d, st: st}
	r.stop = func() {
		once.Do(func() {
			cancel()
			<-done
			_ = d.Close()
			_ = st.Close()
		})
	}
	t.Cleanup(r.stop)
	return r
}

func req(tenant, image string) CreateRequest {
	return CreateRequest{Tenant: tenant, Image: &sandbox.Image{URI: image}, Entrypoint: []string{"sleep", "infinity"}}
}

func mustCreate(t *testing.T, m *Manager, r CreateRequest) *sandbox.Sandbox {
	t.Helper()
	sb, err := m.Create(t.Context(), r)
	if err != nil {
		t.Fatalf("Create = %v", err)
	}
	return sb
}

func waitState(t *testing.T, m *Manager, tenant, id string, want sandbox.State) *sandbox.Sandbox {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		sb, err := m.Get(t.Context(), tenant, id)
		if err == nil && sb.Status.State == want {
			return sb
		}
		if time.Now().After(deadline) {
			t.Fatalf("sandbox %s: state %v (err %v), want %v", id, sb.Status.State, err, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func backendIDs(t *testing.T, d driver.Driver) map[string]bool {
	t.Helper()
	ls, err := d.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, l := range ls {
		out[l.ID] = true
	}
	return out
}

func TestCreateGetListDelete(t *testing.T) {
	t.Parallel()
	r := newRig(t, t.TempDir(), nil)
	a := mustCreate(t, r.m, CreateRequest{Tenant: "t1", Image: &sandbox.Image{URI: "fake:ok"}, Timeout: time.Hour, Metadata: map[string]string{"team": "a"}})
	if a.Status.State != sandbox.StateRunning || len(a.Handle) == 0 || a.ExpiresAt.IsZero() {
		t.Fatalf("Create = %+v, want Running with a handle and an expiry", a)
	}
	if got := a.Entrypoint; len(got) != 3 || got[0] != "tail" {
		t.Errorf("default entrypoint = %v, want tail -f /dev/null", got)
	}
	b := mustCreate(t, r.m, req("t1", "fake:ok"))
	mustCreate(t, r.m, req("t2", "fake:ok"))

	items, total := r.m.List(t.Context(), "t1", Filter{PageSize: 10})
	if total != 2 || items[0].ID != b.ID || items[1].ID != a.ID {
		t.Fatalf("List(t1) = %d items (total %d), want b then a", len(items), total)
	}
	items, total = r.m.List(t.Context(), "t1", Filter{Metadata: map[string]string{"team": "a"}, PageSize: 10})
	if total != 1 || items[0].ID != a.ID {
		t.Fatalf("List(team=a) total = %d, want only a", total)
	}
	items, total = r.m.List(t.Context(), "t1", Filter{Page: 2, PageSize: 1})
	if total != 2 || len(items) != 1 || items[0].ID != a.ID {
		t.Fatalf("List(page 2 of size 1) = %v, total %d", items, total)
	}
	if _, err := r.m.Get(t.Context(), "t2", a.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("Get of another tenant's sandbox = %v, want ErrNotFound", err)
	}
	if err := r.m.Delete(t.Context(), "t2", a.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("Delete of another tenant's sandbox = %v, want ErrNotFound", err)
	}
	if err := r.m.Delete(t.Context(), "t1", a.ID); err != nil {
		t.Fatalf("Delete = %v", err)
	}
	if _, err := r.m.Get(t.Context(), "t1", a.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("Get after Delete = %v, want ErrNotFound", err)
	}
	if err := r.m.Delete(t.Context(), "t1", a.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("second Delete = %v, want ErrNotFound", err)
	}
	if backendIDs(t, r.d)[a.ID] {
		t.Fatalf("Delete left the backend object of %s", a.ID)
	}
}

func TestCreateFailureIsRecordedAndCleanedUp(t *testing.T) {
	t.Parallel()
	r := newRig(t, t.TempDir(), nil)
	_, err := r.m.Create(t.Context(), req("t1", "fake:fail"))
	if !errors.Is(err, errdefs.ErrUnavailable) {
		t.Fatalf("Create(fake:fail) = %v, want ErrUnavailable", err)
	}
	items, _ := r.m.List(t.Context(), "t1", Filter{PageSize: 10})
	if len(items) != 1 || items[0].Status.State != sandbox.StateFailed || items[0].Status.Reason != sandbox.ReasonRuntimeUnavailable {
		t.Fatalf("after a failed create, List = %+v; want one Failed runtime_unavailable record", items)
	}
	if ids := backendIDs(t, r.d); len(ids) != 0 {
		t.Fatalf("failed create left backend objects %v", ids)
	}
	_, err = r.m.Create(t.Context(), req("t1", "fake:missing"))
	if !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Fatalf("Create(fake:missing) = %v, want ErrInvalidArgument", err)
	}
}

// TestRetryAfterUnavailableRuntimeCreatesAgain: a create that failed
// because the runtime could not be reached is not replayed to a retry
// with the same Idempotency-Key; the retry creates anew. A create that
// failed for a reason of its own is replayed.
func TestRetryAfterUnavailableRuntimeCreatesAgain(t *testing.T) {
	t.Parallel()
	r := newRig(t, t.TempDir(), nil)
	first := req("t1", "fake:fail")
	first.IdempotencyKey, first.RequestHash = "retry-key", "h"
	if _, err := r.m.Create(t.Context(), first); !errors.Is(err, errdefs.ErrUnavailable) {
		t.Fatalf("first = %v", err)
	}
	if _, err := r.m.Create(t.Context(), first); !errors.Is(err, errdefs.ErrUnavailable) {
		t.Fatalf("retry = %v, want the runtime's unavailability again, not a replayed conflict", err)
	}
	if items, total := r.m.List(t.Context(), "t1", Filter{PageSize: 10}); total != 2 || items[0].ID == items[1].ID {
		t.Fatalf("the retry made %d records, want 2 (it must run again)", total)
	}
	missing := req("t1", "fake:missing")
	missing.IdempotencyKey, missing.RequestHash = "missing-key", "h2"
	_, err1 := r.m.Create(t.Context(), missing)
	_, err2 := r.m.Create(t.Context(), missing)
	if !errors.Is(err1, errdefs.ErrInvalidArgument) || !errors.Is(err2, errdefs.ErrFailedPrecondition) {
		t.Fatalf("missing image: first %v, replay %v", err1, err2)
	}
	if _, total := r.m.List(t.Context(), "t1", Filter{PageSize: 10}); total != 3 {
		t.Fatalf("a replayed failure made a record: %d", total)
	}
}

// slowInsert is the store with a pause after each new record is written:
// what a loaded machine does to the goroutine that wrote it.
type slowInsert struct{ *store.Store }

func (s slowInsert) InsertSandbox(ctx context.Context, sb *sandbox.Sandbox, idem *sandbox.Idempotency, ev *sandbox.Event) (*sandbox.Idempotency, error) {
	prev, err := s.Store.InsertSandbox(ctx, sb, idem, ev)
	if err == nil {
		time.Sleep(100 * time.Millisecond)
	}
	return prev, err
}

func TestIdempotencyKey(t *testing.T) {
	t.Parallel()
	// The first create is paused just after its record and key are
	// written: the others find the key then, and must find its sandbox
	// too (under stress-ng they once got "no longer exists").
	r := newRigWith(t, t.TempDir(), func(_ *Config, f *fakedriver.Config) { f.CreateDelay = 50 * time.Millisecond },
		func(st *store.Store) Records { return slowInsert{st} })
	base := req("t1", "fake:ok")
	base.IdempotencyKey, base.RequestHash = "key-1", "hash-1"
	var wg sync.WaitGroup
	ids := make([]string, 5)
	for i := range ids {
		wg.Go(func() {
			sb, err := r.m.Create(t.Context(), base)
			if err != nil {
				t.Errorf("Create #%d = %v", i, err)
				return
			}
			if sb.Status.State != sandbox.StateRunning {
				t.Errorf("Create #%d state = %v, want Running", i, sb.Status.State)
			}
			ids[i] = sb.ID
		})
	}
	wg.Wait()
	for i := range ids {
		if ids[i] != ids[0] {
			t.Fatalf("concurrent creates with one key made %v, want one sandbox", ids)
		}
	}
	if _, total := r.m.List(t.Context(), "t1", Filter{PageSize: 10}); total != 1 {
		t.Fatalf("%d sandboxes, want 1", total)
	}
	other := base
	other.RequestHash = "hash-2"
	if _, err := r.m.Create(t.Context(), other); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Fatalf("same key, different request = %v, want ErrInvalidArgument", err)
	}
	otherTenant := base
	otherTenant.Tenant = "t2"
	if sb := mustCreate(t, r.m, otherTenant); sb.ID == ids[0] {
		t.Fatalf("another tenant's key returned the first tenant's sandbox")
	}
}

func TestPauseResume(t *testing.T) {
	t.Parallel()
	r := newRig(t, t.TempDir(), nil)
	sb := mustCreate(t, r.m, req("t1", "fake:ok"))
	if err := r.m.Resume(t.Context(), "t1", sb.ID); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Fatalf("Resume of Running = %v, want ErrFailedPrecondition", err)
	}
	if err := r.m.Pause(t.Context(), "t1", sb.ID); err != nil {
		t.Fatalf("Pause = %v", err)
	}
	if got, _ := r.m.Get(t.Context(), "t1", sb.ID); got.Status.State != sandbox.StatePaused {
		t.Fatalf("right after Pause the state is %v, want Paused", got.Status.State)
	}
	if err := r.m.Pause(t.Context(), "t1", sb.ID); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Fatalf("Pause of Paused = %v, want ErrFailedPrecondition", err)
	}
	if err := r.m.Resume(t.Context(), "t1", sb.ID); err != nil {
		t.Fatalf("Resume = %v", err)
	}
	if got, _ := r.m.Get(t.Context(), "t1", sb.ID); got.Status.State != sandbox.StateRunning {
		t.Fatalf("right after Resume the state is %v, want Running", got.Status.State)
	}
	evs, _ := r.st.Events(t.Context(), sb.ID, 0, 100, "")
	var types []string
	for _, ev := range evs {
		types = append(types, ev.Type)
	}
	want := []string{"created", "started", "Pausing", "paused", "Resuming", "resumed"}
	if len(types) != len(want) {
		t.Fatalf("events = %v, want %v", types, want)
	}
	for i := range want {
		if types[i] != want[i] {
			t.Fatalf("events = %v, want %v", types, want)
		}
	}
}

func TestRenew(t *testing.T) {
	t.Parallel()
	r := newRig(t, t.TempDir(), func(c *Config, _ *fakedriver.Config) { c.MaxTimeout = 2 * time.Hour })
	ttl := req("t1", "fake:ok")
	ttl.Timeout = time.Hour
	sb := mustCreate(t, r.m, ttl)
	at := time.Now().Add(90 * time.Minute)
	got, err := r.m.Renew(t.Context(), "t1", sb.ID, at)
	if err != nil || !got.Equal(at.UTC()) {
		t.Fatalf("Renew = %v, %v; want %v", got, err, at)
	}
	cases := []struct {
		name string
		at   time.Time
		want error
	}{
		{"past", time.Now().Add(-time.Minute), errdefs.ErrInvalidArgument},
		{"beyond max", time.Now().Add(3 * time.Hour), errdefs.ErrInvalidArgument},
	}
	for _, tc := range cases {
		if _, err := r.m.Renew(t.Context(), "t1", sb.ID, tc.at); !errors.Is(err, tc.want) {
			t.Errorf("Renew(%s) = %v, want %v", tc.name, err, tc.want)
		}
	}
	if _, err := r.m.Create(t.Context(), req("t1", "fake:ok")); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("manual-cleanup create under --max-timeout = %v, want ErrInvalidArgument", err)
	}
	r2 := newRig(t, t.TempDir(), nil)
	manual := mustCreate(t, r2.m, req("t1", "fake:ok"))
	if _, err := r2.m.Renew(t.Context(), "t1", manual.ID, time.Now().Add(time.Hour)); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Errorf("Renew of a manual-cleanup sandbox = %v, want ErrFailedPrecondition", err)
	}
}

func TestPatchMetadata(t *testing.T) {
	t.Parallel()
	r := newRig(t, t.TempDir(), nil)
	c := req("t1", "fake:ok")
	c.Metadata = map[string]string{"a": "1", "b": "2"}
	sb := mustCreate(t, r.m, c)
	three := "3"
	got, err := r.m.PatchMetadata(t.Context(), "t1", sb.ID, map[string]*string{"a": nil, "c": &three, "zz": nil})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Metadata) != 2 || got.Metadata["b"] != "2" || got.Metadata["c"] != "3" {
		t.Fatalf("after patch metadata = %v, want b=2 c=3", got.Metadata)
	}
	bad := "not ok!"
	if _, err := r.m.PatchMetadata(t.Context(), "t1", sb.ID, map[string]*string{"x": &bad}); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Fatalf("bad value = %v, want ErrInvalidArgument", err)
	}
	if _, err := r.m.PatchMetadata(t.Context(), "t1", sb.ID, map[string]*string{"corral.dev/x": &three}); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Fatalf("reserved key = %v, want ErrInvalidArgument", err)
	}
}

func TestExitIsObserved(t *testing.T) {
	t.Parallel()
	r := newRig(t, t.TempDir(), nil)
	ok := mustCreate(t, r.m, req("t1", "fake:exit=0"))
	bad := mustCreate(t, r.m, req("t1", "fake:exit=3"))
	got := waitState(t, r.m, "t1", ok.ID, sandbox.StateTerminated)
	if got.Status.Reason != sandbox.ReasonExited {
		t.Errorf("exit 0 reason = %q", got.Status.Reason)
	}
	got = waitState(t, r.m, "t1", bad.ID, sandbox.StateFailed)
	if got.Status.Reason != sandbox.ReasonExitedError || got.Status.Message != "the entrypoint exited with code 3" {
		t.Errorf("exit 3 status = %+v", got.Status)
	}
	// The exit is recorded first, then the backend objects go (a reader
	// may see Terminated a moment before): they go without a request.
	testutil.WaitFor(t, 10*time.Second, "the exited sandboxes' backend objects to go", func() bool {
		return len(backendIDs(t, r.d)) == 0
	})
}

func TestLostSandboxIsReported(t *testing.T) {
	t.Parallel()
	r := newRig(t, t.TempDir(), nil)
	sb := mustCreate(t, r.m, req("t1", "fake:ok"))
	if err := os.Remove(filepath.Join(r.dir, "fake", "objects", sb.ID+".json")); err != nil {
		t.Fatal(err)
	}
	got := waitState(t, r.m, "t1", sb.ID, sandbox.StateFailed)
	if got.Status.Reason != sandbox.ReasonLost {
		t.Fatalf("reason = %q, want %q", got.Status.Reason, sandbox.ReasonLost)
	}
}

func TestReadsDoNotWaitForCreates(t *testing.T) {
	t.Parallel()
	r := newRig(t, t.TempDir(), func(c *Config, f *fakedriver.Config) {
		f.CreateDelay = time.Hour
		c.CreateTimeout = 3 * time.Second
	})
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() { _, _ = r.m.Create(t.Context(), req("t1", "fake:ok")) })
	}
	// While all ten creates are stuck in the driver, reads answer and show them.
	deadline := time.Now().Add(2 * time.Second)
	for {
		items, total := r.m.List(t.Context(), "t1", Filter{States: []sandbox.State{sandbox.StatePending}, PageSize: 20})
		if total == 10 {
			for _, sb := range items {
				if _, err := r.m.Get(t.Context(), "t1", sb.ID); err != nil {
					t.Fatalf("Get during create = %v", err)
				}
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d Pending sandboxes visible while creates are in flight", total)
		}
		time.Sleep(5 * time.Millisecond)
	}
	wg.Wait()
	items, _ := r.m.List(t.Context(), "t1", Filter{PageSize: 20})
	for _, sb := range items {
		if sb.Status.State != sandbox.StateFailed {
			t.Fatalf("a create that timed out left state %v", sb.Status.State)
		}
	}
	if ids := backendIDs(t, r.d); len(ids) != 0 {
		t.Fatalf("timed-out creates left %v", ids)
	}
}

func TestTTLExpiry(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, t.TempDir(), func(c *Config, _ *fakedriver.Config) { c.RetainTerminated = 10 * time.Minute })
		short := req("t1", "fake:ok")
		short.Timeout = time.Minute
		sb := mustCreate(t, r.m, short)
		paused := mustCreate(t, r.m, short)
		if err := r.m.Pause(t.Context(), "t1", paused.ID); err != nil {
			t.Fatal(err)
		}
		keep := mustCreate(t, r.m, req("t1", "fake:ok"))

		time.Sleep(59 * time.Second)
		synctest.Wait()
		if got, _ := r.m.Get(t.Context(), "t1", sb.ID); got.Status.State != sandbox.StateRunning {
			t.Fatalf("before expiry state = %v", got.Status.State)
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		got, err := r.m.Get(t.Context(), "t1", sb.ID)
		if err != nil || got.Status.State != sandbox.StateTerminated || got.Status.Reason != sandbox.ReasonTTLExpiry {
			t.Fatalf("after expiry %s = %+v, %v; want Terminated ttl_expiry", sb.ID, got, err)
		}
		// A paused sandbox's time to live does not run down.
		if got, err := r.m.Get(t.Context(), "t1", paused.ID); err != nil || got.Status.State != sandbox.StatePaused {
			t.Fatalf("a paused sandbox past its expiry = %+v, %v; want Paused", got, err)
		}
		if ids := backendIDs(t, r.d); len(ids) != 2 || !ids[keep.ID] || !ids[paused.ID] {
			t.Fatalf("after expiry the backend has %v, want %s and %s", ids, keep.ID, paused.ID)
		}
		time.Sleep(11 * time.Minute)
		synctest.Wait()
		if _, err := r.m.Get(t.Context(), "t1", sb.ID); !errors.Is(err, errdefs.ErrNotFound) {
			t.Fatalf("after retention Get = %v, want ErrNotFound", err)
		}
		r.stop()
	})
}

// TestPausedTimeDoesNotCount: a resumed sandbox's expiry moves by the
// time it was paused; one paused past the retention is deleted.
func TestPausedTimeDoesNotCount(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, t.TempDir(), func(c *Config, _ *fakedriver.Config) { c.PausedRetention = time.Hour })
		short := req("t1", "fake:ok")
		short.Timeout = 10 * time.Minute
		sb := mustCreate(t, r.m, short)
		old := mustCreate(t, r.m, short)
		time.Sleep(time.Minute)
		for _, id := range []string{sb.ID, old.ID} {
			if err := r.m.Pause(t.Context(), "t1", id); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(30 * time.Minute)
		if err := r.m.Resume(t.Context(), "t1", sb.ID); err != nil {
			t.Fatal(err)
		}
		got, _ := r.m.Get(t.Context(), "t1", sb.ID)
		if want := sb.ExpiresAt.Add(30 * time.Minute); !got.ExpiresAt.Equal(want) {
			t.Errorf("expiry after 30m paused = %v, want %v (moved by the pause)", got.ExpiresAt, want)
		}
		time.Sleep(31 * time.Minute)
		synctest.Wait()
		got, err := r.m.Get(t.Context(), "t1", old.ID)
		if err != nil || got.Status.State != sandbox.StateTerminated || got.Status.Reason != sandbox.ReasonPausedRetention {
			t.Fatalf("paused for over the retention = %+v, %v; want Terminated %s", got, err, sandbox.ReasonPausedRetention)
		}
		if got, _ := r.m.Get(t.Context(), "t1", sb.ID); got.Status.State != sandbox.StateTerminated || got.Status.Reason != sandbox.ReasonTTLExpiry {
			t.Errorf("the resumed one, 9 minutes of its time later = %v %s; want expired", got.Status.State, got.Status.Reason)
		}
		r.stop()
	})
}

func TestRenewPostponesExpiry(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, t.TempDir(), nil)
		short := req("t1", "fake:ok")
		short.Timeout = time.Minute
		sb := mustCreate(t, r.m, short)
		time.Sleep(30 * time.Second)
		if _, err := r.m.Renew(t.Context(), "t1", sb.ID, time.Now().Add(5*time.Minute)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		if got, _ := r.m.Get(t.Context(), "t1", sb.ID); got.Status.State != sandbox.StateRunning {
			t.Fatalf("renewed sandbox state = %v, want Running", got.Status.State)
		}
		time.Sleep(4 * time.Minute)
		synctest.Wait()
		if got, _ := r.m.Get(t.Context(), "t1", sb.ID); got.Status.State != sandbox.StateTerminated {
			t.Fatalf("after the renewed expiry state = %v, want Terminated", got.Status.State)
		}
		r.stop()
	})
}

func TestRestartRecovery(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r1 := newRig(t, dir, nil)
	running := mustCreate(t, r1.m, req("t1", "fake:ok"))
	paused := mustCreate(t, r1.m, req("t1", "fake:ok"))
	if err := r1.m.Pause(t.Context(), "t1", paused.ID); err != nil {
		t.Fatal(err)
	}
	expiring := req("t1", "fake:ok")
	expiring.Timeout = time.Hour
	expired := mustCreate(t, r1.m, expiring)
	deleting := mustCreate(t, r1.m, req("t1", "fake:ok"))
	r1.stop()

	st, err := store.Open(t.Context(), filepath.Join(dir, "corral.db"))
	if err != nil {
		t.Fatal(err)
	}
	// The TTL passed while the server was down.
	expired.ExpiresAt = time.Now().Add(-time.Minute)
	if err := st.UpdateSandbox(t.Context(), expired, nil); err != nil {
		t.Fatal(err)
	}
	// A delete was interrupted after it recorded Stopping.
	_ = deleting.SetStatus(sandbox.StateStopping, sandbox.ReasonUserDelete, "", time.Now())
	if err := st.UpdateSandbox(t.Context(), deleting, nil); err != nil {
		t.Fatal(err)
	}
	// A create was interrupted after its intent was written and the runtime
	// made an object, but before the handle was persisted.
	now := time.Now().UTC()
	half := &sandbox.Sandbox{ID: sandbox.NewID(), Tenant: "t1", Image: &sandbox.Image{URI: "fake:ok"}, Entrypoint: []string{"x"},
		Driver: fakedriver.Name, CreatedAt: now, UpdatedAt: now, ExecdToken: "a", EgressToken: "b",
		Status: sandbox.Status{State: sandbox.StatePending, Reason: sandbox.ReasonProvisioning, LastTransitionAt: now}}
	if _, err := st.InsertSandbox(t.Context(), half, nil, nil); err != nil {
		t.Fatal(err)
	}
	_ = st.Close()
	d, _ := fakedriver.New(fakedriver.Config{Dir: filepath.Join(dir, "fake")})
	if _, err := d.Create(t.Context(), driver.Spec{ID: half.ID, Tenant: "t1", Image: driver.Image{URI: "fake:ok"}}); err != nil {
		t.Fatal(err)
	}
	// An object no record knows about.
	if _, err := d.Create(t.Context(), driver.Spec{ID: "orphan", Tenant: "t1", Image: driver.Image{URI: "fake:ok"}}); err != nil {
		t.Fatal(err)
	}
	// A paused sandbox whose recorded state is behind the runtime's.
	_ = d.Close()

	r2 := newRig(t, dir, nil)
	check := func(id string, state sandbox.State, reason string) {
		t.Helper()
		got, err := r2.m.Get(t.Context(), "t1", id)
		if err != nil {
			t.Fatalf("Get(%s) after restart = %v", id, err)
		}
		if got.Status.State != state || reason != "" && got.Status.Reason != reason {
			t.Errorf("%s after restart = %v/%s, want %v/%s", id, got.Status.State, got.Status.Reason, state, reason)
		}
	}
	check(running.ID, sandbox.StateRunning, "")
	check(paused.ID, sandbox.StatePaused, "")
	check(expired.ID, sandbox.StateTerminated, sandbox.ReasonTTLExpiry)
	check(half.ID, sandbox.StateFailed, sandbox.ReasonInterrupted)
	if _, err := r2.m.Get(t.Context(), "t1", deleting.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("interrupted delete: Get = %v, want ErrNotFound", err)
	}
	ids := backendIDs(t, r2.d)
	if len(ids) != 2 || !ids[running.ID] || !ids[paused.ID] {
		t.Fatalf("after recovery the backend has %v, want only the running and the paused sandbox", ids)
	}
	// The recovered sandbox is watched again.
	if err := os.Remove(filepath.Join(dir, "fake", "objects", running.ID+".json")); err != nil {
		t.Fatal(err)
	}
	waitState(t, r2.m, "t1", running.ID, sandbox.StateFailed)
	if err := r2.m.Resume(t.Context(), "t1", paused.ID); err != nil {
		t.Fatalf("Resume after restart = %v", err)
	}
}

func TestSnapshots(t *testing.T) {
	t.Parallel()
	r := newRig(t, t.TempDir(), nil)
	src := mustCreate(t, r.m, req("t1", "fake:ok"))
	sn, err := r.m.CreateSnapshot(t.Context(), "t1", src.ID, "before")
	if err != nil || sn.State != sandbox.SnapshotCreating {
		t.Fatalf("CreateSnapshot = %+v, %v; want Creating", sn, err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		got, err := r.m.GetSnapshot(t.Context(), "t1", sn.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.State == sandbox.SnapshotReady {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("snapshot state %v, want Ready", got.State)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, err := r.m.GetSnapshot(t.Context(), "t2", sn.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("other tenant GetSnapshot = %v", err)
	}
	restored := mustCreate(t, r.m, CreateRequest{Tenant: "t1", SnapshotID: sn.ID})
	if restored.SnapshotID != sn.ID || restored.Status.State != sandbox.StateRunning {
		t.Fatalf("restored = %+v", restored)
	}
	if _, err := r.m.Create(t.Context(), CreateRequest{Tenant: "t2", SnapshotID: sn.ID}); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Fatalf("restore from another tenant's snapshot = %v, want ErrInvalidArgument", err)
	}
	if err := r.m.DeleteSnapshot(t.Context(), "t1", sn.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := r.m.GetSnapshot(t.Context(), "t1", sn.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("GetSnapshot after delete = %v", err)
	}
	refs, _ := r.d.ListSnapshots(t.Context())
	if len(refs) != 0 {
		t.Fatalf("snapshot delete left %v", refs)
	}
	paused := mustCreate(t, r.m, req("t1", "fake:ok"))
	_ = r.m.Pause(t.Context(), "t1", paused.ID)
	if _, err := r.m.CreateSnapshot(t.Context(), "t1", paused.ID, ""); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Fatalf("snapshot of a paused sandbox = %v, want ErrFailedPrecondition", err)
	}
}

func TestDefaultNetworkPolicyAppliesOnlyWithoutOne(t *testing.T) {
	def := json.RawMessage(`{"defaultAction":"allow"}`)
	r := newRig(t, t.TempDir(), func(c *Config, _ *fakedriver.Config) { c.DefaultNetworkPolicy = def })
	sb, err := r.m.Create(t.Context(), req("t1", "img"))
	if err != nil {
		t.Fatal(err)
	}
	if string(sb.NetworkPolicy) != string(def) {
		t.Errorf("without a policy: %s, want the default", sb.NetworkPolicy)
	}
	own := req("t1", "img")
	own.NetworkPolicy = json.RawMessage(`{"defaultAction":"deny"}`)
	sb, err = r.m.Create(t.Context(), own)
	if err != nil {
		t.Fatal(err)
	}
	if string(sb.NetworkPolicy) != `{"defaultAction":"deny"}` {
		t.Errorf("with a policy: %s", sb.NetworkPolicy)
	}
}

// TestSnapshotOfAnotherRuntimeIsRefused: a server restarted on another
// runtime over the same records refuses to restore the first runtime's
// snapshots, naming both, instead of handing the runtime a reference it
// cannot read.
func TestSnapshotOfAnotherRuntimeIsRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r := newRig(t, dir, nil)
	src := mustCreate(t, r.m, req("t1", "fake:ok"))
	sn, err := r.m.CreateSnapshot(t.Context(), "t1", src.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); ; {
		got, _ := r.m.GetSnapshot(t.Context(), "t1", sn.ID)
		if got != nil && got.State == sandbox.SnapshotReady {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the snapshot never became Ready")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := r.m.Delete(t.Context(), "t1", src.ID); err != nil {
		t.Fatal(err)
	}
	r.stop()
	other := newRig(t, dir, func(c *Config, _ *fakedriver.Config) { c.DriverName = "docker" })
	_, err = other.m.Create(t.Context(), CreateRequest{Tenant: "t1", SnapshotID: sn.ID})
	var pe *errdefs.Error
	if !errors.Is(err, errdefs.ErrInvalidArgument) || !errors.As(err, &pe) || pe.Code != api.CodeSnapshotInvalidSource ||
		!strings.Contains(pe.Message, "fake runtime") || !strings.Contains(pe.Message, "docker runtime") {
		t.Fatalf("restore on another runtime = %v, want ErrInvalidArgument naming both runtimes", err)
	}
}

// TestForkOfAFailingRuntimeIsUnavailable: a capture the runtime fails
// without saying why (here, its snapshot directory is gone) makes the fork
// a 503, never an internal error, and leaves no fork.
func TestForkOfAFailingRuntimeIsUnavailable(t *testing.T) {
	t.Parallel()
	r := newRig(t, t.TempDir(), nil)
	src := mustCreate(t, r.m, req("t1", "fake:ok"))
	snaps := filepath.Join(r.dir, "fake", "snapshots")
	if err := os.RemoveAll(snaps); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(snaps, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := r.m.Fork(t.Context(), ForkRequest{Tenant: "t1", SandboxID: src.ID, Count: 2})
	if !errors.Is(err, errdefs.ErrUnavailable) {
		t.Fatalf("Fork with a failing capture = %v, want ErrUnavailable", err)
	}
	if _, total := r.m.List(t.Context(), "t1", Filter{PageSize: 20}); total != 1 {
		t.Errorf("a failed fork left %d sandboxes, want the source only", total)
	}
}

// TestReaperLooksOnlyAtWhatChanged: on a create or a renew the reaper looks
// at the sandboxes named since it last looked and those whose deadline
// came, not at every sandbox: its work per create does not grow with the
// number of sandboxes (issue 39). Every sandbox is still looked at once
// per rescanEvery, and expiries still come on time.
func TestReaperLooksOnlyAtWhatChanged(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, t.TempDir(), nil)
		const n = 300
		long := req("t1", "fake:ok")
		long.Timeout = time.Hour
		for range n {
			mustCreate(t, r.m, long)
		}
		synctest.Wait()
		looked := func() int {
			r.m.mu.Lock()
			defer r.m.mu.Unlock()
			return r.m.reapLooked
		}
		before := looked()
		short := req("t1", "fake:ok")
		short.Timeout = time.Minute
		sb := mustCreate(t, r.m, short)
		synctest.Wait()
		if _, err := r.m.Renew(t.Context(), "t1", sb.ID, time.Now().Add(2*time.Minute)); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if got := looked() - before; got == 0 || got > 10 {
			t.Errorf("a create and a renew among %d sandboxes made the reaper look %d times, want a few", n, got)
		}
		// The renewed expiry holds: not at one minute, at two.
		time.Sleep(90 * time.Second)
		synctest.Wait()
		if got, _ := r.m.Get(t.Context(), "t1", sb.ID); got.Status.State != sandbox.StateRunning {
			t.Fatalf("a renewed sandbox expired at its old deadline: %v", got.Status.State)
		}
		time.Sleep(40 * time.Second)
		synctest.Wait()
		if got, _ := r.m.Get(t.Context(), "t1", sb.ID); got.Status.State != sandbox.StateTerminated {
			t.Fatalf("a renewed sandbox past its deadline is %v, want Terminated", got.Status.State)
		}
		// Past rescanEvery the reaper has looked at every sandbox again.
		if got := looked() - before; got < n {
			t.Errorf("after %v the reaper looked %d times, want every one of the %d sandboxes", 130*time.Second, got, n)
		}
		r.stop()
	})
}

// TestTallyIsTheTable: the usage admission reads (kept as records come,
// change and go) is what a look at every record gives, per tenant and in
// all, through creates with resources, a failed create, exits, pauses,
// resumes, renews, deletes and a restart.
func TestTallyIsTheTable(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r := newRig(t, dir, nil)
	scan := func(m *Manager, tenant string) (quota.Usage, int64) {
		var u quota.Usage
		var all int64
		m.mu.RLock()
		defer m.mu.RUnlock()
		for _, e := range m.sandboxes {
			sb := e.sb
			if quota.Holds(sb.Status.State) {
				all++
				if sb.Tenant == tenant {
					u.Running++
					u.CPUMillis += sb.Resources.CPUMillis
					u.MemoryBytes += sb.Resources.MemoryBytes
				}
			}
			if sb.Tenant == tenant && quota.Counts(sb.Status.State) {
				u.Sandboxes++
			}
		}
		return u, all
	}
	check := func(m *Manager, step string) {
		t.Helper()
		for _, tenant := range []string{"t1", "t2", "nobody"} {
			gotU, gotAll := m.recordUsage(tenant)
			wantU, wantAll := scan(m, tenant)
			if gotU != wantU || gotAll != wantAll {
				t.Fatalf("after %s, tenant %s: the tally says %+v and %d holding, the records %+v and %d", step, tenant, gotU, gotAll, wantU, wantAll)
			}
		}
	}
	sized := func(tenant string, cpu, mem int64) CreateRequest {
		q := req(tenant, "fake:ok")
		q.Resources, q.Timeout = sandbox.Resources{CPUMillis: cpu, MemoryBytes: mem}, time.Hour
		return q
	}
	a := mustCreate(t, r.m, sized("t1", 500, 256<<20))
	b := mustCreate(t, r.m, sized("t1", 1000, 1<<30))
	c := mustCreate(t, r.m, sized("t2", 250, 128<<20))
	check(r.m, "three creates")
	if _, err := r.m.Create(t.Context(), req("t2", "fake:fail")); err == nil {
		t.Fatal("a create of fake:fail succeeded")
	}
	check(r.m, "a failed create")
	exited := mustCreate(t, r.m, req("t2", "fake:exit=3"))
	waitState(t, r.m, "t2", exited.ID, sandbox.StateFailed)
	check(r.m, "an exit")
	if err := r.m.Pause(t.Context(), "t1", a.ID); err != nil {
		t.Fatal(err)
	}
	check(r.m, "a pause")
	if _, err := r.m.Renew(t.Context(), "t1", b.ID, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	check(r.m, "a renew")
	if err := r.m.Resume(t.Context(), "t1", a.ID); err != nil {
		t.Fatal(err)
	}
	check(r.m, "a resume")
	if err := r.m.Delete(t.Context(), "t1", b.ID); err != nil {
		t.Fatal(err)
	}
	check(r.m, "a delete")
	if u, all := r.m.recordUsage("t1"); u.Running != 1 || u.CPUMillis != 500 || u.MemoryBytes != 256<<20 || all != 2 {
		t.Fatalf("t1 holds %+v with %d holding in all, want a's 500m and 256 MiB, and 2 (a and c)", u, all)
	}
	r.stop()
	r2 := newRig(t, dir, nil)
	waitState(t, r2.m, "t2", c.ID, sandbox.StateRunning)
	check(r2.m, "a restart")
	if err := r2.m.Delete(t.Context(), "t2", c.ID); err != nil {
		t.Fatal(err)
	}
	check(r2.m, "a delete after the restart")
	r2.stop()
}
