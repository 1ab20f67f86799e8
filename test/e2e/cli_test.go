// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corral-dev/corral/internal/testutil"
	"github.com/corral-dev/corral/internal/testutil/corraltest"
)

// runCorral runs the binary with args and returns its combined output.
func runCorral(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.CommandContext(ctx(t), binary, args...)
	cmd.Env = append(os.Environ(), "OPEN_SANDBOX_API_KEY=", "CORRAL_SERVER=")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func TestFirstStartPrintsAdminKeyOnce(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cmd := exec.Command(binary, "serve", "--listen", "127.0.0.1:0", "--data-dir", dir, "--runtime", "fake", "--log-format", "json")
	var errb testutil.LockedBuffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	var key string
	deadline := ctx(t)
	for key == "" {
		for _, line := range strings.Split(errb.String(), "\n") {
			if f := strings.Fields(line); len(f) == 1 && strings.HasPrefix(f[0], "ck_") {
				key = f[0]
			}
		}
		select {
		case <-deadline.Done():
			t.Fatalf("no key printed:\n%s", errb.String())
		default:
		}
	}
	db, err := os.ReadFile(filepath.Join(dir, "corral.db"))
	if err == nil && strings.Contains(string(db), key) {
		t.Fatalf("the key is stored in clear in the database")
	}
}

func TestKeysCommand(t *testing.T) {
	t.Parallel()
	s := startServer(t, t.TempDir(), "--runtime", "fake")
	out, err := runCorral(t, "keys", "create", "--server", s.url, "--api-key", testKey, "--tenant", "team-a", "--name", "ci")
	if err != nil {
		t.Fatalf("keys create: %v\n%s", err, out)
	}
	newKey := strings.Fields(out)[0]
	if !strings.HasPrefix(newKey, "ck_") {
		t.Fatalf("keys create printed %q", out)
	}
	out, err = runCorral(t, "keys", "ls", "--server", s.url, "--api-key", testKey, "-o", "json")
	if err != nil {
		t.Fatalf("keys ls: %v\n%s", err, out)
	}
	var keys []struct {
		ID, Tenant string
	}
	if err := json.Unmarshal([]byte(out), &keys); err != nil || len(keys) != 2 {
		t.Fatalf("keys ls -o json = %s (%v)", out, err)
	}
	var id string
	for _, k := range keys {
		if k.Tenant == "team-a" {
			id = k.ID
		}
	}
	if out, err := runCorral(t, "keys", "revoke", "--server", s.url, "--api-key", testKey, id); err != nil {
		t.Fatalf("keys revoke: %v\n%s", err, out)
	}
	out, err = runCorral(t, "keys", "ls", "--server", s.url, "--api-key", newKey)
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(out, "invalid") {
		t.Fatalf("revoked key: err %v, output %q", err, out)
	}
	out, err = runCorral(t, "keys", "ls", "--server", s.url, "--api-key", "ck_nope", "-o", "json")
	var e map[string]any
	if err == nil || json.Unmarshal([]byte(out), &e) != nil || e["code"] != "INVALID_API_KEY" {
		t.Fatalf("-o json error = %q", out)
	}
}

func TestConfigFileAndEnvironment(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "corral.toml")
	if out, err := runCorral(t, "config", "init", cfgPath); err != nil {
		t.Fatalf("config init: %v %s", err, out)
	}
	if out, err := runCorral(t, "config", "init", cfgPath); err == nil {
		t.Fatalf("config init overwrote a file: %s", out)
	}
	bad := filepath.Join(dir, "bad.toml")
	_ = os.WriteFile(bad, []byte("listn = \"x\"\n"), 0o600)
	out, err := runCorral(t, "serve", "--config", bad, "--data-dir", dir)
	if err == nil || !strings.Contains(out, "unknown keys listn") {
		t.Fatalf("unknown config key: %v %s", err, out)
	}
	// The example configuration itself is accepted (it fails later, on the
	// runtime, not on parsing).
	out, _ = runCorral(t, "serve", "--config", cfgPath, "--data-dir", filepath.Join(dir, "d"), "--runtime", "nope")
	if !strings.Contains(out, `unknown runtime "nope"`) {
		t.Fatalf("example config: %s", out)
	}
}

