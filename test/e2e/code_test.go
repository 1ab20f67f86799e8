// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"archive/tar"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/internal/testutil"
	"github.com/corral-dev/corral/sdk"
)

// requireHostKernel: the host image is the server machine's /usr, so its
// kernels are Debian's ipykernel (scripts/test.sh installs it).
func requireHostKernel(t *testing.T) {
	t.Helper()
	if _, err := os.Stat("/usr/share/jupyter/kernels/python3/kernel.json"); err != nil {
		t.Fatal("no Python kernelspec on this machine: install python3-ipykernel")
	}
}

// TestCodeInterpreterOCI drives the code interpreter through the Go SDK
// and the CLI, in a sandbox of the native runtime whose kernels are the
// host image's: state, isolation, results, errors, interrupts, queueing,
// large output, a kernel's death, pause and resume.
func TestCodeInterpreterOCI(t *testing.T) {
	t.Parallel()
	requireOCI(t)
	requireHostKernel(t)
	s, c, x := hostSandbox(t)
	cx := ctx(t)
	run := func(code string, opts sdk.CodeOptions) *sdk.Execution {
		t.Helper()
		ex, err := x.RunCode(cx, code, opts, nil)
		if err != nil {
			t.Fatalf("RunCode(%q): %v", code, err)
		}
		return ex
	}

	// State persists in the default context; another context is apart.
	if ex := run("x = 42", sdk.CodeOptions{}); ex.Error != nil || ex.ContextID == "" {
		t.Fatalf("x = 42: %+v", ex)
	}
	if ex := run("result = x\nresult", sdk.CodeOptions{}); ex.Text() != "42" || ex.ExecutionCount != 2 {
		t.Fatalf("x: %+v", ex)
	}
	other, err := x.CreateCodeContext(cx, "python", "/tmp/ctx-b")
	if err != nil {
		t.Fatal(err)
	}
	if ex := run("x", sdk.CodeOptions{Context: other.ID}); ex.Error == nil || ex.Error.EName != "NameError" {
		t.Fatalf("x in another context: %+v", ex)
	}
	if ex := run("import os\nos.getcwd()", sdk.CodeOptions{Context: other.ID}); ex.Text() != "'/tmp/ctx-b'" {
		t.Fatalf("cwd of a context: %q", ex.Text())
	}
	ex := run("result = 2 + 2\nresult", sdk.CodeOptions{Language: "python"})
	if len(ex.Results) != 1 || ex.Results[0].Data["text"] != "4" || ex.Results[0].Data["text/plain"] != "4" {
		t.Fatalf("2 + 2: %+v", ex.Results)
	}
	ex = run("def f():\n    raise KeyError('k')\nf()", sdk.CodeOptions{})
	if ex.Error == nil || ex.Error.EName != "KeyError" || !strings.Contains(ex.Error.TracebackText, "raise KeyError") {
		t.Fatalf("error: %+v", ex.Error)
	}

	// Output streams live: the first line arrives before the code ends.
	flag := "/tmp/go-on"
	var firstAt, doneAt time.Time
	var mu sync.Mutex
	ex, err = x.RunCode(cx, fmt.Sprintf("import os, time\nprint('first', flush=True)\nwhile not os.path.exists(%q): time.sleep(0.01)\nprint('second')", flag), sdk.CodeOptions{}, &sdk.CodeHandlers{
		Stdout: func(text string) error {
			mu.Lock()
			defer mu.Unlock()
			if strings.Contains(text, "first") && firstAt.IsZero() {
				firstAt = time.Now()
				// Only now may the code go on.
				go func() { _, _, _, _ = x.Run(cx, "touch "+flag, sdk.CommandOptions{}) }()
			}
			return nil
		},
	})
	doneAt = time.Now()
	if err != nil || ex.Stdout != "first\nsecond\n" || firstAt.IsZero() || !firstAt.Before(doneAt) {
		t.Fatalf("live output: %v %+v", err, ex)
	}

	// 10 MB of output arrives whole.
	if ex := run("print('z' * 10_000_000)", sdk.CodeOptions{Context: other.ID}); len(ex.Stdout) != 10_000_001 {
		t.Fatalf("10 MB: got %d bytes", len(ex.Stdout))
	}

	// Interrupt: the loop ends, the context keeps its state.
	run("kept = 'yes'", sdk.CodeOptions{Context: other.ID})
	done := make(chan *sdk.Execution, 1)
	go func() {
		ex, _ := x.RunCode(cx, "while True: pass", sdk.CodeOptions{Context: other.ID}, nil)
		done <- ex
	}()
	testutil.WaitFor(t, 30*time.Second, "the loop to run", func() bool {
		info, err := x.CodeContext(cx, other.ID)
		return err == nil && info.Status == api.CodeContextBusy
	})
	if err := x.InterruptCode(cx, other.ID); err != nil {
		t.Fatal(err)
	}
	select {
	case ex := <-done:
		if ex == nil || ex.Error == nil || ex.Error.EName != "KeyboardInterrupt" {
			t.Fatalf("after interrupt: %+v %+v", ex, ex.Error)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("interrupt did not end the loop")
	}
	if ex := run("kept", sdk.CodeOptions{Context: other.ID}); ex.Text() != "'yes'" {
		t.Fatalf("state after interrupt: %+v", ex)
	}

	// Two executions in one context run one after the other.
	var wg sync.WaitGroup
	var a, b *sdk.Execution
	wg.Go(func() {
		a, _ = x.RunCode(cx, "import time\ntime.sleep(0.5)\norder = ['a']", sdk.CodeOptions{Context: other.ID}, nil)
	})
	testutil.WaitFor(t, 30*time.Second, "the first to run", func() bool {
		info, err := x.CodeContext(cx, other.ID)
		return err == nil && info.Status == api.CodeContextBusy
	})
	wg.Go(func() { b, _ = x.RunCode(cx, "order.append('b')\norder", sdk.CodeOptions{Context: other.ID}, nil) })
	wg.Wait()
	if a == nil || b == nil || a.Error != nil || b.Text() != "['a', 'b']" {
		t.Fatalf("queued executions: %+v %+v", a, b)
	}

	// Pause and resume keep the kernels and their state.
	if err := c.PauseSandbox(cx, x.ID); err != nil {
		t.Fatal(err)
	}
	if err := c.ResumeSandbox(cx, x.ID); err != nil {
		t.Fatal(err)
	}
	if ex := run("x", sdk.CodeOptions{}); ex.Text() != "42" {
		t.Fatalf("state after pause and resume: %+v", ex)
	}

	// The CLI: text results on stdout, the traceback on stderr, exit 1.
	cl := newCLI(t, s)
	if out := cl.ok("code", x.ID, "--context", other.ID, "-c", "print('cli'); kept"); out != "cli\n'yes'\n" {
		t.Fatalf("corral code: %q", out)
	}
	r := cl.run(strings.NewReader("1/0\n"), "code", x.ID, "-")
	if r.code != 1 || !strings.Contains(r.stderr, "ZeroDivisionError") || strings.Contains(r.stderr, "\x1b[") {
		t.Fatalf("corral code with an error: %+v", r)
	}
	if r := cl.run(nil, "code", x.ID, "--lang", "cobol", "-c", "1"); r.code != 125 || !strings.Contains(r.stderr, "python") {
		t.Fatalf("corral code --lang cobol: %+v", r)
	}
	svg := "from IPython.display import SVG, display\ndisplay(SVG('<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"1\" height=\"1\"/>'))"
	dir := t.TempDir()
	if r := cl.run(nil, "code", x.ID, "--out-dir", dir, "-c", svg); r.code != 0 || !strings.Contains(r.stderr, "result-1.svg") {
		t.Fatalf("corral code saving an image: %+v", r)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "result-1.svg")); err != nil || !strings.Contains(string(b), "<svg") {
		t.Fatalf("saved image: %v %q", err, b)
	}

	// A kernel that dies: the context says so, a restart brings it back.
	if ex := run("import os\nos._exit(1)", sdk.CodeOptions{Context: other.ID}); ex.Error == nil || ex.Error.EName != "KernelDied" {
		t.Fatalf("kernel death: %+v", ex)
	}
	if _, err := x.RunCode(cx, "1", sdk.CodeOptions{Context: other.ID}, nil); err == nil || !strings.Contains(err.Error(), api.CodeExecdContextDead) && !strings.Contains(err.Error(), "dead") {
		t.Fatalf("run on a dead context: %v", err)
	}
	if _, err := x.RestartCodeContext(cx, other.ID); err != nil {
		t.Fatal(err)
	}
	if ex := run("'again'", sdk.CodeOptions{Context: other.ID}); ex.Text() != "'again'" {
		t.Fatalf("after restart: %+v", ex)
	}

	// Deleting by language ends every kernel.
	if err := x.DeleteCodeContexts(cx, "python"); err != nil {
		t.Fatal(err)
	}
	if list, err := x.CodeContexts(cx, ""); err != nil || len(list) != 0 {
		t.Fatalf("contexts left: %v %+v", err, list)
	}
	testutil.WaitFor(t, 30*time.Second, "the kernels to exit", func() bool {
		out, _, _, err := x.Run(context.WithoutCancel(cx), "ps -eo args | grep -c '[i]pykernel_launcher' || true", sdk.CommandOptions{})
		return err == nil && strings.TrimSpace(out) == "0"
	})
}

