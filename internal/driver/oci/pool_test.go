// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package oci

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/internal/driver"
	"github.com/corral-dev/corral/internal/testutil"
	"github.com/corral-dev/corral/sse"
)

// execIn runs a command through the sandbox's execd and returns its
// stdout and the HTTP status.
func execIn(t *testing.T, d *Driver, id, token, command string) (string, int) {
	t.Helper()
	addr, err := d.Endpoint(t.Context(), id, api.ExecdPort)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(map[string]string{"command": command})
	req, _ := http.NewRequestWithContext(t.Context(), "POST", "http://"+addr.String()+"/command", strings.NewReader(string(body)))
	req.Header.Set(api.HeaderExecdToken, token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != 200 {
		return "", res.StatusCode
	}
	var out strings.Builder
	rd := sse.NewReader(res.Body)
	for {
		raw, err := rd.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		var ev api.ServerStreamEvent
		_ = json.Unmarshal(raw, &ev)
		if ev.Type == api.EventStdout {
			out.WriteString(ev.Text + "\n")
		}
	}
	return out.String(), 200
}

// TestWarmPool claims a warm sandbox and checks that it becomes exactly
// the sandbox asked for: the tenant's, listed, with its environment,
// entrypoint, limits and access token (the pool's no longer opens it);
// that the pool refills; and that closing the driver leaves nothing.
func TestWarmPool(t *testing.T) {
	requireRunc(t)
	root := t.TempDir()
	t.Cleanup(func() { _ = UnmountRunDir(root) })
	d, err := New(Config{Root: root, CorralBinary: corralBin, AllowHostImage: true, Pool: []PoolImage{{Image: HostImage, Size: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			_ = d.Close()
		}
	})
	testutil.WaitFor(t, time.Minute, "a warm sandbox", func() bool { return d.Ready(HostImage) == 1 })
	if ls, err := d.List(t.Context()); err != nil || len(ls) != 0 {
		t.Fatalf("a warm sandbox is listed: %v %v", ls, err)
	}
	if _, ok := d.Claim(driver.Spec{Image: driver.Image{URI: "other"}, Entrypoint: []string{"true"}}); ok {
		t.Fatal("claimed a warm sandbox of another image")
	}
	if _, ok := d.Claim(driver.Spec{Image: driver.Image{URI: HostImage}, Entrypoint: []string{"true"}, Env: map[string]string{"A": "two\nlines"}}); ok {
		t.Fatal("claimed with an environment a file cannot carry")
	}
	spec := driver.Spec{Tenant: "t1", Image: driver.Image{URI: HostImage}, ExecdToken: "claimed-token-0123456789",
		Entrypoint: []string{"sh", "-c", "echo started > /tmp/started; exec sleep 3600"},
		Env:        map[string]string{"GREETING": "hi there"}, Labels: map[string]string{"team": "a"},
		Resources: driver.Resources{MemoryBytes: 128 << 20, Pids: 100, CPUMillis: 500}}
	id, ok := d.Claim(spec)
	if !ok {
		t.Fatal("no warm sandbox to claim")
	}
	spec.ID = id
	warmToken, _ := os.ReadFile(filepath.Join(d.bundleDir(id), "status", "token"))
	start := time.Now()
	h, err := d.Create(t.Context(), spec)
	if err != nil {
		t.Fatalf("create of a claimed sandbox: %v", err)
	}
	t.Logf("personalised in %v", time.Since(start))
	if h.ID != id {
		t.Fatalf("handle %s, want %s", h.ID, id)
	}
	ls, _ := d.List(t.Context())
	if len(ls) != 1 || ls[0].ID != id || ls[0].Tenant != "t1" || ls[0].Labels["team"] != "a" {
		t.Errorf("listing after the claim = %+v", ls)
	}
	if _, status := execIn(t, d, id, strings.TrimSpace(string(warmToken)), "true"); status != 401 {
		t.Errorf("the pool's token still opens execd: %d", status)
	}
	testutil.WaitFor(t, 10*time.Second, "the entrypoint to start", func() bool {
		out, _ := execIn(t, d, id, spec.ExecdToken, "cat /tmp/started 2>/dev/null")
		return out == "started\n"
	})
	out, status := execIn(t, d, id, spec.ExecdToken, `echo "$GREETING"; hostname; cat /sys/fs/cgroup/pids/pids.max /sys/fs/cgroup/memory/memory.limit_in_bytes /sys/fs/cgroup/cpu/cpu.cfs_quota_us 2>/dev/null || cat /sys/fs/cgroup/pids.max /sys/fs/cgroup/memory.max /sys/fs/cgroup/cpu.max`)
	want := "hi there\nsandbox-" + strings.ReplaceAll(id, "-", "")[:12] + "\n100\n134217728\n50000\n"
	if status != 200 || out != want {
		t.Errorf("inside the claimed sandbox: %q (status %d), want %q", out, status, want)
	}
	testutil.WaitFor(t, time.Minute, "the pool to refill", func() bool { return d.Ready(HostImage) == 1 })

	if err := d.Stop(t.Context(), id, time.Second); err != nil {
		t.Fatal(err)
	}
	if err := d.Destroy(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	closed = true
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	assertNoLeaks(t, root)
	if left, _ := filepath.Glob("/sys/fs/cgroup/*/corral/" + id); len(left) > 0 {
		t.Errorf("leak: cgroups %v", left)
	}
}

func TestParsePool(t *testing.T) {
	got, err := ParsePool(" host=2, registry.example.com:5000/py:3.12=1,")
	if err != nil || len(got) != 2 || got[0] != (PoolImage{"host", 2}) || got[1] != (PoolImage{"registry.example.com:5000/py:3.12", 1}) {
		t.Errorf("ParsePool = %+v, %v", got, err)
	}
	for _, bad := range []string{"host", "=2", "host=x", "host=-1", "host=1000"} {
		if _, err := ParsePool(bad); err == nil {
			t.Errorf("ParsePool(%q) accepted", bad)
		}
	}
}

// TestTemplatePool: a pool set while the driver runs (a template's) fills;
// only creates naming it, with its image, take from it (not a create of
// the same image without it, nor one of another image naming it); a
// bigger or smaller size is kept; 0 destroys its warm sandboxes.
func TestTemplatePool(t *testing.T) {
	requireRunc(t)
	root := t.TempDir()
	t.Cleanup(func() { _ = UnmountRunDir(root) })
	d, err := New(Config{Root: root, CorralBinary: corralBin, AllowHostImage: true})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	const key = "template:t1/py"
	d.SetPool(key, driver.Spec{Image: driver.Image{URI: HostImage}}, 2)
	testutil.WaitFor(t, time.Minute, "two warm sandboxes", func() bool { return d.Ready(key) == 2 })
	if _, ok := d.Claim(driver.Spec{Image: driver.Image{URI: HostImage}, Entrypoint: []string{"true"}}); ok {
		t.Fatal("a create naming no pool took a template's warm sandbox")
	}
	if _, ok := d.Claim(driver.Spec{Pool: key, Image: driver.Image{URI: "other"}, Entrypoint: []string{"true"}}); ok {
		t.Fatal("a create of another image took the template's warm sandbox")
	}
	if _, ok := d.Claim(driver.Spec{Pool: "template:t2/py", Image: driver.Image{URI: HostImage}, Entrypoint: []string{"true"}}); ok {
		t.Fatal("another template's create took this one's warm sandbox")
	}
	id, ok := d.Claim(driver.Spec{Pool: key, Image: driver.Image{URI: HostImage}, Entrypoint: []string{"true"}})
	if !ok {
		t.Fatal("the template's create found no warm sandbox")
	}
	spec := driver.Spec{ID: id, Tenant: "t1", Pool: key, Image: driver.Image{URI: HostImage}, Entrypoint: []string{"sleep", "60"},
		Env: map[string]string{"WHO": "claimed"}, ExecdToken: "tok-claimed"}
	if _, err := d.Create(t.Context(), spec); err != nil {
		t.Fatal(err)
	}
	defer d.Destroy(context.Background(), id)
	testutil.WaitFor(t, time.Minute, "the pool to refill", func() bool { return d.Ready(key) == 2 })
	d.SetPool(key, driver.Spec{Image: driver.Image{URI: HostImage}}, 1)
	if n := d.Ready(key); n != 1 {
		t.Errorf("after shrinking to 1, %d ready", n)
	}
	d.SetPool(key, driver.Spec{Image: driver.Image{URI: HostImage}}, 0)
	if n := d.Ready(key); n != 0 {
		t.Errorf("after dropping the pool, %d ready", n)
	}
	ls, err := d.List(t.Context())
	if err != nil || len(ls) != 1 || ls[0].ID != id {
		t.Errorf("listed %v, %v; want only the claimed %s", ls, err, id)
	}
	entries, _ := os.ReadDir(filepath.Join(runDir(root), "bundles"))
	if len(entries) != 1 {
		t.Errorf("%d bundles left, want the claimed one's", len(entries))
	}
}
