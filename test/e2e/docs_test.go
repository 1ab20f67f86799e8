// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/corral-dev/corral/internal/testutil"
	"github.com/corral-dev/corral/internal/testutil/corraltest"
)

// Documentation is tested as written: every ```sh block of README.md and
// docs/cli.md runs, in order, as one bash script per file, and every
// ```go block of docs/sdk.md is a program that must build and run. Blocks
// fenced otherwise (```console, ```bash) are shown, not run: in README.md
// and docs/cli.md such a block that shows a command needs the line
// "<!-- not run: REASON -->" just above it, and every corral command those
// pages name must run in a ```sh block or have a reason here
// (TestEveryExampleRunsOrSaysWhy).

// codeBlocks returns the bodies of the blocks fenced with ```lang.
func codeBlocks(t *testing.T, path, lang string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile("(?ms)^```" + lang + "\n(.*?)^```$")
	var out []string
	for _, m := range re.FindAllStringSubmatch(string(b), -1) {
		out = append(out, m[1])
	}
	if len(out) == 0 {
		t.Fatalf("%s has no ```%s blocks", path, lang)
	}
	return out
}

// startViaScript starts the server the way the README says, with
// scripts/start.sh, on a free port and a private data directory.
func startViaScript(t *testing.T, root string, args ...string) string {
	t.Helper()
	data := t.TempDir()
	cmd := exec.Command(filepath.Join(root, "scripts/start.sh"), append([]string{"--listen", "127.0.0.1:0", "--log-format", "json"}, args...)...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CORRAL_DATA_DIR="+data)
	pr, pw := io.Pipe()
	var log testutil.LockedBuffer
	cmd.Stderr = io.MultiWriter(pw, &log)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait(); pw.Close() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
		_ = corraltest.Unmount(data)
		if t.Failed() {
			t.Logf("server log:\n%s", log.String())
		}
	})
	url := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			var line struct{ Msg, Listen string }
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "serving" {
				url <- line.Listen
			}
		}
	}()
	select {
	case u := <-url:
		return u
	case err := <-done:
		t.Fatalf("scripts/start.sh exited: %v\n%s", err, log.String())
	case <-time.After(5 * time.Minute):
		t.Fatalf("scripts/start.sh did not start serving:\n%s", log.String())
	}
	return ""
}

// runScript runs blocks as one bash script that stops at the first
// failure, and fails the test with its output if it does.
func runScript(t *testing.T, dir string, env []string, blocks []string) string {
	t.Helper()
	script := "set -euo pipefail\n" + strings.Join(blocks, "\n")
	cmd := exec.CommandContext(ctx(t), "bash", "-c", script)
	cmd.Dir = dir
	cmd.Env = env
	cmd.Stdin = nil
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the examples failed: %v\n--- script ---\n%s\n--- output ---\n%s", err, script, out)
	}
	return string(out)
}

