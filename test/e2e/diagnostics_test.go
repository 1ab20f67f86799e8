// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/internal/testutil"
	"github.com/corral-dev/corral/sdk"
)

// wantDiagnostics creates a sandbox of image whose entrypoint prints a
// line, and checks that the diagnostics routes of the real server show
// it (the runtime's console) and the sandbox's lifecycle events.
func wantDiagnostics(t *testing.T, s *server, c *sdk.Client, image string) {
	t.Helper()
	sb, err := c.CreateSandbox(ctx(t), ociCreate(image, "sh", "-c", "echo diagnostics-marker-$((6*7)); exec sleep 3600"), sdk.CreateOptions{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	defer func() { _ = c.DeleteSandbox(ctx(t), sb.ID) }()
	base := "/v1/sandboxes/" + sb.ID + "/diagnostics/"
	var d api.DiagnosticContent
	testutil.WaitFor(t, 30*time.Second, "the console to show the entrypoint's line", func() bool {
		code, body := apiCall(t, s, testKey, "GET", base+"logs?scope=container", "")
		return code == 200 && json.Unmarshal([]byte(body), &d) == nil && strings.Contains(d.Content, "diagnostics-marker-42")
	})
	if code, body := apiCall(t, s, testKey, "GET", base+"logs?tail=5", ""); code != 200 || !strings.Contains(body, "diagnostics-marker-42") {
		t.Errorf("legacy logs = %d %q", code, body)
	}
	code, body := apiCall(t, s, testKey, "GET", base+"events?scope=lifecycle", "")
	if err := json.Unmarshal([]byte(body), &d); code != 200 || err != nil || !strings.Contains(d.Content, " started ") {
		t.Errorf("lifecycle events = %d %s", code, body)
	}
}

// wantExecdEnvs checks OpenSandbox's EXECD_ENVS contract on a real
// sandbox of image: the entrypoint is handed a file it may write, and the
// KEY=VALUE lines it writes there reach the commands that run later.
func wantExecdEnvs(t *testing.T, c *sdk.Client, image string) {
	t.Helper()
	sb, err := c.CreateSandbox(ctx(t), ociCreate(image, "sh", "-c", `echo "LANG_CHOICE=from-the-entrypoint" >> "$EXECD_ENVS"; exec sleep 3600`), sdk.CreateOptions{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	defer func() { _ = c.DeleteSandbox(ctx(t), sb.ID) }()
	x, err := c.Sandbox(ctx(t), sb.ID, sdk.SandboxOptions{})
	if err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 30*time.Second, "a command to see what the entrypoint wrote to EXECD_ENVS", func() bool {
		out, _, code, err := x.Run(ctx(t), `echo "$LANG_CHOICE"`, sdk.CommandOptions{})
		return err == nil && code == 0 && strings.TrimSpace(out) == "from-the-entrypoint"
	})
}