// codeImage is the code-interpreter image that scripts/test.sh builds
// (images/code-interpreter/build.sh), as a docker save tarball.
func codeImage(t *testing.T) string {
	t.Helper()
	p := os.Getenv("CORRAL_TEST_CODE_IMAGE")
	if p == "" {
		if os.Getenv(testutil.EnvRoot) == "1" {
			t.Fatal("CORRAL_TEST_CODE_IMAGE is not set: scripts/test.sh builds the image with images/code-interpreter/build.sh")
		}
		t.Skip("set CORRAL_TEST_CODE_IMAGE to the tarball images/code-interpreter/build.sh prints")
	}
	return p
}

const codeImageRef = "corral/code-interpreter:local"

// checkCodeImage runs what the image promises: a python kernel with
// numpy, pandas and matplotlib, and an R kernel.
func checkCodeImage(t *testing.T, x *sdk.Sandbox) {
	t.Helper()
	cx := ctx(t)
	ex, err := x.RunCode(cx, "import numpy as np\nresult = int(np.arange(5).sum())\nresult", sdk.CodeOptions{Language: "python"}, nil)
	if err != nil || ex.Error != nil || ex.Text() != "10" {
		t.Fatalf("numpy: %v %+v", err, ex)
	}
	list, err := x.CodeContexts(cx, "python")
	if err != nil || len(list) != 1 || list[0].Kernel != "python" || list[0].Cwd != "/workspace" {
		t.Fatalf("default context: %v %+v", err, list)
	}
	ex, err = x.RunCode(cx, "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])\nplt.title('squares')\nplt.show()", sdk.CodeOptions{}, nil)
	if err != nil || ex.Error != nil {
		t.Fatalf("plot: %v %+v", err, ex)
	}
	var png []byte
	for _, r := range ex.Results {
		if b, ok := r.Image("image/png"); ok {
			png = b
		}
	}
	if !strings.HasPrefix(string(png), "\x89PNG\r\n\x1a\n") {
		t.Fatalf("no PNG from a plot: %+v", ex.Results)
	}
	ex, err = x.RunCode(cx, "import pandas as pd\npd.DataFrame({'a': [1, 2], 'b': ['x', 'y']})", sdk.CodeOptions{}, nil)
	if err != nil || len(ex.Results) != 1 || !strings.Contains(ex.Results[0].Data["text/html"], "<table") || !strings.Contains(ex.Text(), "a  b") {
		t.Fatalf("a DataFrame: %v %+v", err, ex)
	}
	r, err := x.CreateCodeContext(cx, "r", "")
	if err != nil {
		t.Fatalf("an R context: %v", err)
	}
	ex, err = x.RunCode(cx, "x <- c(1, 2, 3)\nsum(x) * 2", sdk.CodeOptions{Context: r.ID}, nil)
	if err != nil || ex.Error != nil || !strings.Contains(ex.Text(), "12") {
		t.Fatalf("R: %v %+v", err, ex)
	}
	if _, err := x.CreateCodeContext(cx, "cobol", ""); err == nil || !strings.Contains(err.Error(), "bash, go, javascript, python, r, typescript") {
		t.Fatalf("an unknown language: %v", err)
	}
	// The languages beyond Debian's kernels, each keeping its state.
	for _, c := range []struct {
		lang, first, second, want string
	}{
		{"javascript", "let a = 20", "a * 2", "40"},
		{"typescript", "const b: number = 21", "b * 2", "42"},
		{"bash", "N=6; cd /tmp", "echo $((N * 7)) $PWD", "42 /tmp"},
		{"go", "import \"strings\"\nw := \"go\"", "strings.ToUpper(w)", "GO"},
	} {
		cc, err := x.CreateCodeContext(cx, c.lang, "")
		if err != nil {
			t.Fatalf("a %s context: %v", c.lang, err)
		}
		if ex, err := x.RunCode(cx, c.first, sdk.CodeOptions{Context: cc.ID}, nil); err != nil || ex.Error != nil {
			t.Fatalf("%s %q: %v %+v", c.lang, c.first, err, ex)
		}
		ex, err := x.RunCode(cx, c.second, sdk.CodeOptions{Context: cc.ID}, nil)
		if err != nil || ex.Error != nil || !strings.Contains(ex.Text()+ex.Stdout, c.want) {
			t.Fatalf("%s %q: %v %+v", c.lang, c.second, err, ex)
		}
	}
	// Errors are errors in bash and Go.
	for _, c := range []struct{ lang, code, ename string }{{"bash", "false", "ExitStatus"}, {"go", "undefinedName", "Error"}} {
		ex, err := x.RunCode(cx, c.code, sdk.CodeOptions{Language: c.lang}, nil)
		if err != nil || ex.Error == nil || ex.Error.EName != c.ename {
			t.Fatalf("%s %q: %v %+v", c.lang, c.code, err, ex)
		}
	}
}

