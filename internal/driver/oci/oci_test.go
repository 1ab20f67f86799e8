// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package oci

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corral-dev/corral/internal/driver"
	"github.com/corral-dev/corral/internal/driver/drivertest"
	"github.com/corral-dev/corral/internal/driver/netns"
	"github.com/corral-dev/corral/internal/testutil"
)

var corralBin string

func TestMain(m *testing.M) { os.Exit(testutil.RunWithCorral(m, &corralBin)) }

// requireRunc gates the tier and fails when runc is missing in CI.
func requireRunc(t *testing.T) {
	t.Helper()
	testutil.RequireRoot(t)
	if _, err := exec.LookPath("runc"); err != nil {
		t.Fatalf("runc is not installed (apt-get install runc): %v", err)
	}
}

func newTestDriver(t *testing.T, root string) *Driver {
	t.Helper()
	d, err := New(Config{Root: root, CorralBinary: corralBin, AllowHostImage: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

func TestConformance(t *testing.T) {
	requireRunc(t)
	root := t.TempDir()
	t.Cleanup(func() { _ = UnmountRunDir(root) })
	drivertest.Run(t, drivertest.Harness{
		New: func(t *testing.T) driver.Driver { return newTestDriver(t, root) },
		Spec: func(*testing.T) driver.Spec {
			return driver.Spec{Image: driver.Image{URI: HostImage}, Entrypoint: []string{"sleep", "infinity"}, Labels: map[string]string{"team": "a"}}
		},
		ExitSpec: func(_ *testing.T, code int) driver.Spec {
			return driver.Spec{Image: driver.Image{URI: HostImage}, Entrypoint: []string{"sh", "-c", fmt.Sprintf("sleep 0.5; exit %d", code)}}
		},
		Kill: func(t *testing.T, id string) {
			out, err := exec.Command("runc", "--root", filepath.Join(root, "run", "runc"), "delete", "--force", id).CombinedOutput()
			if err != nil {
				t.Fatalf("runc delete: %v %s", err, out)
			}
		},
	})
	assertNoLeaks(t, root)
}

// assertNoLeaks checks that nothing of any sandbox is left: runc
// containers, mounts, network namespaces, bundles and cgroups.
func assertNoLeaks(t *testing.T, root string) {
	t.Helper()
	out, err := exec.Command("runc", "--root", filepath.Join(root, "run", "runc"), "list", "-q").Output()
	if err != nil || strings.TrimSpace(string(out)) != "" {
		t.Errorf("leak: runc containers %q (%v)", out, err)
	}
	f, _ := os.Open("/proc/self/mountinfo")
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fields := strings.Fields(sc.Text()); len(fields) > 4 && strings.HasPrefix(fields[4], root) && fields[4] != filepath.Join(root, "run") {
			t.Errorf("leak: mount %s", fields[4])
		}
	}
	for _, sub := range []string{"sandboxes", "run/bundles", "run/netns"} {
		if entries, _ := os.ReadDir(filepath.Join(root, sub)); len(entries) > 0 {
			t.Errorf("leak: %s has %d entries", sub, len(entries))
		}
	}
	cgroups, _ := filepath.Glob("/sys/fs/cgroup/*/corral/dt*")
	if len(cgroups) > 0 {
		t.Errorf("leak: cgroups %v", cgroups)
	}
}

// TestNetnsKeepsExecdPortOutOfTheEphemeralRange: a readiness ping must
// never be given execd's port as its own (it would connect to itself and
// hold the port execd is about to bind).
func TestNetnsKeepsExecdPortOutOfTheEphemeralRange(t *testing.T) {
	testutil.RequireRoot(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "ns")
	if err := createNetns(path); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = removeNetns(path) })
	var got []byte
	if err := netns.Do(path, func() error {
		var err error
		got, err = os.ReadFile("/proc/sys/net/ipv4/ip_local_reserved_ports")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(string(got)) != ReservedPorts {
		t.Errorf("reserved ports in a sandbox namespace = %q, want %s", got, ReservedPorts)
	}
}
