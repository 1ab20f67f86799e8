// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

// Command snapshot measures snapshots and forks on the native runtime,
// next to the raw cost of copying the same bytes measured in the same
// run:
//
//   - snapshot time (POST → Ready) and size for a sandbox that changed
//     10 MiB, 200 MiB and 1 GiB, next to `cp -a` and `cp -a
//     --reflink=auto` of its writable layer on the host;
//
//   - restore time to interactive (create from the snapshot → first
//     `true` done), next to the same for a create from the image;
//
//   - fork of 10 and of 100 from the 200 MiB sandbox: from the request to
//     every fork having run `true`.
//
// Needs root and runc; runs on the "host" image, so it needs nothing to
// pull.
//
//	go run ./bench/snapshot [-sizes 10,200,1024] [-forks 10,100] [-n 5]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/bench/internal/benchsrv"
	"github.com/corral-dev/corral/sdk"
)

func main() {
	sizes := flag.String("sizes", "10,200,1024", "MiB changed in the snapshotted sandbox")
	forks := flag.String("forks", "10,100", "fork counts, from the 200 MiB sandbox (or the first size)")
	n := flag.Int("n", 5, "restores to time")
	flag.Parse()
	if err := run(ints(*sizes), ints(*forks), *n); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func ints(s string) []int {
	var out []int
	for _, f := range strings.Split(s, ",") {
		if v, err := strconv.Atoi(strings.TrimSpace(f)); err == nil && v > 0 {
			out = append(out, v)
		}
	}
	return out
}

type row struct {
	mib               int
	snap, cp, reflink time.Duration
	layerSize         int64
}

func run(sizes, forkCounts []int, n int) error {
	srv, err := benchsrv.Start("--runtime", "oci")
	if err != nil {
		return err
	}
	defer srv.Close()
	c := srv.Admin
	ctx := context.Background()
	var rows []row
	forkFrom, forkMiB := "", 0
	var created []string
	defer func() {
		for _, id := range created {
			_ = c.DeleteSandbox(ctx, id)
		}
	}()
	for _, mib := range sizes {
		id, err := create(ctx, c, api.CreateSandboxRequest{Image: &api.ImageSpec{URI: "host"}})
		if err != nil {
			return err
		}
		created = append(created, id)
		if _, err := sh(ctx, c, id, fmt.Sprintf("mkdir -p /data && dd if=/dev/urandom of=/data/blob bs=1M count=%d 2>/dev/null && sync", mib)); err != nil {
			return err
		}
		if forkFrom == "" || mib == 200 {
			forkFrom, forkMiB = id, mib
		}
		r := row{mib: mib}
		upper := filepath.Join(srv.Data, "oci", "sandboxes", id, "upper")
		if r.cp, err = timeCmd("cp", "-a", upper, filepath.Join(srv.Data, "cp-baseline")); err != nil {
			return err
		}
		if r.reflink, err = timeCmd("cp", "-a", "--reflink=auto", upper, filepath.Join(srv.Data, "reflink-baseline")); err != nil {
			return err
		}
		_ = os.RemoveAll(filepath.Join(srv.Data, "cp-baseline"))
		_ = os.RemoveAll(filepath.Join(srv.Data, "reflink-baseline"))
		start := time.Now()
		sn, err := c.CreateSnapshot(ctx, id, "bench")
		if err != nil {
			return err
		}
		if err := waitReady(ctx, c, sn.ID); err != nil {
			return err
		}
		r.snap = time.Since(start)
		r.layerSize = du(filepath.Join(srv.Data, "oci", "snapshots", sn.ID))
		rows = append(rows, r)
		if mib == sizes[0] {
			if err := restores(ctx, c, sn.ID, n); err != nil {
				return err
			}
		}
		if err := c.DeleteSnapshot(ctx, sn.ID); err != nil {
			return err
		}
	}
	fmt.Println("\n| changed | snapshot (POST → Ready) | `cp -a` of the layer | snapshot vs `cp -a` | `cp -a --reflink=auto` | snapshot on disk |")
	fmt.Println("|---:|---:|---:|---:|---:|---:|")
	for _, r := range rows {
		fmt.Printf("| %d MiB | %s | %s | %.2f× | %s | %d MiB |\n", r.mib, round(r.snap), round(r.cp),
			float64(r.snap)/float64(r.cp), round(r.reflink), r.layerSize>>20)
	}
	fmt.Println()
	fmt.Println("| fork | request → every fork ran `true` | per fork |")
	fmt.Println("|---:|---:|---:|")
	for _, count := range forkCounts {
		d, err := fork(ctx, c, forkFrom, count)
		if err != nil {
			return err
		}
		fmt.Printf("| %d from %d MiB | %s | %s |\n", count, forkMiB, round(d), round(d/time.Duration(count)))
	}
	return nil
}

// restores times n creates from the snapshot and n from the image, each
// to its first `true`.
func restores(ctx context.Context, c *sdk.Client, snapID string, n int) error {
	hour := int64(3600)
	var fromSnap, fromImage []time.Duration
	for range n {
		for _, req := range []api.CreateSandboxRequest{{SnapshotID: snapID, Timeout: &hour}, {Image: &api.ImageSpec{URI: "host"}, Timeout: &hour}} {
			start := time.Now()
			id, err := create(ctx, c, req)
			if err != nil {
				return err
			}
			if _, err := sh(ctx, c, id, "true"); err != nil {
				return err
			}
			d := time.Since(start)
			if req.SnapshotID != "" {
				fromSnap = append(fromSnap, d)
			} else {
				fromImage = append(fromImage, d)
			}
			if err := c.DeleteSandbox(ctx, id); err != nil {
				return err
			}
		}
	}
	fmt.Printf("restore → first `true` (p50 of %d): from the snapshot %s, from the image %s (%.2f×)\n",
		n, round(p50(fromSnap)), round(p50(fromImage)), float64(p50(fromSnap))/float64(p50(fromImage)))
	return nil
}

// fork times a fork of count from id until each fork has run `true`.
func fork(ctx context.Context, c *sdk.Client, id string, count int) (time.Duration, error) {
	start := time.Now()
	res, err := c.Fork(ctx, id, api.ForkRequest{Count: count})
	if err != nil {
		return 0, err
	}
	var wg sync.WaitGroup
	errs := make([]error, len(res.Sandboxes))
	for i, sb := range res.Sandboxes {
		wg.Go(func() { _, errs[i] = sh(ctx, c, sb.ID, "true") })
	}
	wg.Wait()
	d := time.Since(start)
	for _, sb := range res.Sandboxes {
		_ = c.DeleteSandbox(ctx, sb.ID)
	}
	return d, errors.Join(errs...)
}

func create(ctx context.Context, c *sdk.Client, req api.CreateSandboxRequest) (string, error) {
	if req.Timeout == nil {
		hour := int64(3600)
		req.Timeout = &hour
	}
	req.Entrypoint = []string{"sleep", "infinity"}
	sb, err := c.CreateSandbox(ctx, req, sdk.CreateOptions{})
	if err != nil {
		return "", err
	}
	return sb.ID, nil
}

func sh(ctx context.Context, c *sdk.Client, id, cmd string) (string, error) {
	x, err := c.Sandbox(ctx, id, sdk.SandboxOptions{})
	if err != nil {
		return "", err
	}
	out, errOut, code, err := x.Run(ctx, cmd, sdk.CommandOptions{})
	if err == nil && code != 0 {
		err = fmt.Errorf("%q: exit %d: %s", cmd, code, errOut)
	}
	return out, err
}

func waitReady(ctx context.Context, c *sdk.Client, id string) error {
	for deadline := time.Now().Add(10 * time.Minute); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
		sn, err := c.GetSnapshot(ctx, id)
		if err != nil {
			return err
		}
		switch sn.Status.State {
		case api.SnapshotReady:
			return nil
		case api.SnapshotFailed:
			return fmt.Errorf("snapshot failed: %s", sn.Status.Message)
		}
	}
	return errors.New("snapshot never became Ready")
}

func timeCmd(name string, args ...string) (time.Duration, error) {
	start := time.Now()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		return 0, fmt.Errorf("%s: %v %s", name, err, out)
	}
	return time.Since(start), nil
}

// du is the space a tree takes on disk.
func du(dir string) int64 {
	out, err := exec.Command("du", "-sb", dir).Output()
	if err != nil {
		return 0
	}
	f := strings.Fields(string(out))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseInt(f[0], 10, 64)
	return v
}

func round(d time.Duration) time.Duration { return d.Round(100 * time.Microsecond) }

func p50(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}
