// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package docker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/internal/driver"
	"github.com/corral-dev/corral/internal/driver/warmpool"
	"github.com/corral-dev/corral/internal/insandbox"
	"github.com/corral-dev/corral/internal/sandbox"
	"github.com/corral-dev/corral/internal/testutil"
	"github.com/corral-dev/corral/internal/testutil/dockertest"
	"github.com/corral-dev/corral/sse"
)

// TestWarmContainers: a template's pool fills with warm containers that
// are not listed; only a create naming the pool, with its image, takes
// one; the claim sets the limits and is remembered, so a driver started
// afterwards lists the claimed container with its tenant and labels (the
// engine's labels are fixed at create) and removes the warm containers
// no claim holds; a snapshot carries the claim's tenant; destroying the
// claimed container removes its files; a remote engine keeps no pool.
func TestWarmContainers(t *testing.T) {
	dockertest.RequireDocker(t)
	image := dockertest.Busybox(t)
	cli := engine(t)
	var b [8]byte
	_, _ = rand.Read(b[:])
	cfg := Config{ServerID: "warm-" + hex.EncodeToString(b[:]), StateDir: t.TempDir()}
	d1 := newTestDriver(t, cfg)
	const key = "template:t1/busy"
	d1.SetPool(key, driver.Spec{Image: driver.Image{URI: image}}, 1)
	testutil.WaitFor(t, time.Minute, "a warm container", func() bool { return d1.Ready(key) == 1 })
	if ls, err := d1.List(t.Context()); err != nil || len(ls) != 0 {
		t.Fatalf("a warm container is listed: %v %v", ls, err)
	}
	if _, ok := d1.Claim(driver.Spec{Image: driver.Image{URI: image}, Entrypoint: []string{"true"}}); ok {
		t.Fatal("a create naming no pool took a template's warm container")
	}
	if _, ok := d1.Claim(driver.Spec{Pool: key, Image: driver.Image{URI: image}, Entrypoint: []string{"true"},
		NetworkPolicy: []byte(`{"defaultAction":"deny"}`)}); ok {
		t.Fatal("a policed create took a warm container")
	}
	id, ok := d1.Claim(driver.Spec{Pool: key, Image: driver.Image{URI: image}, Entrypoint: []string{"true"}})
	if !ok {
		t.Fatal("the template's create found no warm container")
	}
	spec := driver.Spec{ID: id, Tenant: "t1", Pool: key, Image: driver.Image{URI: image}, Entrypoint: []string{"sleep", "3600"},
		Env: map[string]string{"WHO": "claimer"}, Labels: map[string]string{"team": "a"}, ExecdToken: "tok-claimed",
		Resources: driver.Resources{MemoryBytes: 64 << 20, CPUMillis: 500}}
	if _, err := d1.Create(t.Context(), spec); err != nil {
		t.Fatal(err)
	}
	defer d1.Destroy(context.Background(), id)
	// The limits: in its cgroup at once (cgroup v2), and in what the
	// engine reports soon after.
	c, err := cli.ContainerInspect(t.Context(), containerName(id), client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dirs, err := warmpool.ProcessCgroups(c.Container.State.Pid)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dirs("memory"), "memory.limit_in_bytes")
	if warmpool.CgroupV2() {
		file = filepath.Join(dirs(""), "memory.max")
	}
	if b, err := os.ReadFile(file); err != nil || strings.TrimSpace(string(b)) != "67108864" {
		t.Errorf("%s after the claim = %q, %v", file, b, err)
	}
	testutil.WaitFor(t, 10*time.Second, "the engine to report the claim's limits", func() bool {
		c, err := cli.ContainerInspect(t.Context(), containerName(id), client.ContainerInspectOptions{})
		return err == nil && c.Container.HostConfig.Memory == 64<<20 && c.Container.HostConfig.NanoCPUs == 500_000_000
	})
	// The sandbox's token opens its execd, another does not; from inside,
	// the gate (token, environment) cannot be rewritten.
	if _, status := execIn(t, d1, id, "not-the-token", "true"); status != 401 {
		t.Errorf("a wrong token = %d, want 401", status)
	}
	out, status := execIn(t, d1, id, "tok-claimed", `echo "$WHO"; for f in token env; do (echo x > `+gateInSandbox+`/$f) 2>/dev/null && echo "wrote $f"; done; true`)
	if status != 200 || out != "claimer\n" {
		t.Errorf("in the claimed container: %q, %d (want its environment, and no write to its gate)", out, status)
	}
	testutil.WaitFor(t, time.Minute, "the pool to refill", func() bool { return d1.Ready(key) == 1 })

	// A driver started later (the server restarted).
	d2 := newTestDriver(t, cfg)
	ls, err := d2.List(t.Context())
	if err != nil || len(ls) != 1 || ls[0].ID != id || ls[0].Tenant != "t1" || ls[0].Labels["team"] != "a" {
		t.Fatalf("after a restart: %+v, %v; want only %s of t1", ls, err, id)
	}
	res, err := cli.ContainerList(t.Context(), client.ContainerListOptions{All: true,
		Filters: client.Filters{}.Add("label", sandbox.LabelServer+"="+cfg.ServerID)})
	if err != nil || len(res.Items) != 1 {
		t.Errorf("containers after a restart: %d, %v; the unclaimed warm one should be gone", len(res.Items), err)
	}
	ref, err := d2.Snapshot(t.Context(), id, sandbox.NewID())
	if err != nil {
		t.Fatal(err)
	}
	if ref.Labels[sandbox.LabelTenant] != "t1" {
		t.Errorf("the snapshot's tenant = %q", ref.Labels[sandbox.LabelTenant])
	}
	if err := d2.RemoveSnapshot(t.Context(), ref); err != nil {
		t.Fatal(err)
	}
	if err := d2.Destroy(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(d2.warmDir(id)); !os.IsNotExist(err) {
		t.Errorf("the claimed container's files are left: %v", err)
	}

	remote := newTestDriver(t, Config{Remote: true, StateDir: t.TempDir()})
	if err := remote.Warmable(driver.Spec{Image: driver.Image{URI: image}}); err == nil {
		t.Error("a remote engine offers warm containers")
	}
}

// execIn runs a command through sandbox id's execd with token and returns
// its stdout and the HTTP status.
func execIn(t *testing.T, d *Driver, id, token, command string) (string, int) {
	t.Helper()
	addr, err := d.Endpoint(t.Context(), id, insandbox.ExecdPort)
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
