// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"encoding/json"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/internal/runcversion"
)

// TestInstalledRuncHasNoKnownEscapes: the runc on PATH, which
// scripts/runtimes.sh builds at the release tools/runc pins, is open to
// no known container escape, so a server on its defaults warns of none:
// /health has no warnings for an admin and nothing at start is a WARNING.
// (TestRuntimeVersionIsChecked checks the warnings themselves.)
func TestInstalledRuncHasNoKnownEscapes(t *testing.T) {
	requireOCI(t)
	t.Parallel()
	runc, err := exec.LookPath("runc")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(runc, "--version").Output()
	if err != nil {
		t.Fatalf("%s --version: %v", runc, err)
	}
	t.Logf("%s --version:\n%s", runc, out)
	if problems := runcversion.Check(string(out)); len(problems) > 0 {
		t.Errorf("%s is open to known escapes (scripts/runtimes.sh installs the runc tools/runc pins): %q", runc, problems)
	}

	s := startServer(t, filepath.Join(t.TempDir(), "data"))
	req, _ := http.NewRequestWithContext(ctx(t), "GET", s.url+"/health", nil)
	req.Header.Set(api.HeaderAPIKey, testKey)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var h api.Health
	if err := json.NewDecoder(res.Body).Decode(&h); err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("/health = %d, %v", res.StatusCode, err)
	}
	if len(h.Warnings) > 0 {
		t.Errorf("/health warnings = %q, want none", h.Warnings)
	}
	if stderr := s.stderr.String(); strings.Contains(stderr, "WARNING") || strings.Contains(stderr, "known container escapes") {
		t.Errorf("the server warned at start:\n%s", stderr)
	}
}
