// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestE2BJavaScriptSDK runs E2B's SDKs from npm (e2b and
// @e2b/code-interpreter), unchanged, against corral's E2B API on the
// native runtime: create with metadata and env, info, list by metadata,
// commands (streamed, failing, in the background, killed), files (text,
// 1 MiB of binary, list, stat, make, rename, remove), a watched
// directory, set timeout, pause and connect, kill twice, a bad key, and
// the code interpreter (state, stdout, an error, a PNG, a context of its
// own).
func TestE2BJavaScriptSDK(t *testing.T) {
	requireOCI(t)
	t.Parallel()
	img := codeImage(t)
	dir := t.TempDir()
	if out, err := runCorral(t, "image", "import", img, "--data-dir", dir); err != nil {
		t.Fatalf("image import: %v %s", err, out)
	}
	s := startServer(t, dir, "--runtime", "oci", "--e2b-listen", "127.0.0.1:0")
	findings := e2bScenario(t, s, "full", "base")
	for _, k := range []string{"info", "command", "files", "background", "watch", "timeout", "resume", "kill", "badKey", "code"} {
		if findings[k] == nil {
			t.Fatalf("the scenario did not report %s: %v", k, findings)
		}
	}
}

// TestE2BJavaScriptSDKDocker runs the scenario's create, commands and
// files, unchanged, against corral's E2B API on the docker runtime.
func TestE2BJavaScriptSDKDocker(t *testing.T) {
	cli := requireDocker(t)
	t.Parallel()
	ref := registryImage(t, cli)
	s := startServer(t, t.TempDir(), "--runtime", "docker", "--e2b-listen", "127.0.0.1:0", "--e2b-templates", "base="+ref)
	findings := e2bScenario(t, s, "basic", "base")
	if findings["files"] != "ok" || findings["command"] != "ok" {
		t.Fatalf("findings = %v", findings)
	}
}

// e2bScenario runs e2bjs/scenario.mjs against s's E2B API and returns its
// findings.
func e2bScenario(t *testing.T, s *server, mode, template string) map[string]any {
	t.Helper()
	if s.e2bURL == "" {
		t.Fatal("the server does not serve E2B's API (--e2b-listen)")
	}
	dir := nodeDir(t, "e2bjs")
	start := time.Now()
	node := exec.CommandContext(ctx(t), "node", "scenario.mjs")
	node.Dir = dir
	node.Env = append(os.Environ(), "E2B_API_URL="+s.e2bURL, "E2B_SANDBOX_URL="+s.e2bURL, "E2B_API_KEY="+testKey,
		"MODE="+mode, "E2B_TEMPLATE="+template)
	out, err := node.CombinedOutput()
	if err != nil {
		t.Fatalf("the E2B scenario failed: %v\n%s", err, out)
	}
	var findings map[string]any
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &findings); err != nil {
		t.Fatalf("findings = %s (%v)", out, err)
	}
	t.Logf("E2B SDK scenario (%s) passed in %v: %s", mode, time.Since(start).Round(time.Millisecond), lines[len(lines)-1])
	return findings
}
