// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package docker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/errdefs"
	"github.com/corral-dev/corral/internal/driver"
	"github.com/corral-dev/corral/internal/driver/drivertest"
	"github.com/corral-dev/corral/internal/hostnet/netns"
	"github.com/corral-dev/corral/internal/insandbox"
	"github.com/corral-dev/corral/internal/sandbox"
	"github.com/corral-dev/corral/internal/testutil"
	"github.com/corral-dev/corral/internal/testutil/corraltest"
	"github.com/corral-dev/corral/internal/testutil/dockertest"
)

var corralBin string

// The package's tests end every goroutine they start.
func TestMain(m *testing.M) { os.Exit(testutil.NoLeaks(corraltest.RunWithCorral(m, &corralBin))) }

func newTestDriver(t *testing.T, cfg Config) *Driver {
	t.Helper()
	cfg.CorralBinary = corralBin
	d, err := New(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

// engine is a client for the test's own inspections.
func engine(t *testing.T) *client.Client {
	t.Helper()
	cli, err := client.New(client.FromEnv)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

func conformance(t *testing.T, cfg Config) { conformanceIn(t, cfg, "") }

func conformanceIn(t *testing.T, cfg Config, tier string) {
	dockertest.RequireDocker(t)
	image := dockertest.Busybox(t)
	cli := engine(t)
	// The engine is shared with other tests running now: what this suite
	// checks is only what carries its own server ID.
	var b [8]byte
	_, _ = rand.Read(b[:])
	cfg.ServerID = "conformance-" + hex.EncodeToString(b[:])
	cfg.StateDir = t.TempDir()
	mine := client.Filters{}.Add("label", sandbox.LabelServer+"="+cfg.ServerID)
	shimsBefore := engineShims(t)
	drivertest.Run(t, drivertest.Harness{
		New: func(t *testing.T) driver.Driver { return newTestDriver(t, cfg) },
		Spec: func(*testing.T) driver.Spec {
			return driver.Spec{Image: driver.Image{URI: image}, Entrypoint: []string{"sleep", "3600"}, Labels: map[string]string{"team": "a"}, Isolation: tier}
		},
		ExitSpec: func(_ *testing.T, code int) driver.Spec {
			return driver.Spec{Image: driver.Image{URI: image}, Entrypoint: []string{"sh", "-c", fmt.Sprintf("sleep 0.5; exit %d", code)}, Isolation: tier}
		},
		NoHostVolumes: cfg.Remote,
		Kill: func(t *testing.T, id string) {
			if _, err := cli.ContainerRemove(context.Background(), containerName(id), client.ContainerRemoveOptions{Force: true, RemoveVolumes: true}); err != nil {
				t.Fatalf("docker rm: %v", err)
			}
		},
	})
	// Beyond the suite's own check: no volume the sandboxes used is left.
	testutil.WaitFor(t, 10*time.Second, "sandbox volumes to be removed", func() bool {
		res, err := cli.VolumeList(context.Background(), client.VolumeListOptions{Filters: mine})
		return err == nil && len(res.Items) == 0
	})
	res, err := cli.ImageList(context.Background(), client.ImageListOptions{Filters: mine.Add("label", LabelSnapshotID)})
	if err != nil || len(res.Items) != 0 {
		t.Errorf("snapshot images left: %v %v", res.Items, err)
	}
	// Nor an engine shim of a container that is gone (runsc's outlived a
	// container removed while paused).
	var orphans []string
	testutil.WaitFor(t, 15*time.Second, "no containerd shim to outlive its container", func() bool {
		orphans = orphans[:0]
		for id, pid := range engineShims(t) {
			if _, seen := shimsBefore[id]; seen {
				continue
			}
			if _, err := cli.ContainerInspect(context.Background(), id, client.ContainerInspectOptions{}); cerrdefs.IsNotFound(err) {
				orphans = append(orphans, fmt.Sprintf("%s (pid %d)", id, pid))
			}
		}
		return len(orphans) == 0
	})
	if len(orphans) > 0 {
		t.Errorf("containerd shims outlive their containers: %v", orphans)
	}
}

// engineShims maps the container ID of every running containerd shim of
// the Docker engine to the shim's pid.
func engineShims(t *testing.T) map[string]int {
	t.Helper()
	out := map[string]int{}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		if len(args) == 0 || !strings.Contains(args[0], "containerd-shim") || !slices.Contains(args, "moby") {
			continue
		}
		if i := slices.Index(args, "-id"); i >= 0 && i+1 < len(args) {
			out[args[i+1]] = pid
		}
	}
	return out
}

func TestConformance(t *testing.T) { conformance(t, Config{}) }

// TestConformanceRunsc runs the suite with every sandbox in the runsc
// tier: gVisor, the engine's "runsc" runtime (scripts/test.sh adds it).
func TestConformanceRunsc(t *testing.T) {
	requireRunscEngine(t)
	conformanceIn(t, Config{}, api.IsolationRunsc)
}

// requireRunscEngine skips unless the engine has the runsc runtime as the
// runsc tier needs it (fails, under CORRAL_TEST_DOCKER, if it has not).
func requireRunscEngine(t *testing.T) {
	t.Helper()
	dockertest.RequireDocker(t)
	d := newTestDriver(t, Config{})
	if tiers, why := d.Tiers(); !slices.Contains(tiers, api.IsolationRunsc) {
		t.Fatalf("the engine cannot run the runsc tier: %s (scripts/test.sh sets it up)", why[api.IsolationRunsc])
	}
}

// TestRunscTierIsGVisor: a runsc sandbox's kernel is gVisor's Sentry,
// it reports the tier, and a runc sandbox beside it stays on runc.
func TestRunscTierIsGVisor(t *testing.T) {
	requireRunscEngine(t)
	image := dockertest.Busybox(t)
	d := newTestDriver(t, Config{StateDir: t.TempDir()})
	cli := engine(t)
	for _, tier := range []string{api.IsolationRunsc, api.IsolationRunc} {
		id := sandbox.NewID()
		h, err := d.Create(t.Context(), driver.Spec{ID: id, Image: driver.Image{URI: image}, Isolation: tier,
			Entrypoint: []string{"sh", "-c", "dmesg | head -n 3; echo dmesg-done; sleep 3600"}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = d.Destroy(context.Background(), id) })
		if got := d.Isolation(h); got != tier {
			t.Errorf("%s: Isolation = %q", tier, got)
		}
		insp, err := cli.ContainerInspect(t.Context(), containerName(id), client.ContainerInspectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		wantRuntime := "runc"
		if tier == api.IsolationRunsc {
			wantRuntime = "runsc"
		}
		if insp.Container.HostConfig.Runtime != wantRuntime {
			t.Errorf("%s: the engine runs it with %q", tier, insp.Container.HostConfig.Runtime)
		}
		// execd's port is out of the namespace's ephemeral range under
		// either runtime (gVisor ignores the container's sysctl), so a
		// readiness ping is never given it and connects to itself.
		var reserved []byte
		if err := netns.Do("/proc/"+strconv.Itoa(insp.Container.State.Pid)+"/ns/net", func() (err error) {
			reserved, err = os.ReadFile("/proc/sys/net/ipv4/ip_local_reserved_ports")
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if got := strings.TrimSpace(string(reserved)); got != strconv.Itoa(insandbox.ExecdPort) {
			t.Errorf("%s: the namespace's reserved ports are %q, want execd's", tier, got)
		}
		var console []byte
		testutil.WaitFor(t, 10*time.Second, "the entrypoint's dmesg", func() bool {
			console, _, _ = d.Console(t.Context(), id, 4096)
			return strings.Contains(string(console), "dmesg-done")
		})
		if gvisor := strings.Contains(string(console), "gVisor"); gvisor != (tier == api.IsolationRunsc) {
			t.Errorf("%s: dmesg says %q", tier, console)
		}
	}
}

// TestConformanceRemote runs the suite as if the engine were another
// machine's: the binary is copied in and execd's port published.
func TestConformanceRemote(t *testing.T) { conformance(t, Config{Remote: true}) }

// TestServersSharingAnEngineSeeOnlyTheirOwn: List (and so the orphan
// sweep) of one server never shows another server's containers.
func TestServersSharingAnEngineSeeOnlyTheirOwn(t *testing.T) {
	dockertest.RequireDocker(t)
	image := dockertest.Busybox(t)
	a := newTestDriver(t, Config{ServerID: "a" + strings.Repeat("0", 31)})
	b := newTestDriver(t, Config{ServerID: "b" + strings.Repeat("0", 31)})
	id := "dt-share-" + strings.ReplaceAll(t.Name(), "/", "")[:8] + fmt.Sprint(time.Now().UnixNano()%1e6)
	if _, err := a.Create(t.Context(), driver.Spec{ID: id, Image: driver.Image{URI: image}, Entrypoint: []string{"sleep", "3600"}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Destroy(context.Background(), id) })
	has := func(d *Driver) bool {
		ls, err := d.List(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range ls {
			if l.ID == id {
				return true
			}
		}
		return false
	}
	if !has(a) || has(b) {
		t.Errorf("listed by its server: %v, by the other: %v", has(a), has(b))
	}
}

// TestStandInPID1: a program where corral's init goes (as a tenant who
// covered /.corral/corral would put there) answers 200 on execd's port;
// the create is refused as the tenant's failure all the same, since PID 1
// is not the server's corral binary, and the next create works. (Its
// console and exit code are the engine's to bound, not PID 1's; under
// gVisor the host cannot see which program PID 1 runs.)
func TestStandInPID1(t *testing.T) {
	dockertest.RequireDocker(t)
	standIn, err := corraltest.BuildStandIn(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	image := dockertest.Busybox(t)
	d := newTestDriver(t, Config{StateDir: t.TempDir()})
	d.standIn = standIn
	id := sandbox.NewID()
	t.Cleanup(func() { _ = d.Destroy(context.Background(), id) })
	_, err = d.Create(t.Context(), driver.Spec{ID: id, Tenant: "mallory", Image: driver.Image{URI: image}, Entrypoint: []string{"sleep", "3600"}})
	if !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), "PID 1 is not corral's init") {
		t.Fatalf("Create with a stand-in PID 1 = %v, want the tenant's failure", err)
	}
	d.standIn = ""
	other := sandbox.NewID()
	t.Cleanup(func() { _ = d.Destroy(context.Background(), other) })
	if _, err := d.Create(t.Context(), driver.Spec{ID: other, Tenant: "alice", Image: driver.Image{URI: image}, Entrypoint: []string{"sleep", "3600"}}); err != nil {
		t.Fatalf("another tenant's create after the stand-in = %v", err)
	}
}
