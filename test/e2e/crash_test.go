// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/internal/store"
	"github.com/corral-dev/corral/internal/testutil"
	"github.com/corral-dev/corral/sdk"
)

func fakeCreate(timeout *int64) api.CreateSandboxRequest {
	return api.CreateSandboxRequest{Image: &api.ImageSpec{URI: "fake:ok"}, Timeout: timeout,
		ResourceLimits: map[string]string{"cpu": "1", "memory": "1Gi"}}
}

// fakeObjects lists the sandboxes the fake runtime holds in dir.
func fakeObjects(t *testing.T, dir string) map[string]bool {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(dir, "fake", "objects"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, e := range entries {
		if id, ok := strings.CutSuffix(e.Name(), ".json"); ok {
			out[id] = true
		}
	}
	return out
}

// TestKillNineDuringCreates kills the server with SIGKILL while 50 creates
// are in flight, with a sandbox whose TTL then passes while it is down.
// After a restart every sandbox is Running or reported Failed and gone from
// the runtime; nothing a client was told exists is lost; nothing leaks.
func TestKillNineDuringCreates(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s1 := startServer(t, dir, "--runtime", "fake", "--fake-create-delay", "300ms")
	c1 := s1.client(t)
	minute := int64(60)
	ttl, err := c1.CreateSandbox(ctx(t), fakeCreate(&minute), sdk.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	acked := map[string]bool{}
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			// One attempt only: the kill must not be papered over by retries.
			c, _ := sdk.New(sdk.WithBaseURL(s1.url), sdk.WithAPIKey(testKey), sdk.WithRetry(sdk.RetryPolicy{Attempts: 1}))
			out, err := c.CreateSandbox(ctx(t), fakeCreate(nil), sdk.CreateOptions{})
			if err == nil {
				mu.Lock()
				acked[out.ID] = true
				mu.Unlock()
			}
		})
	}
	// Kill once some creates have finished and others are still running.
	testutil.WaitFor(t, 30*time.Second, "creates to be in flight", func() bool {
		l, err := c1.ListSandboxes(ctx(t), sdk.ListOptions{States: []string{"Pending"}, PageSize: 200})
		mu.Lock()
		n := len(acked)
		mu.Unlock()
		return err == nil && l.Pagination.TotalItems >= 5 && n >= 1
	})
	s1.kill9(t)
	wg.Wait()

	// The TTL passes while the server is down.
	st, err := store.Open(ctx(t), filepath.Join(dir, "corral.db"))
	if err != nil {
		t.Fatal(err)
	}
	all, err := st.LoadSandboxes(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	pendingAtCrash := 0
	for _, sb := range all {
		if sb.ID == ttl.ID {
			sb.ExpiresAt = time.Now().Add(-time.Second)
			if err := st.UpdateSandbox(ctx(t), sb, nil); err != nil {
				t.Fatal(err)
			}
		}
		if sb.Status.State.String() == api.StatePending {
			pendingAtCrash++
		}
	}
	_ = st.Close()
	if pendingAtCrash == 0 {
		t.Fatalf("no create was in flight at the kill; the test proves nothing")
	}

	s2 := startServer(t, dir, "--runtime", "fake")
	c2 := s2.client(t)
	list, err := c2.ListSandboxes(ctx(t), sdk.ListOptions{PageSize: 200})
	if err != nil {
		t.Fatal(err)
	}
	objects := fakeObjects(t, dir)
	running := map[string]bool{}
	for _, sb := range list.Items {
		switch {
		case sb.ID == ttl.ID:
			if sb.Status.State != api.StateTerminated || sb.Status.Reason != "ttl_expiry" {
				t.Errorf("the sandbox that expired while the server was down is %s/%s", sb.Status.State, sb.Status.Reason)
			}
		case sb.Status.State == api.StateRunning:
			running[sb.ID] = true
		case sb.Status.State == api.StateFailed && sb.Status.Reason == "interrupted_by_restart":
			if objects[sb.ID] {
				t.Errorf("interrupted sandbox %s still exists in the runtime", sb.ID)
			}
		default:
			t.Errorf("sandbox %s is %s/%s after recovery", sb.ID, sb.Status.State, sb.Status.Reason)
		}
	}
	for id := range acked {
		if !running[id] {
			t.Errorf("sandbox %s was acknowledged to a client but is not Running after the crash", id)
		}
	}
	for id := range objects {
		if !running[id] {
			t.Errorf("leak: the runtime still holds %s, which is not a Running sandbox", id)
		}
	}
	if len(objects) != len(running) {
		t.Errorf("runtime holds %d sandboxes, %d are Running", len(objects), len(running))
	}
	t.Logf("acked before the kill: %d; in flight at the kill: %d; Running after: %d", len(acked), pendingAtCrash, len(running))
}

// TestGracefulRestartKeepsSandboxes: SIGTERM stops the server, not the
// sandboxes, and the next start finds them.
func TestGracefulRestartKeepsSandboxes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s1 := startServer(t, dir, "--runtime", "fake")
	c1 := s1.client(t)
	sb, err := c1.CreateSandbox(ctx(t), fakeCreate(nil), sdk.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c1.PauseSandbox(ctx(t), sb.ID); err != nil {
		t.Fatal(err)
	}
	s1.stop(t)
	if !fakeObjects(t, dir)[sb.ID] {
		t.Fatalf("shutdown destroyed the sandbox")
	}
	s2 := startServer(t, dir, "--runtime", "fake")
	got, err := s2.client(t).GetSandbox(ctx(t), sb.ID)
	if err != nil || got.Status.State != api.StatePaused {
		t.Fatalf("after restart = %+v, %v; want Paused", got, err)
	}
}

// TestSecondServerOnSameDataDirIsRefused guards the single-writer rule.
func TestSecondServerOnSameDataDirIsRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	startServer(t, dir, "--runtime", "fake")
	out, err := runCorral(t, "serve", "--listen", "127.0.0.1:0", "--data-dir", dir, "--runtime", "fake", "--api-key", testKey)
	if err == nil || !strings.Contains(out, "in use by another corral serve") {
		t.Fatalf("second server: err %v, output %s", err, out)
	}
}
