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

// TestOpenSandboxJavaScriptSDK runs a scenario written against the
// OpenSandbox JavaScript SDK from npm, unchanged, against corral on the
// native runtime: create, command output and exit code, files, list, kill.
func TestOpenSandboxJavaScriptSDK(t *testing.T) {
	requireOCI(t)
	t.Parallel()
	jsScenario(t, startServer(t, t.TempDir(), "--runtime", "oci"), "host")
}

// TestOpenSandboxJavaScriptSDKDocker runs the same scenario, unchanged,
// against the docker runtime.
func TestOpenSandboxJavaScriptSDKDocker(t *testing.T) {
	cli := requireDocker(t)
	t.Parallel()
	ref := registryImage(t, cli)
	jsScenario(t, startServer(t, t.TempDir(), "--runtime", "docker"), ref)
}

// TestOpenSandboxJavaScriptSDKVolumesAndSnapshots runs the SDK's volumes
// (host, read-only, named) and snapshots (create, poll, list, restore,
// delete), unchanged, against corral on the native runtime.
func TestOpenSandboxJavaScriptSDKVolumesAndSnapshots(t *testing.T) {
	requireOCI(t)
	t.Parallel()
	allowed := t.TempDir()
	s := startServer(t, t.TempDir(), "--runtime", "oci", "--allowed-host-paths", allowed)
	out := runJS(t, s, "volumes.mjs", "host", "CORRAL_HOST_DIR="+allowed)
	var findings map[string]any
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &findings); err != nil || findings["restored"] != "kept" {
		t.Fatalf("findings = %s (%v)", out, err)
	}
	t.Logf("JavaScript SDK volumes and snapshots: %s", lines[len(lines)-1])
}

// jsScenario runs jssdk/scenario.mjs with the OpenSandbox JavaScript SDK
// from npm against server s, creating sandboxes of image.
func jsScenario(t *testing.T, s *server, image string) {
	t.Helper()
	start := time.Now()
	out := runJS(t, s, "scenario.mjs", image)
	var findings map[string]any
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &findings); err != nil || findings["afterKill"] != "SANDBOX::NOT_FOUND" {
		t.Fatalf("findings = %s (%v)", out, err)
	}
	t.Logf("JavaScript SDK scenario passed in %v: %s", time.Since(start).Round(time.Millisecond), lines[len(lines)-1])
}

// runJS runs a script of jssdk/ against server s with sandboxes of image
// and returns what it printed.
func runJS(t *testing.T, s *server, script, image string, env ...string) []byte {
	t.Helper()
	dir := nodeDir(t, "jssdk")
	node := exec.CommandContext(ctx(t), "node", script)
	node.Dir = dir
	node.Env = append(os.Environ(), "CORRAL_DOMAIN="+strings.TrimPrefix(s.url, "http://"), "CORRAL_API_KEY="+testKey, "CORRAL_IMAGE="+image)
	node.Env = append(node.Env, env...)
	out, err := node.CombinedOutput()
	if err != nil {
		t.Fatalf("the JavaScript scenario %s failed: %v\n%s", script, err, out)
	}
	return out
}
