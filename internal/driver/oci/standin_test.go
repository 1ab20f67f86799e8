// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package oci

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/errdefs"
	"github.com/corral-dev/corral/internal/driver"
	"github.com/corral-dev/corral/internal/sandbox"
	"github.com/corral-dev/corral/internal/testutil/corraltest"
)

// TestStandInPID1: a program where corral's init goes (as a tenant who
// covered /.corral/corral would put there) floods the console, writes
// without end to the exit file and answers 200 on execd's port. The
// host's bounds hold all the same: the console log stays under its
// limit, the exit file (which the server writes from the exit pipe) holds
// a code at most, and the runtime tmpfs every sandbox shares does not
// grow. On runc the create is refused as the tenant's
// failure; under gVisor the host cannot see which program PID 1 runs
// (docs/security.md), and the bounds are what is checked. Another
// sandbox's create works after.
func TestStandInPID1(t *testing.T) {
	requireRunc(t)
	standIn, err := corraltest.BuildStandIn(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		userns bool
		tier   string
	}{{"runc", false, api.IsolationRunc}, {"userns", true, api.IsolationRunc}, {"runsc", false, api.IsolationRunsc}} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.tier == api.IsolationRunsc {
				requireRunsc(t)
			}
			root := t.TempDir()
			t.Cleanup(func() { _ = UnmountRunDir(root) })
			d := newTestDriverWith(t, Config{Root: root, UserNamespaces: tc.userns})
			d.standIn = standIn
			id := sandbox.NewID()
			used := func(dir string) int64 {
				var st unix.Statfs_t
				if err := unix.Statfs(dir, &st); err != nil {
					return 0
				}
				return int64(st.Blocks-st.Bfree) * st.Bsize
			}
			size := func(p string) int64 {
				fi, err := os.Stat(p)
				if err != nil {
					return 0
				}
				return fi.Size()
			}
			base := used(runDir(root))
			var mu sync.Mutex
			var maxConsole, maxExit, maxRun int64
			stop := make(chan struct{})
			var wg sync.WaitGroup
			wg.Go(func() {
				for {
					mu.Lock()
					maxConsole = max(maxConsole, size(filepath.Join(d.diskDir(id), consoleFile)))
					maxExit = max(maxExit, size(filepath.Join(d.bundleDir(id), exitFile)))
					maxRun = max(maxRun, used(runDir(root))-base)
					mu.Unlock()
					select {
					case <-stop:
						return
					case <-time.After(5 * time.Millisecond):
					}
				}
			})
			_, err := d.Create(t.Context(), driver.Spec{ID: id, Tenant: "mallory", Image: driver.Image{URI: HostImage},
				Entrypoint: []string{"sleep", "infinity"}, Isolation: tc.tier})
			if tc.tier == api.IsolationRunsc {
				if err != nil {
					t.Fatalf("Create = %v", err)
				}
				time.Sleep(time.Second) // flooding all the while
			} else if !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), "PID 1 is not corral's init") {
				t.Fatalf("Create with a stand-in PID 1 = %v, want the tenant's failure", err)
			}
			close(stop)
			wg.Wait()
			if err := d.Destroy(context.Background(), id); err != nil {
				t.Fatal(err)
			}
			if maxConsole == 0 || maxConsole > ConsoleLimit+256 {
				t.Errorf("the console log reached %d bytes (limit %d; 0: the flood never reached it)", maxConsole, ConsoleLimit)
			}
			if maxExit > 32 {
				t.Errorf("the exit file reached %d bytes", maxExit)
			}
			if maxRun > 1<<20 {
				t.Errorf("the runtime tmpfs every sandbox shares grew by %d bytes", maxRun)
			}
			t.Logf("most seen: console %d bytes, exit file %d bytes, runtime tmpfs +%d bytes", maxConsole, maxExit, maxRun)
			// Another tenant's sandbox, with corral's own init.
			d.standIn = ""
			other := sandbox.NewID()
			if _, err := d.Create(t.Context(), driver.Spec{ID: other, Tenant: "alice", Image: driver.Image{URI: HostImage},
				Entrypoint: []string{"sleep", "infinity"}, Isolation: tc.tier}); err != nil {
				t.Fatalf("another tenant's create after the stand-in = %v", err)
			}
			if err := d.Destroy(context.Background(), other); err != nil {
				t.Fatal(err)
			}
			assertNoLeaks(t, root)
		})
	}
}

// TestRunscExitComesThroughThePipe: the pinned runsc passes PID 1 the exit
// pipe (--pass-fd), so the exit code comes back as a runc sandbox's does
// and nothing is written in the sandbox's root for it.
func TestRunscExitComesThroughThePipe(t *testing.T) {
	requireRunsc(t)
	root := t.TempDir()
	t.Cleanup(func() { _ = UnmountRunDir(root) })
	d := newTestDriverWith(t, Config{Root: root})
	if !d.runscPassFD {
		t.Fatalf("the runsc on PATH (%s) has no --pass-fd: not the one scripts/runtimes.sh pins", d.runsc.Command)
	}
	id := sandbox.NewID()
	if _, err := d.Create(t.Context(), driver.Spec{ID: id, Image: driver.Image{URI: HostImage},
		Entrypoint: []string{"sh", "-c", "sleep 0.3; exit 7"}, Isolation: api.IsolationRunsc}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Destroy(context.Background(), id) })
	exit, err := d.Wait(t.Context(), id)
	if err != nil || exit.Code != 7 {
		t.Fatalf("Wait = %+v, %v; want code 7", exit, err)
	}
	if _, err := os.Lstat(filepath.Join(d.diskDir(id), "rootfs", runscExit)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s in the sandbox's root: %v", runscExit, err)
	}
	if b, err := os.ReadFile(filepath.Join(d.bundleDir(id), exitFile)); err != nil || strings.TrimSpace(string(b)) != "7" {
		t.Errorf("the bundle's exit file: %q, %v", b, err)
	}
}
