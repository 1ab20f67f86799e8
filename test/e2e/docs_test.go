// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/corral-dev/corral/internal/driver/oci"
	"github.com/corral-dev/corral/internal/testutil"
)

// Documentation is tested as written: every ```sh block of README.md and
// docs/cli.md runs, in order, as one bash script per file, and every
// ```go block of docs/sdk.md is a program that must build and run. Blocks
// fenced otherwise (```console, ```bash) are shown, not run.

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
		_ = oci.UnmountRunDir(filepath.Join(data, "oci"))
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
	url := startViaScript(t, root, "--api-key", tourKey)
	// The server the README's first command starts listens on :8080; this
	// one is on a free port, which the variable tells the CLI.
	env := append(os.Environ(), "CORRAL_SERVER="+url, "CORRAL_CONFIG="+filepath.Join(t.TempDir(), "config.toml"),
		"OPEN_SANDBOX_DOMAIN=", "OPEN_SANDBOX_API_KEY=")

	t.Run("README", func(t *testing.T) {
		out := runScript(t, root, env, codeBlocks(t, filepath.Join(root, "README.md"), "sh"))
		for _, want := range []string{"Linux", "exit code: 3"} {
			if !strings.Contains(out, want) {
				t.Errorf("the tour's output lacks %q:\n%s", want, out)
			}
		}
	})

	keyed := append(env, "CORRAL_API_KEY="+tourKey, "PATH="+filepath.Join(root, "bin")+":"+os.Getenv("PATH"))
	t.Run("cli.md", func(t *testing.T) {
		t.Cleanup(func() { os.RemoveAll("/tmp/corral-docs") })
		out := runScript(t, t.TempDir(), keyed, codeBlocks(t, filepath.Join(root, "docs/cli.md"), "sh"))
		for _, want := range []string{"exit code 3", "hello from /tmp", "step 3", "from stdin"} {
			if !strings.Contains(out, want) {
				t.Errorf("cli.md's output lacks %q:\n%s", want, out)
			}
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