// TestDocumentedExamples runs the README tour against a server started by
// scripts/start.sh, then docs/cli.md and docs/sdk.md against it.
func TestDocumentedExamples(t *testing.T) {
	requireOCI(t)
	root := testutil.ModuleRoot(t)
	const tourKey = "ck_tour-key-0123456789"
	// cli.md's webhook receiver is on loopback, which a server allows
	// only when told.
	url := startViaScript(t, root, "--api-key", tourKey, "--webhook-allow-cidr", "127.0.0.0/8")
	// The server the README's first command starts listens on :8080; this
	// one is on a free port, which the variable tells the CLI.
	env := append(os.Environ(), "CORRAL_SERVER="+url, "CORRAL_CONFIG="+filepath.Join(t.TempDir(), "config.toml"),
		"OPEN_SANDBOX_DOMAIN=", "OPEN_SANDBOX_API_KEY=")

	t.Run("README", func(t *testing.T) {
		out := runScript(t, root, env, codeBlocks(t, filepath.Join(root, "README.md"), "sh"))
		for _, want := range []string{"Linux", "exit code: 3", "/work/README.md"} {
			if !strings.Contains(out, want) {
				t.Errorf("the tour's output lacks %q:\n%s", want, out)
			}
		}
	})

	keyed := append(env, "CORRAL_API_KEY="+tourKey, "PATH="+filepath.Join(root, "bin")+":"+os.Getenv("PATH"))
	t.Run("cli.md", func(t *testing.T) {
		t.Cleanup(func() { os.RemoveAll("/tmp/corral-docs") })
		out := runScript(t, t.TempDir(), keyed, codeBlocks(t, filepath.Join(root, "docs/cli.md"), "sh"))
		for _, want := range []string{
			"https://corral.example.com", // config ls
			"exit code 3", "hello from /tmp", "step 3", "from stdin",
			"Paused",                // get, between pause and resume
			"MOUNTED BY", "notes\n", // volume ls, volume rm
			`"code":"SANDBOX::NOT_FOUND"`, "sandbox no-such-sandbox not found (request id", "exit code 125",
			"complete -F _corral corral",
			"revoked key_",
			"sandbox.paused", "sandbox.deleted", // events -l, events -f
			"quota running is 2 and it uses 2", "createsPerMinute", // quota
			"mode batch", "does not let a create set image", // template
			"delivered: the receiver answered 204", `"type":"webhook.ping"`, `"type":"sandbox.created"`, // webhook listen
		} {
			if !strings.Contains(out, want) {
				t.Errorf("cli.md's output lacks %q:\n%s", want, out)
			}
		}
		// The sandbox made from the snapshot and the two forks each read the
		// file written before.
		if n := strings.Count(out, "written before"); n != 3 {
			t.Errorf("cli.md's output has %q %d times, want 3 (a restore and two forks):\n%s", "written before", n, out)
		}
	})

	t.Run("sdk.md", func(t *testing.T) {
		goEnv := append(env, "OPEN_SANDBOX_DOMAIN="+strings.TrimPrefix(url, "http://"), "OPEN_SANDBOX_API_KEY="+tourKey, "GOFLAGS=-mod=mod")
		sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
		if err != nil {
			t.Fatal(err)
		}
		wants := [][]string{{"hello", "exit code 4", "lines: 2"}, {"1000 lines, exit code 0"}, {"not found: 404 SANDBOX::NOT_FOUND"}}
		blocks := codeBlocks(t, filepath.Join(root, "docs/sdk.md"), "go")
		if len(blocks) != len(wants) {
			t.Fatalf("sdk.md has %d programs; this test knows %d", len(blocks), len(wants))
		}
		for i, src := range blocks {
			dir := t.TempDir()
			mod := fmt.Sprintf("module example\n\ngo 1.26\n\nrequire github.com/corral-dev/corral v0.0.0\n\nreplace github.com/corral-dev/corral => %s\n", root)
			for name, body := range map[string][]byte{"go.mod": []byte(mod), "go.sum": sum, "main.go": []byte(src)} {
				if err := os.WriteFile(filepath.Join(dir, name), body, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			cmd := exec.CommandContext(ctx(t), "go", "run", ".")
			cmd.Dir, cmd.Env = dir, goEnv
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Run(); err != nil {
				t.Errorf("program %d of sdk.md: %v\n%s", i+1, err, out.String())
				continue
			}
			for _, w := range wants[i] {
				if !strings.Contains(out.String(), w) {
					t.Errorf("program %d of sdk.md printed %q, want %q in it", i+1, out.String(), w)
				}
			}
		}
	})
}

// notRunHere gives the corral commands README.md and docs/cli.md name that
// no ```sh block can run against the test's server, and why. A command
// shown only in a block marked "not run" takes the marker's reason.
func notRunHere() map[string]string {
	return map[string]string{
		"serve":          "the test starts its server with scripts/start.sh, which runs it",
		"image":          "it works on the server machine's data directory, not through a server; the code and agent tiers of test/e2e import images with it",
		"controller":     "it needs a -tags kube build and a cluster; the kube tier of test/e2e runs it",
		"install-binary": "a step of the Kubernetes sandbox pod's init container",
		"egress":         "the native runtime starts it for each policed sandbox; the egress tests of test/e2e run it",
		"userns-maker":   "the native runtime's server starts it for itself; internal/driver/oci.TestUsernsMaker runs it",
		"mcp":            "it waits for an MCP client; test/e2e.TestMCPToolsOverStdio runs it",
		"agent":          "it needs a model; test/e2e.TestAgentReportFromACSV runs it",
	}
}

// page is what a Markdown page shows of corral: the commands its ```sh
// blocks run, those of blocks marked not run (with the marker's reason),
// every command it names anywhere, and what is wrong with its blocks.
type page struct {
	run      map[string]bool
	excused  map[string]string
	named    map[string]bool
	problems []string
}

// readPage reads the examples of the Markdown page doc, called name.
func readPage(name, doc string) page {
	marker := regexp.MustCompile(`^<!-- not run: (.*\S) -->$`)
	command := regexp.MustCompile(`(?:^|[\s(|;&])(?:corral ([a-z][a-z-]*)|scripts/[\w.-]+)`)
	p := page{run: map[string]bool{}, excused: map[string]string{}, named: map[string]bool{}}
	var prose []string
	lines := strings.Split(doc, "\n")
	for i := 0; i < len(lines); i++ {
		lang, ok := strings.CutPrefix(lines[i], "```")
		if !ok {
			prose = append(prose, lines[i])
			continue
		}
		open, reason := i+1, ""
		if i > 0 {
			if m := marker.FindStringSubmatch(lines[i-1]); m != nil {
				reason = m[1]
			}
		}
		shows := false
		for i++; i < len(lines) && lines[i] != "```"; i++ {
			code := lines[i] // without its comment
			if strings.HasPrefix(strings.TrimSpace(code), "#") {
				code = ""
			}
			if j := strings.Index(code, " #"); j >= 0 {
				code = code[:j]
			}
			for _, m := range command.FindAllStringSubmatch(code, -1) {
				shows = true
				if m[1] == "" {
					continue
				}
				p.named[m[1]] = true
				switch {
				case lang == "sh":
					p.run[m[1]] = true
				case reason != "":
					p.excused[m[1]] = reason
				}
			}
		}
		switch {
		case lang == "sh" && reason != "":
			p.problems = append(p.problems, fmt.Sprintf("%s:%d: a ```sh block runs; it cannot be marked not run", name, open))
		case lang != "sh" && shows && reason == "":
			p.problems = append(p.problems, fmt.Sprintf("%s:%d: a ```%s block shows commands that do not run: make it ```sh or put <!-- not run: REASON --> on the line above", name, open, lang))
		}
	}
	for _, span := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(strings.Join(prose, "\n"), -1) {
		for _, m := range command.FindAllStringSubmatch(span[1], -1) {
			if m[1] != "" {
				p.named[m[1]] = true
			}
		}
	}
	return p
}

// uncovered reports the problems of pages, and every command they name
// that none of them runs and neither a marker nor notRun excuses; and an
// entry of notRun that is stale: run after all, or named nowhere.
func uncovered(pages []page, notRun map[string]string) []string {
	var out []string
	run, excused, named := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, p := range pages {
		out = append(out, p.problems...)
		for c := range p.run {
			run[c] = true
		}
		for c := range p.excused {
			excused[c] = true
		}
		for c := range p.named {
			named[c] = true
		}
	}
	for _, c := range slices.Sorted(maps.Keys(named)) {
		if !run[c] && !excused[c] && notRun[c] == "" {
			out = append(out, fmt.Sprintf("corral %s is named but no ```sh block runs it: add an example, or a reason to notRunHere", c))
		}
	}
	for _, c := range slices.Sorted(maps.Keys(notRun)) {
		switch {
		case run[c]:
			out = append(out, fmt.Sprintf("corral %s runs in a ```sh block now: drop it from notRunHere", c))
		case !named[c]:
			out = append(out, fmt.Sprintf("corral %s is named nowhere: drop it from notRunHere", c))
		}
	}
	return out
}

// TestEveryExampleRunsOrSaysWhy holds README.md and docs/cli.md to
// TestDocumentedExamples: what they show of corral runs there, or says
// why not. It needs no server.
func TestEveryExampleRunsOrSaysWhy(t *testing.T) {
	root := testutil.ModuleRoot(t)
	var pages []page
	for _, name := range []string{"README.md", "docs/cli.md"} {
		b, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			t.Fatal(err)
		}
		pages = append(pages, readPage(name, string(b)))
	}
	for _, p := range uncovered(pages, notRunHere()) {
		t.Error(p)
	}

	t.Run("CatchesWhatItShould", func(t *testing.T) {
		doc := "Try `corral frobnicate`.\n\n```console\n$ corral ls\n```\n\n<!-- not run: why -->\n```sh\ntrue\n```\n\n" +
			"<!-- not run: a terminal -->\n```console\n$ corral shell ID\n```\n"
		got := strings.Join(uncovered([]page{readPage("bad.md", doc)}, map[string]string{"ghost": "gone"}), "\n")
		for _, want := range []string{
			"bad.md:3: a ```console block shows commands",
			"bad.md:8: a ```sh block runs; it cannot be marked",
			"corral frobnicate is named but",
			"corral ls is named but",
			"corral ghost is named nowhere",
		} {
			if !strings.Contains(got, want) {
				t.Errorf("the check of a bad page lacks %q:\n%s", want, got)
			}
		}
		if strings.Contains(got, "shell") {
			t.Errorf("a block marked not run was reported:\n%s", got)
		}
	})
}
