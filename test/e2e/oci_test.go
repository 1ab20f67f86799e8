// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/internal/testutil"
	"github.com/corral-dev/corral/internal/testutil/registry"
	"github.com/corral-dev/corral/sdk"
)

func ociCreate(image string, entry ...string) api.CreateSandboxRequest {
	timeout := int64(600)
	if len(entry) == 0 {
		entry = []string{"sleep", "3600"}
	}
	return api.CreateSandboxRequest{Image: &api.ImageSpec{URI: image}, Timeout: &timeout, Entrypoint: entry,
		ResourceLimits: map[string]string{"cpu": "1", "memory": "512Mi"}}
}

func layerDirs(t *testing.T, dataDir string) map[string]time.Time {
	t.Helper()
	entries, _ := os.ReadDir(filepath.Join(dataDir, "oci", "images", "layers"))
	out := map[string]time.Time{}
	for _, e := range entries {
		fi, _ := e.Info()
		out[e.Name()] = fi.ModTime()
	}
	return out
}

// TestOCIEndToEnd drives the native runtime through the lifecycle API:
// images from a registry and from an imported tarball, commands, files,
// pause and resume, renew, delete, and layer reuse.
func TestOCIEndToEnd(t *testing.T) {
	requireOCI(t)
	t.Parallel()
	dir := t.TempDir()
	reg := registry.Start(t)
	img := busyboxImage(t)
	ref := reg + "/corral/busybox:1"
	registry.Push(t, ref, img)
	tarPath := filepath.Join(t.TempDir(), "busybox.tar")
	saveImage(t, tarPath, "example.com/tools/busybox:1", img)
	if out, err := runCorral(t, "image", "import", tarPath, "--name", "local/busybox:1", "--data-dir", dir); err != nil {
		t.Fatalf("image import: %v %s", err, out)
	}

	s := startServer(t, dir, "--runtime", "oci")
	c := s.client(t)
	sb, err := c.CreateSandbox(ctx(t), ociCreate(ref), sdk.CreateOptions{})
	if err != nil {
		t.Fatalf("create from the registry: %v", err)
	}
	if sb.Status.State != api.StateRunning {
		t.Fatalf("created sandbox is %s", sb.Status.State)
	}
	x := sandboxExecd(t, c, sb.ID)
	out, _, code := x.run("echo $FROM_IMAGE; pwd; /app/hello.sh; cat /etc/hostname")
	if code != 0 || !strings.HasPrefix(out, "yes\n/app\nhello from the image\nsandbox-") {
		t.Errorf("command = %q (exit %d)", out, code)
	}
	if _, _, code := x.run("exit 7"); code != 7 {
		t.Errorf("exit code = %d, want 7", code)
	}
	wantDiagnostics(t, s, c, ref)
	wantExecdEnvs(t, c, ref)
	data := []byte(strings.Repeat("corral ", 100000))
	x.upload("/tmp/in/data.txt", data)
	if got := x.download("/tmp/in/data.txt"); string(got) != string(data) {
		t.Errorf("download returned %d bytes, want %d", len(got), len(data))
	}
	if out, _, _ := x.run("wc -c < /tmp/in/data.txt"); strings.TrimSpace(out) != "700000" {
		t.Errorf("the uploaded file inside is %q bytes", out)
	}

	// Paused, a sandbox makes no progress; resumed, it goes on.
	x.run("while true; do echo tick >> /tmp/ticks; sleep 0.05; done", map[string]any{"background": true})
	ticks := filepath.Join(dir, "oci", "sandboxes", sb.ID, "upper", "tmp", "ticks")
	testutil.WaitFor(t, 10*time.Second, "ticks", func() bool { b, _ := os.ReadFile(ticks); return len(b) > 0 })
	if err := c.PauseSandbox(ctx(t), sb.ID); err != nil {
		t.Fatalf("pause: %v", err)
	}
	got, _ := c.GetSandbox(ctx(t), sb.ID)
	if got.Status.State != api.StatePaused {
		t.Fatalf("after pause: %s", got.Status.State)
	}
	before, _ := os.ReadFile(ticks)
	time.Sleep(400 * time.Millisecond)
	after, _ := os.ReadFile(ticks)
	if len(after) != len(before) {
		t.Errorf("a paused sandbox kept running: %d → %d bytes of ticks", len(before), len(after))
	}
	if err := c.ResumeSandbox(ctx(t), sb.ID); err != nil {
		t.Fatalf("resume: %v", err)
	}
	testutil.WaitFor(t, 10*time.Second, "ticks after resume", func() bool { b, _ := os.ReadFile(ticks); return len(b) > len(after) })
	if out, _, _ := x.run("echo alive"); out != "alive\n" {
		t.Errorf("after resume = %q", out)
	}

	at := time.Now().Add(2 * time.Hour)
	if got, err := c.RenewSandbox(ctx(t), sb.ID, at); err != nil || got.Sub(at).Abs() > time.Second {
		t.Errorf("renew = %v, %v", got, err)
	}

	// A second sandbox from the same image reuses the unpacked layers; one
	// from the imported image needs no registry.
	layers := layerDirs(t, dir)
	sb2, err := c.CreateSandbox(ctx(t), ociCreate(ref), sdk.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sb3, err := c.CreateSandbox(ctx(t), ociCreate("local/busybox:1"), sdk.CreateOptions{})
	if err != nil {
		t.Fatalf("create from the imported image: %v", err)
	}
	if again := layerDirs(t, dir); len(again) != len(layers) {
		t.Errorf("layers went from %d to %d; the same image must reuse them", len(layers), len(again))
	} else {
		for k, v := range layers {
			if !again[k].Equal(v) {
				t.Errorf("layer %s was unpacked again", k)
			}
		}
	}
	if out, _, _ := sandboxExecd(t, c, sb3.ID).run("cat /app/hello.sh | tail -1"); out != "echo hello from the image\n" {
		t.Errorf("imported image content = %q", out)
	}
	// Sandboxes are separate computers.
	if out, _, _ := sandboxExecd(t, c, sb2.ID).run("ls /tmp/in 2>&1 || echo none"); !strings.Contains(out, "none") && !strings.Contains(out, "No such") {
		t.Errorf("the second sandbox sees the first's files: %q", out)
	}

	for _, id := range []string{sb.ID, sb2.ID, sb3.ID} {
		if err := c.DeleteSandbox(ctx(t), id); err != nil {
			t.Fatalf("delete: %v", err)
		}
		if _, err := os.Stat(filepath.Join(dir, "oci", "sandboxes", id)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("delete left the bundle of %s", id)
		}
	}
	if _, err := c.GetSandbox(ctx(t), sb.ID); !errors.Is(err, sdk.ErrNotFound) {
		t.Errorf("get after delete = %v", err)
	}
}

// TestOCIStartFailuresAreExplained: a missing image or entrypoint fails the
// create with a message a user can act on, and leaves nothing behind.
func TestOCIStartFailuresAreExplained(t *testing.T) {
	requireOCI(t)
	t.Parallel()
	dir := t.TempDir()
	reg := registry.Start(t)
	registry.Push(t, reg+"/corral/busybox:1", busyboxImage(t))
	s := startServer(t, dir, "--runtime", "oci")
	c := s.client(t)
	for _, tc := range []struct {
		req  api.CreateSandboxRequest
		want string
	}{
		{ociCreate(reg + "/corral/nothing:1"), "was not found"},
		{ociCreate(reg+"/corral/busybox:1", "no-such-program"), "not found in PATH"},
		{ociCreate(reg+"/corral/busybox:1", "sh", "-c", "exit 3"), "code 3"},
	} {
		sb, err := c.CreateSandbox(ctx(t), tc.req, sdk.CreateOptions{})
		if err == nil && tc.want == "code 3" {
			// execd answered before the entrypoint's exit was seen (a
			// loaded machine): then the exit is what the sandbox reports
			// next, never lost.
			var got *api.Sandbox
			testutil.WaitFor(t, time.Minute, "the sandbox whose entrypoint exited to end", func() bool {
				got, err = c.GetSandbox(ctx(t), sb.ID)
				return err == nil && got.Status.State == api.StateFailed
			})
			if !strings.Contains(got.Status.Message, tc.want) {
				t.Errorf("the entrypoint's exit after start reads %+v, want %q", got.Status, tc.want)
			}
			_ = c.DeleteSandbox(ctx(t), sb.ID)
			continue
		}
		var ae *sdk.APIError
		if !errors.As(err, &ae) || ae.Status != 400 || !strings.Contains(ae.Message, tc.want) {
			t.Errorf("create %v = %v, want a 400 mentioning %q", tc.req.Entrypoint, err, tc.want)
		}
	}
	if entries, _ := os.ReadDir(filepath.Join(dir, "oci", "sandboxes")); len(entries) != 0 {
		t.Errorf("failed creates left %d bundles", len(entries))
	}
}

// TestOCIWarmPool: with --warm-pool, creates claim sandboxes started
// ahead of time, and the API cannot tell: the sandbox has its own
// environment, metadata, entrypoint and token, lists alone, and nothing
// warm is left when the server stops.
func TestOCIWarmPool(t *testing.T) {
	requireOCI(t)
	t.Parallel()
	dir := t.TempDir()
	s := startServer(t, dir, "--runtime", "oci", "--warm-pool", "host=1")
	c := s.client(t)
	testutil.WaitFor(t, time.Minute, "a warm sandbox", func() bool {
		entries, _ := os.ReadDir(filepath.Join(dir, "oci", "run", "bundles"))
		return len(entries) == 1
	})
	req := ociCreate("host", "sh", "-c", "echo from-entrypoint > /tmp/e; exec sleep 3600")
	v := "warm"
	req.Env = map[string]*string{"KIND": &v}
	req.Metadata = map[string]string{"pool": "yes"}
	sb, err := c.CreateSandbox(ctx(t), req, sdk.CreateOptions{Wait: true})
	if err != nil {
		t.Fatal(err)
	}
	x, err := c.Sandbox(ctx(t), sb.ID, sdk.SandboxOptions{})
	if err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "the entrypoint", func() bool {
		out, _, _, _ := x.Run(ctx(t), "cat /tmp/e 2>/dev/null", sdk.CommandOptions{})
		return out == "from-entrypoint\n"
	})
	if out, _, _, _ := x.Run(ctx(t), "echo $KIND", sdk.CommandOptions{}); out != "warm\n" {
		t.Errorf("environment = %q", out)
	}
	list, err := c.ListSandboxes(ctx(t), sdk.ListOptions{})
	if err != nil || len(list.Items) != 1 || list.Items[0].Metadata["pool"] != "yes" {
		t.Errorf("list = %+v, %v", list, err)
	}
	if err := c.DeleteSandbox(ctx(t), sb.ID); err != nil {
		t.Fatal(err)
	}
	s.stop(t)
	if entries, _ := os.ReadDir(filepath.Join(dir, "oci", "run", "bundles")); len(entries) != 0 {
		t.Errorf("warm sandboxes left after the server stopped: %d", len(entries))
	}
}