// TestServeRejectsTiersItCannotRun: an isolation tier the runtime cannot
// run here stops the server at start, saying why.
func TestServeRejectsTiersItCannotRun(t *testing.T) {
	requireOCI(t)
	t.Parallel()
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--isolation", "runc,kata"}, `unknown tier "kata"`},
		{[]string{"--isolation", "runsc,runsc"}, "named twice"},
		{[]string{"--isolation", "runsc", "--oci-runsc", "/nonexistent/runsc"}, "cannot run runsc sandboxes here: gVisor's runsc is not installed"},
	} {
		dir := t.TempDir()
		args := append([]string{"serve", "--runtime", "oci", "--listen", "127.0.0.1:0", "--data-dir", dir, "--api-key", testKey}, tc.args...)
		out, err := exec.Command(binary, args...).CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() == 0 || !strings.Contains(string(out), tc.msg) {
			t.Errorf("corral %s: %v, output %q; want a failure saying %s", strings.Join(tc.args, " "), err, out, tc.msg)
		}
		_ = corraltest.Unmount(dir)
	}
}

// TestServeRejectsBadEgressFlags: a mistaken egress setting stops the
// server at start with one sentence naming the flag.
func TestServeRejectsBadEgressFlags(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--egress-subnet", "10.0.0.0/30"}, "--egress-subnet"},
		{[]string{"--egress-subnet", "fd00::/64"}, "--egress-subnet"},
		{[]string{"--egress-upstream", "dns.example"}, "--egress-upstream"},
		{[]string{"--egress-deny", "10.0.0.0/40"}, "--egress-deny"},
		{[]string{"--egress-allow-private", "169.254.0.0/16"}, "--egress-allow-private"},
		{[]string{"--egress-allow-private", "8.8.8.0/24"}, "--egress-allow-private"},
		{[]string{"--egress-allow-private", "10.0.0.0/7"}, "--egress-allow-private"},
		{[]string{"--egress-allow-private", "100.100.100.0/24"}, "--egress-allow-private"},
		{[]string{"--egress-allow-private", "ten"}, "--egress-allow-private"},
		{[]string{"--cors-origins", "*"}, "--cors-origins"},
		{[]string{"--cors-origins", "https://console.example/path"}, "--cors-origins"},
		{[]string{"--cors-origins", "ftp://console.example"}, "--cors-origins"},
		{[]string{"--egress-uplink-netns", "/nonexistent/ns"}, "--egress-uplink-netns"},
		{[]string{"--egress-upstream-ca", "/nonexistent/ca.pem"}, "--egress-upstream-ca"},
		{[]string{"--network-default-policy", `{"defaultAction":"maybe"}`}, "--network-default-policy"},
		{[]string{"--server-id", "Has Spaces"}, "--server-id"},
		{[]string{"--server-id", "-dash-first"}, "--server-id"},
		{[]string{"--server-id", strings.Repeat("a", 64)}, "--server-id"},
		{[]string{"--runtime", "kubernetes"}, "-tags kube"},
		{[]string{"--oci-runtime", "/usr/bin/runsc"}, "--isolation runsc"},
	} {
		args := append([]string{"serve", "--runtime", "oci", "--listen", "127.0.0.1:0", "--data-dir", t.TempDir(),
			"--api-key", testKey}, tc.args...)
		out, err := exec.Command(binary, args...).CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() == 0 || !strings.Contains(string(out), tc.msg) {
			t.Errorf("corral %s: %v, output %q; want a failure naming %s", strings.Join(tc.args, " "), err, out, tc.msg)
		}
	}
}
