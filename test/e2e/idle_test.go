// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/internal/testutil"
	"github.com/corral-dev/corral/sdk"
)

// TestIdlePauseAndAutoResume, on the native runtime: a sandbox left
// alone for its idle timeout is paused (a running command keeps it
// active); a command sent through the server's proxy resumes it, and its
// entrypoint goes on counting where it stopped; its expiry moved by the
// time it was paused.
func TestIdlePauseAndAutoResume(t *testing.T) {
	requireOCI(t)
	t.Parallel()
	s := startServer(t, t.TempDir(), "--idle-check", "500ms")
	c := s.client(t)
	ttl := int64(3600)
	sb, err := c.CreateSandbox(ctx(t), api.CreateSandboxRequest{Image: &api.ImageSpec{URI: "host"}, Timeout: &ttl,
		Entrypoint: []string{"sh", "-c", "i=0; while :; do i=$((i+1)); echo $i > /tmp/count; sleep 0.1; done"},
		Extensions: map[string]string{"corral.dev/idle-timeout": "10"}}, sdk.CreateOptions{Wait: true})
	if err != nil {
		t.Fatal(err)
	}
	proxied, err := c.Sandbox(ctx(t), sb.ID, sdk.SandboxOptions{UseServerProxy: true})
	if err != nil {
		t.Fatal(err)
	}
	// A command running for 12 s keeps it active past the timeout.
	start := time.Now()
	if _, _, code, err := proxied.Run(ctx(t), "sleep 12", sdk.CommandOptions{}); err != nil || code != 0 {
		t.Fatalf("sleep: %d %v", code, err)
	}
	if got, _ := c.GetSandbox(ctx(t), sb.ID); got.Status.State != api.StateRunning {
		t.Fatalf("paused while a command ran (%v after the start): %s", time.Since(start), got.Status.State)
	}
	testutil.WaitFor(t, 30*time.Second, "the idle sandbox paused", func() bool {
		got, err := c.GetSandbox(ctx(t), sb.ID)
		return err == nil && got.Status.State == api.StatePaused
	})
	paused, _ := c.GetSandbox(ctx(t), sb.ID)
	time.Sleep(2 * time.Second)
	out, _, code, err := proxied.Run(ctx(t), "cat /tmp/count", sdk.CommandOptions{})
	if err != nil || code != 0 {
		t.Fatalf("a command through the proxy to the paused sandbox: %d %v", code, err)
	}
	first, _ := strconv.Atoi(strings.TrimSpace(out))
	time.Sleep(time.Second)
	out, _, _, _ = proxied.Run(ctx(t), "cat /tmp/count", sdk.CommandOptions{})
	second, _ := strconv.Atoi(strings.TrimSpace(out))
	// About 22 s at 10 a second before the pause; a restarted loop would
	// be near 0.
	if first < 100 || second <= first {
		t.Errorf("the count read %d then %d: the entrypoint did not go on where it stopped", first, second)
	}
	resumed, err := c.GetSandbox(ctx(t), sb.ID)
	if err != nil || resumed.Status.State != api.StateRunning {
		t.Fatalf("after the proxied command: %+v %v", resumed, err)
	}
	if moved := resumed.ExpiresAt.Sub(*paused.ExpiresAt); moved < 2*time.Second {
		t.Errorf("the expiry moved by %v over a pause of over 2s", moved)
	}
	evs, err := c.Events(ctx(t), sdk.EventStreamOptions{SandboxID: sb.ID, NoFollow: true,
		Types: []string{api.EventSandboxIdle, api.EventSandboxPaused, api.EventSandboxResumed}})
	if err != nil {
		t.Fatal(err)
	}
	defer evs.Close()
	if got := eventTypes(readEvents(t, evs, 3)); strings.Join(got, ",") != "sandbox.idle,sandbox.paused,sandbox.resumed" {
		t.Errorf("events = %v", got)
	}
}