// codeImageSandbox creates a sandbox of the code-interpreter image.
func codeImageSandbox(t *testing.T, s *server) *sdk.Sandbox {
	t.Helper()
	c := s.client(t)
	req := ociCreate(codeImageRef)
	req.ResourceLimits = map[string]string{"cpu": "1", "memory": "2Gi"}
	sb, err := c.CreateSandbox(ctx(t), req, sdk.CreateOptions{Wait: true})
	if err != nil {
		t.Fatal(err)
	}
	x, err := c.Sandbox(ctx(t), sb.ID, sdk.SandboxOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return x
}

func TestCodeInterpreterImageOCI(t *testing.T) {
	t.Parallel()
	requireOCI(t)
	img := codeImage(t)
	dir := t.TempDir()
	if out, err := runCorral(t, "image", "import", img, "--data-dir", dir); err != nil {
		t.Fatalf("image import: %v %s", err, out)
	}
	s := startServer(t, dir, "--runtime", "oci")
	checkCodeImage(t, codeImageSandbox(t, s))
}

func TestCodeInterpreterImageDocker(t *testing.T) {
	t.Parallel()
	cli := requireDocker(t)
	img := codeImage(t)
	// The engine keeps its images between runs: one of an older recipe
	// under the same name is replaced.
	if got, err := cli.ImageInspect(ctx(t), codeImageRef); err != nil || got.ID != tarImageID(t, img) {
		f, err := os.Open(img)
		if err != nil {
			t.Fatal(err)
		}
		res, err := cli.ImageLoad(ctx(t), f)
		f.Close()
		if err != nil {
			t.Fatalf("docker load: %v", err)
		}
		_, _ = io.Copy(io.Discard, res)
		res.Close()
	}
	s := startServer(t, t.TempDir(), "--runtime", "docker")
	checkCodeImage(t, codeImageSandbox(t, s))
}

// tarImageID is the image id (its config's digest) of a docker save
// tarball, from its manifest.json.
func tarImageID(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("%s has no manifest.json: %v", path, err)
		}
		if h.Name != "manifest.json" {
			continue
		}
		var m []struct{ Config string }
		if err := json.NewDecoder(tr).Decode(&m); err != nil || len(m) != 1 {
			t.Fatalf("%s: manifest.json: %v", path, err)
		}
		c := strings.TrimSuffix(filepath.Base(m[0].Config), ".json")
		if !strings.HasPrefix(c, "sha256:") {
			c = "sha256:" + c
		}
		return c
	}
}
