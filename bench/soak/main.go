// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

// Command soak runs workers that each repeat create → command → upload
// and download → pause → resume → delete against one server for a
// duration, and every interval prints the leak accounting: the server's
// goroutines, open descriptors and resident memory (from its /metrics),
// and this machine's mounts, network namespaces and sandbox cgroups, next
// to the cycles done and the errors seen. A leak shows as a column that
// grows while the cycle count does. Needs root and runc (native runtime,
// `host` image).
//
//	go run ./bench/soak [-workers 4] [-duration 30m] [-interval 1m]
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/bench/internal/benchsrv"
	"github.com/corral-dev/corral/sdk"
)

func main() {
	workers := flag.Int("workers", 4, "concurrent workers")
	duration := flag.Duration("duration", 30*time.Minute, "how long to run")
	interval := flag.Duration("interval", time.Minute, "how often to print the accounting")
	image := flag.String("image", "host", "image of every sandbox")
	flag.Parse()
	if *workers < 1 || *duration <= 0 || *interval <= 0 {
		fmt.Fprintln(os.Stderr, "soak: -workers must be at least 1, -duration and -interval positive")
		os.Exit(2)
	}
	if err := run(*workers, *duration, *interval, *image); err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(1)
	}
}

// sample is one line of the accounting.
type sample struct {
	at                          time.Duration
	cycles, errs                int64
	goroutines, fds, rssMiB     float64
	mounts, netns, cgroups, run int
}

func run(workers int, duration, interval time.Duration, image string) error {
	srv, err := benchsrv.Start("--runtime", "oci")
	if err != nil {
		return err
	}
	defer srv.Close()
	c, data := srv.Admin, srv.Data
	var cycles, errs atomic.Int64
	var lastErr atomic.Value
	ctx, cancel := context.WithTimeout(context.Background(), duration)
	defer cancel()
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for ctx.Err() == nil {
				if err := cycle(ctx, c, image); err != nil {
					if ctx.Err() != nil {
						return
					}
					errs.Add(1)
					lastErr.Store(err.Error())
					continue
				}
				cycles.Add(1)
			}
		})
	}
	start := time.Now()
	fmt.Printf("soak: %d workers, %s, image %s, native runtime\n\n", workers, duration, image)
	fmt.Println("| at | cycles | errors | server goroutines | server fds | server RSS MiB | mounts | netns | sandbox cgroups | sandboxes |")
	fmt.Println("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	print := func() {
		s := account(srv, c, data)
		s.at, s.cycles, s.errs = time.Since(start).Round(time.Second), cycles.Load(), errs.Load()
		fmt.Printf("| %s | %d | %d | %.0f | %.0f | %.1f | %d | %d | %d | %d |\n",
			s.at, s.cycles, s.errs, s.goroutines, s.fds, s.rssMiB, s.mounts, s.netns, s.cgroups, s.run)
	}
	print()
	tick := time.NewTicker(interval)
	defer tick.Stop()
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case <-tick.C:
			print()
		}
	}
	wg.Wait()
	// A create the deadline cut on the client's side still completes on
	// the server's (it is not left half-made): delete what is left, then
	// everything should be back to where it started.
	if l, err := c.ListSandboxes(context.Background(), sdk.ListOptions{PageSize: 200}); err == nil {
		for _, sb := range l.Items {
			_ = c.DeleteSandbox(context.Background(), sb.ID)
		}
	}
	time.Sleep(2 * time.Second)
	print()
	if e, ok := lastErr.Load().(string); ok {
		fmt.Printf("\nlast error: %s\n", e)
	}
	return nil
}

// cycle is one sandbox's life.
func cycle(ctx context.Context, c *sdk.Client, image string) (err error) {
	timeout := int64(600)
	sb, err := c.CreateSandbox(ctx, api.CreateSandboxRequest{Image: &api.ImageSpec{URI: image}, Timeout: &timeout,
		Entrypoint: []string{"sleep", "3600"}}, sdk.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create: %w", err)
	}
	defer func() {
		if derr := c.DeleteSandbox(context.WithoutCancel(ctx), sb.ID); derr != nil && err == nil {
			err = fmt.Errorf("delete: %w", derr)
		}
	}()
	x, err := c.Sandbox(ctx, sb.ID, sdk.SandboxOptions{})
	if err != nil {
		return err
	}
	if out, _, code, err := x.Run(ctx, "echo soak; head -c 100000 /dev/zero | wc -c", sdk.CommandOptions{}); err != nil || code != 0 || out != "soak\n100000\n" {
		return fmt.Errorf("command: %q %d %v", out, code, err)
	}
	body := bytes.Repeat([]byte("corral "), 20000)
	if err := x.Upload(ctx, "/tmp/soak.txt", bytes.NewReader(body), 0o644); err != nil {
		return fmt.Errorf("upload: %w", err)
	}
	var got bytes.Buffer
	if _, err := x.Download(ctx, "/tmp/soak.txt", &got); err != nil || !bytes.Equal(got.Bytes(), body) {
		return fmt.Errorf("download: %d bytes, %v", got.Len(), err)
	}
	if err := c.PauseSandbox(ctx, sb.ID); err != nil {
		return fmt.Errorf("pause: %w", err)
	}
	if err := c.ResumeSandbox(ctx, sb.ID); err != nil {
		return fmt.Errorf("resume: %w", err)
	}
	return nil
}

// account reads the server's gauges and counts what the machine holds.
func account(srv *benchsrv.Server, c *sdk.Client, data string) sample {
	var s sample
	g := srv.Gauges()
	s.goroutines, s.fds, s.rssMiB = g["go_goroutines"], g["process_open_fds"], g["process_resident_memory_bytes"]/(1<<20)
	if b, err := os.ReadFile("/proc/self/mountinfo"); err == nil {
		s.mounts = bytes.Count(b, []byte("\n"))
	}
	// The machine's network namespaces: each sandbox's is held by a
	// descriptor of the server's and by its processes, not pinned.
	nets := map[string]bool{}
	if procs, err := os.ReadDir("/proc"); err == nil {
		for _, p := range procs {
			if ns, err := os.Readlink(filepath.Join("/proc", p.Name(), "ns", "net")); err == nil {
				nets[ns] = true
			}
		}
	}
	fdDir := filepath.Join("/proc", strconv.Itoa(srv.Pid()), "fd")
	if fds, err := os.ReadDir(fdDir); err == nil {
		for _, fd := range fds {
			if l, err := os.Readlink(filepath.Join(fdDir, fd.Name())); err == nil && strings.HasPrefix(l, "net:[") {
				nets[l] = true
			}
		}
	}
	s.netns = len(nets)
	// Each sandbox's cgroups, counted in every hierarchy (v1) or once (v2).
	if m, err := filepath.Glob("/sys/fs/cgroup/*/corral/*"); err == nil {
		for _, p := range m {
			if fi, err := os.Stat(p); err == nil && fi.IsDir() {
				s.cgroups++
			}
		}
	}
	if l, err := c.ListSandboxes(context.Background(), sdk.ListOptions{PageSize: 200}); err == nil {
		s.run = len(l.Items)
	}
	return s
}
