// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/internal/sandbox"
	"github.com/corral-dev/corral/internal/testutil"
	"github.com/corral-dev/corral/internal/testutil/dockertest"
	"github.com/corral-dev/corral/internal/testutil/registry"
	"github.com/corral-dev/corral/sdk"
)

// requireDocker gates the Docker tier; images come from an in-process
// registry on loopback, which the engine pulls from.
func requireDocker(t *testing.T) *client.Client {
	t.Helper()
	dockertest.RequireDocker(t)
	cli, err := client.New(client.FromEnv)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// registryImage serves the e2e busybox image from a registry of its own
// and removes the engine's copy at the end.
func registryImage(t *testing.T, cli *client.Client) string {
	t.Helper()
	ref := registry.Start(t) + "/corral/busybox:1"
	registry.Push(t, ref, busyboxImage(t))
	t.Cleanup(func() {
		_, _ = cli.ImageRemove(context.Background(), ref, client.ImageRemoveOptions{Force: true, PruneChildren: true})
	})
	return ref
}

// ourContainers lists the containers of a server's sandboxes.
func ourContainers(t *testing.T, cli *client.Client, ids ...string) []string {
	t.Helper()
	res, err := cli.ContainerList(context.Background(), client.ContainerListOptions{All: true,
		Filters: client.Filters{}.Add("label", sandbox.LabelManaged+"=true")})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, c := range res.Items {
		for _, id := range ids {
			if c.Labels[sandbox.LabelSandboxID] == id {
				out = append(out, c.Names...)
			}
		}
	}
	return out
}

// upperFile is where a file written inside a container is on the host.
func upperFile(t *testing.T, cli *client.Client, id, path string) string {
	t.Helper()
	res, err := cli.ContainerInspect(context.Background(), "corral-"+id, client.ContainerInspectOptions{})
	if err != nil || res.Container.GraphDriver == nil || res.Container.GraphDriver.Data["UpperDir"] == "" {
		t.Fatalf("inspect %s: %v (no overlay upper dir)", id, err)
	}
	return filepath.Join(res.Container.GraphDriver.Data["UpperDir"], path)
}

// TestDockerEndToEnd is the native runtime's scenario on the docker
// runtime, over HTTP: an image pulled from a registry, commands, files,
// pause and resume, renew, snapshot and restore, delete.
func TestDockerEndToEnd(t *testing.T) {
	cli := requireDocker(t)
	t.Parallel()
	ref := registryImage(t, cli)
	s := startServer(t, t.TempDir(), "--runtime", "docker")
	c := s.client(t)
	sb, err := c.CreateSandbox(ctx(t), ociCreate(ref), sdk.CreateOptions{})
	if err != nil {
		t.Fatalf("create from the registry: %v", err)
	}
	x, err := c.Sandbox(ctx(t), sb.ID, sdk.SandboxOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out, _, code, err := x.Run(ctx(t), "echo $FROM_IMAGE; pwd; /app/hello.sh; hostname", sdk.CommandOptions{})
	if err != nil || code != 0 || !strings.HasPrefix(out, "yes\n/app\nhello from the image\nsandbox-") {
		t.Errorf("command = %q (exit %d, %v)", out, code, err)
	}
	if _, _, code, _ := x.Run(ctx(t), "exit 7", sdk.CommandOptions{}); code != 7 {
		t.Errorf("exit code = %d, want 7", code)
	}
	wantDiagnostics(t, s, c, ref)
	wantExecdEnvs(t, c, ref)
	data := strings.Repeat("corral ", 100000)
	if err := x.Upload(ctx(t), "/tmp/in/data.txt", strings.NewReader(data), 0o644); err != nil {
		t.Fatal(err)
	}
	var back strings.Builder
	if _, err := x.Download(ctx(t), "/tmp/in/data.txt", &back); err != nil || back.String() != data {
		t.Errorf("download: %d bytes, %v", back.Len(), err)
	}

	// Paused, a sandbox makes no progress; resumed, it goes on.
	if _, err := x.StartBackground(ctx(t), "while true; do echo tick >> /tmp/ticks; sleep 0.05; done", sdk.CommandOptions{}); err != nil {
		t.Fatal(err)
	}
	ticks := upperFile(t, cli, sb.ID, "tmp/ticks")
	testutil.WaitFor(t, 10*time.Second, "ticks", func() bool { b, _ := os.ReadFile(ticks); return len(b) > 0 })
	if err := c.PauseSandbox(ctx(t), sb.ID); err != nil {
		t.Fatalf("pause: %v", err)
	}
	if got, _ := c.GetSandbox(ctx(t), sb.ID); got.Status.State != api.StatePaused {
		t.Fatalf("after pause: %s", got.Status.State)
	}
	before, _ := os.ReadFile(ticks)
	time.Sleep(400 * time.Millisecond)
	if after, _ := os.ReadFile(ticks); len(after) != len(before) {
		t.Errorf("a paused sandbox kept running: %d → %d bytes", len(before), len(after))
	}
	if err := c.ResumeSandbox(ctx(t), sb.ID); err != nil {
		t.Fatalf("resume: %v", err)
	}
	testutil.WaitFor(t, 10*time.Second, "ticks after resume", func() bool { b, _ := os.ReadFile(ticks); return len(b) > len(before) })

	at := time.Now().Add(2 * time.Hour)
	if got, err := c.RenewSandbox(ctx(t), sb.ID, at); err != nil || got.Sub(at).Abs() > time.Second {
		t.Errorf("renew = %v, %v", got, err)
	}

	// A snapshot carries the filesystem into a new sandbox.
	if _, _, code, _ := x.Run(ctx(t), "echo kept > /root/marker", sdk.CommandOptions{}); code != 0 {
		t.Fatal("write marker")
	}
	snap, err := c.CreateSnapshot(ctx(t), sb.ID, "with-marker")
	if err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	testutilWaitSnapshot(t, c, snap.ID)
	if got, _ := c.GetSnapshot(ctx(t), snap.ID); got.Status.State != api.SnapshotReady {
		t.Fatalf("snapshot state %+v", got.Status)
	}
	hour := int64(3600)
	restored, err := c.CreateSandbox(ctx(t), api.CreateSandboxRequest{SnapshotID: snap.ID, Timeout: &hour, Entrypoint: []string{"sleep", "3600"}}, sdk.CreateOptions{Wait: true})
	if err != nil {
		t.Fatalf("create from the snapshot: %v", err)
	}
	rx, err := c.Sandbox(ctx(t), restored.ID, sdk.SandboxOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if out, _, _, _ := rx.Run(ctx(t), "cat /root/marker; cat /tmp/in/data.txt | wc -c", sdk.CommandOptions{}); out != "kept\n700000\n" {
		t.Errorf("the restored sandbox sees %q", out)
	}

	for _, id := range []string{sb.ID, restored.ID} {
		if err := c.DeleteSandbox(ctx(t), id); err != nil {
			t.Fatalf("delete: %v", err)
		}
	}
	if err := c.DeleteSnapshot(ctx(t), snap.ID); err != nil {
		t.Errorf("delete snapshot: %v", err)
	}
	if left := ourContainers(t, cli, sb.ID, restored.ID); len(left) > 0 {
		t.Errorf("containers left after delete: %v", left)
	}
	if _, err := c.GetSandbox(ctx(t), sb.ID); !errors.Is(err, sdk.ErrNotFound) {
		t.Errorf("get after delete = %v", err)
	}
}

// TestDockerEscapeSuite runs the native runtime's escape probes in a
// Docker sandbox: every one must fail there too.
func TestDockerEscapeSuite(t *testing.T) { dockerEscapeSuite(t, "") }

// TestDockerEscapeSuiteRunsc: the same probes in a sandbox of the runsc
// tier (gVisor), and gVisor's own.
func TestDockerEscapeSuiteRunsc(t *testing.T) { dockerEscapeSuite(t, api.IsolationRunsc) }

func dockerEscapeSuite(t *testing.T, tier string) {
	cli := requireDocker(t)
	t.Parallel()
	ref := registryImage(t, cli)
	s := startServer(t, t.TempDir(), "--runtime", "docker", "--isolation", "runc,runsc")
	c := s.client(t)
	req := ociCreate(ref)
	req.ResourceLimits = map[string]string{"cpu": "1", "memory": "64Mi", "pids": "64"}
	if tier != "" {
		req.Extensions = map[string]string{api.ExtensionIsolation: tier}
	}
	if tier == api.IsolationRunsc {
		// The limit covers gVisor's kernel too: 64 processes take about
		// 70 MB of it (docs/isolation.md).
		req.ResourceLimits["memory"] = "256Mi"
	}
	sb, err := c.CreateSandbox(ctx(t), req, sdk.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	runEscapeSuite(t, sandboxExecd(t, c, sb.ID), s, tier)
	if out, _, code := sandboxExecd(t, c, sb.ID).run("echo still-here"); code != 0 || out != "still-here\n" {
		t.Errorf("the sandbox did not survive the suite: %q %d", out, code)
	}
	if tier == api.IsolationRunsc {
		runscTierChecks(t, s, sb.ID, ref)
		return
	}
	t.Run("IsolationReported", func(t *testing.T) {
		if got, err := c.GetSandbox(ctx(t), sb.ID); err != nil || got.Isolation != api.IsolationRunc {
			t.Errorf("GET isolation = %+v, %v; want %s", got, err, api.IsolationRunc)
		}
	})
}

// runscTierChecks are the runsc tier's own escape probes, in sandbox id
// of server s: the sandbox's kernel is gVisor's Sentry, not the host's;
// and a sandbox of image ref over its memory ends, alone.
func runscTierChecks(t *testing.T, s *server, id, ref string) {
	c := s.client(t)
	x := sandboxExecd(t, c, id)
	t.Run("KernelIsGVisor", func(t *testing.T) {
		out, errOut, code := x.run("dmesg | head -n 5; uname -r")
		if code != 0 || !strings.Contains(out, "gVisor") {
			t.Errorf("dmesg and uname = %q (exit %d, %q), want gVisor's", out, code, errOut)
		}
		var host syscall.Utsname
		_ = syscall.Uname(&host)
		if rel := lastLine(out); rel == utsString(host.Release[:]) {
			t.Errorf("the sandbox sees the host's kernel release %q", rel)
		}
	})
	t.Run("HostKernelModulesInvisible", func(t *testing.T) {
		// The Sentry has no modules to list; the host's /proc/modules
		// would name them.
		if out, _, _ := x.run("cat /proc/modules 2>/dev/null | wc -l"); strings.TrimSpace(out) != "0" {
			t.Errorf("/proc/modules has %s lines", strings.TrimSpace(out))
		}
	})
	t.Run("IsolationReported", func(t *testing.T) {
		if got, err := c.GetSandbox(ctx(t), id); err != nil || got.Isolation != api.IsolationRunsc {
			t.Errorf("GET isolation = %+v, %v; want %s", got, err, api.IsolationRunsc)
		}
	})
	t.Run("MemoryOverLimitEndsOnlyThatSandbox", func(t *testing.T) {
		// A runc sandbox loses the process; a runsc one, whose memory is
		// its Sentry's, is ended whole, and said to be.
		hog := ociCreate(ref)
		hog.ResourceLimits = map[string]string{"memory": "128Mi"}
		hog.Extensions = map[string]string{api.ExtensionIsolation: api.IsolationRunsc}
		h, err := c.CreateSandbox(ctx(t), hog, sdk.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer c.DeleteSandbox(ctx(t), h.ID)
		_, _, _, _ = sandboxExecd(t, c, h.ID).sdk.Run(ctx(t), "dd if=/dev/zero of=/dev/null bs=400M count=1", sdk.CommandOptions{})
		var got *api.Sandbox
		testutil.WaitFor(t, 20*time.Second, "the sandbox over its memory to end", func() bool {
			got, err = c.GetSandbox(ctx(t), h.ID)
			return err == nil && (got.Status.State == api.StateFailed || got.Status.State == api.StateTerminated)
		})
		if got.Status.State != api.StateFailed || got.Status.Message == "" {
			t.Errorf("status = %+v, want Failed with a reason", got.Status)
		}
		if out, _, code := x.run("echo alive"); code != 0 || out != "alive\n" {
			t.Errorf("another sandbox after the OOM: %q %d", out, code)
		}
		if s.status(t, "GET", "/health") != 200 {
			t.Errorf("the server after a sandbox's OOM")
		}
	})
}

func utsString(b []int8) string {
	s := make([]byte, 0, len(b))
	for _, c := range b {
		if c == 0 {
			break
		}
		s = append(s, byte(c))
	}
	return string(s)
}

// TestDockerIsolationNotAllowed: a server that allows only runc (the
// default) answers a create asking for runsc with a 400 naming what it
// allows, and makes nothing.
func TestDockerIsolationNotAllowed(t *testing.T) {
	cli := requireDocker(t)
	t.Parallel()
	ref := registryImage(t, cli)
	s := startServer(t, t.TempDir(), "--runtime", "docker")
	c := s.client(t)
	for _, tier := range []string{api.IsolationRunsc, "kata", ""} {
		req := ociCreate(ref)
		req.Extensions = map[string]string{api.ExtensionIsolation: tier}
		sb, err := c.CreateSandbox(ctx(t), req, sdk.CreateOptions{})
		var apiErr *sdk.APIError
		if !errors.As(err, &apiErr) || apiErr.Status != 400 || apiErr.Code != api.CodeIsolationNotAllowed || !strings.Contains(apiErr.Message, "allows runc") {
			t.Errorf("create asking %q = %+v, %v; want a 400 %s naming runc", tier, sb, err, api.CodeIsolationNotAllowed)
		}
	}
	if l, err := c.ListSandboxes(ctx(t), sdk.ListOptions{}); err != nil || len(l.Items) != 0 {
		t.Errorf("refused creates left sandboxes: %+v %v", l, err)
	}
}
