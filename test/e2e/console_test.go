// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"encoding/json"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corral-dev/corral/internal/testutil/netlab"
)

// consoleShots is where the browser tests leave their screenshots (CI
// keeps them): $CORRAL_TEST_ARTIFACTS/console, else test/e2e/artifacts.
func consoleShots(t *testing.T) string {
	dir := os.Getenv("CORRAL_TEST_ARTIFACTS")
	if dir == "" {
		dir = "artifacts"
	}
	dir, err := filepath.Abs(filepath.Join(dir, "console"))
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestConsoleInABrowser drives Debian's chromium (playwright-core, no
// browser download) against a real server on the native runtime, policed
// egress included, through the steps in consoleSteps: every page a user
// needs, hostile strings from the sandbox (file names, command output
// with HTML and ANSI, event details) shown as text with no script run,
// the CSP refusing nothing, no layout shift while live data flows. The
// screenshots it takes are checked to be pictures, not blank pages.
func TestConsoleInABrowser(t *testing.T) {
	requireOCI(t)
	t.Parallel()
	if _, err := exec.LookPath("chromium"); err != nil {
		t.Fatal("chromium is needed for the console's browser tests: apt-get install chromium")
	}
	dir := nodeDir(t, "consolejs")
	// A world for the egress audit: allowed.test and denied.test.
	w := egressWorld(t)
	s := startServer(t, t.TempDir(), "--runtime", "oci",
		"--egress-uplink-netns", netlab.NetnsPath(w.Uplink), "--egress-subnet", "10.223.0.0/24", "--egress-upstream", netlab.WorldDNS+":53")
	shots := consoleShots(t)
	node := exec.CommandContext(ctx(t), "node", "scenario.mjs")
	node.Dir = dir
	node.Env = append(os.Environ(), "CORRAL_URL="+s.url, "CORRAL_KEY="+testKey, "SHOTS="+shots)
	out, err := node.CombinedOutput()
	if err != nil {
		t.Fatalf("the browser scenario failed: %v\n%s", err, out)
	}
	var seen struct {
		Steps     []string `json:"steps"`
		BadKey    string   `json:"badKey"`
		AfterKill int      `json:"afterKill"`
		CSP       []string `json:"csp"`
		Pwned     any      `json:"pwned"`
		CLS       float64  `json:"cls"`
	}
	line := strings.TrimSpace(string(out))
	if i := strings.LastIndexByte(line, '\n'); i >= 0 {
		line = line[i+1:]
	}
	if err := json.Unmarshal([]byte(line), &seen); err != nil || len(seen.Steps) != len(consoleSteps) || seen.AfterKill != 404 || len(seen.CSP) != 0 || seen.Pwned != nil || seen.CLS >= 0.1 {
		t.Fatalf("the scenario saw %+v (%v)\n%s", seen, err, out)
	}
	t.Logf("the browser saw: %s", line)
	for i, step := range consoleSteps {
		if seen.Steps[i] != step {
			t.Errorf("step %d was %q, want %q", i, seen.Steps[i], step)
		}
	}
	for _, name := range []string{"signin-error.png", "sandboxes.png", "sandbox.png", "terminal.png", "files.png", "commands.png",
		"egress.png", "snapshots.png", "admin.png", "sandboxes-narrow.png", "sandbox-narrow.png"} {
		checkScreenshot(t, filepath.Join(shots, name))
	}
}

// consoleSteps are the browser scenario's steps, in order
// (consolejs/scenario.mjs).
var consoleSteps = []string{
	"a bad key shows the API's error",
	"sign in",
	"hostile metadata is refused by the API",
	"a sandbox created through the API appears without a reload",
	"open it: its CPU and memory are charted",
	"type echo in the terminal and see its output",
	"a terminal taken over is taken back, with what it printed meanwhile",
	"upload a file with the page, download it, bytes equal",
	"hostile file names are text",
	"commands: run one from the page, hostile output is text in colour, history is live",
	"hostile event details are text",
	"the egress audit shows allowed and denied names and connections",
	"tabs move with the arrow keys",
	"snapshot and fork from the page",
	"quota, webhooks and an admin's keys",
	"a narrow window has no sideways scroll",
	"pause and resume from the page",
	"kill from the page, confirmed in a dialog",
	"nothing refused by the CSP, no page errors, no script ran, no layout shift",
}

// checkScreenshot fails unless the file is a PNG of a page with content:
// a fair number of distinct colours (a blank or error page has a few).
func checkScreenshot(t *testing.T, name string) {
	t.Helper()
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	b := img.Bounds()
	colours := map[[4]uint32]bool{}
	for y := b.Min.Y; y < b.Max.Y; y += 3 {
		for x := b.Min.X; x < b.Max.X; x += 3 {
			r, g, bl, a := img.At(x, y).RGBA()
			colours[[4]uint32{r >> 8, g >> 8, bl >> 8, a >> 8}] = true
		}
	}
	if b.Dx() < 400 || len(colours) < 20 {
		t.Fatalf("%s: %dx%d with %d colours: blank?", name, b.Dx(), b.Dy(), len(colours))
	}
}
