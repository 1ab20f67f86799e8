// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

// Command load fires concurrent creates from several tenants at one
// server and reports, per tenant and overall, the create latency (p50,
// p99), when each tenant's last create finished (a starved tenant
// finishes last by far), and every answer that was not a success; then it
// deletes everything. Needs root and runc (the native runtime, `host`
// image), or a Docker engine with -runtime docker -image REF.
//
//	go run ./bench/load [-n 100] [-tenants 4] [-runtime oci]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/bench/internal/benchsrv"
	"github.com/corral-dev/corral/sdk"
)

func main() {
	n := flag.Int("n", 100, "creates in all, fired at once")
	tenants := flag.Int("tenants", 4, "tenants sharing them")
	runtime := flag.String("runtime", "oci", "oci or docker")
	image := flag.String("image", "host", "image of every sandbox")
	flag.Parse()
	if *n < 1 || *tenants < 1 || *tenants > *n {
		fmt.Fprintln(os.Stderr, "load: need 1 <= -tenants <= -n")
		os.Exit(2)
	}
	if err := run(*runtime, *image, *n, *tenants); err != nil {
		fmt.Fprintln(os.Stderr, "load:", err)
		os.Exit(1)
	}
}

type result struct {
	tenant int
	took   time.Duration
	done   time.Duration // since the start of the burst
	id     string
	err    error
}

func run(runtime, image string, n, tenants int) error {
	srv, err := benchsrv.Start("--runtime", runtime)
	if err != nil {
		return err
	}
	defer srv.Close()
	ctx := context.Background()
	admin := srv.Admin
	clients := make([]*sdk.Client, tenants)
	for i := range clients {
		k, err := admin.CreateAPIKey(ctx, api.CreateAPIKeyRequest{Tenant: fmt.Sprintf("tenant-%d", i), Name: "load"})
		if err != nil {
			return err
		}
		// One attempt: a retry would hide the answer being measured.
		if clients[i], err = sdk.New(sdk.WithBaseURL(srv.URL), sdk.WithAPIKey(k.Key), sdk.WithRetry(sdk.RetryPolicy{Attempts: 1})); err != nil {
			return err
		}
	}
	timeout := int64(600)
	req := api.CreateSandboxRequest{Image: &api.ImageSpec{URI: image}, Timeout: &timeout, Entrypoint: []string{"sleep", "3600"}}
	// A warm-up create pays the one-time costs (the image's first use).
	if sb, err := clients[0].CreateSandbox(ctx, req, sdk.CreateOptions{}); err != nil {
		return fmt.Errorf("warm-up create: %w", err)
	} else if err := clients[0].DeleteSandbox(ctx, sb.ID); err != nil {
		return err
	}

	results := make([]result, n)
	var wg sync.WaitGroup
	gate := make(chan struct{})
	start := time.Now()
	for i := range n {
		t := i % tenants
		wg.Go(func() {
			<-gate
			t0 := time.Now()
			sb, err := clients[t].CreateSandbox(ctx, req, sdk.CreateOptions{})
			r := result{tenant: t, took: time.Since(t0), done: time.Since(start), err: err}
			if err == nil {
				r.id = sb.ID
			}
			results[i] = r
		})
	}
	start = time.Now()
	close(gate)
	wg.Wait()
	wall := time.Since(start)

	fmt.Printf("%d creates at once from %d tenants, runtime %s, image %s; all answered in %s\n\n", n, tenants, runtime, image, round(wall))
	fmt.Println("| tenant | created | failed | p50 | p99 | last done |")
	fmt.Println("|---|---:|---:|---:|---:|---:|")
	statuses := map[int]int{}
	var all []time.Duration
	var lasts []time.Duration
	for t := range tenants {
		var took []time.Duration
		var last time.Duration
		failed := 0
		for _, r := range results {
			if r.tenant != t {
				continue
			}
			if r.err != nil {
				failed++
				var ae *sdk.APIError
				if errors.As(r.err, &ae) {
					statuses[ae.Status]++
				} else {
					statuses[0]++
				}
				continue
			}
			took = append(took, r.took)
			last = max(last, r.done)
		}
		all = append(all, took...)
		lasts = append(lasts, last)
		fmt.Printf("| tenant-%d | %d | %d | %s | %s | %s |\n", t, len(took), failed, round(pct(took, .5)), round(pct(took, .99)), round(last))
	}
	fmt.Printf("| all | %d | %d | %s | %s | %s |\n", len(all), n-len(all), round(pct(all, .5)), round(pct(all, .99)), round(slices.Max(lasts)))
	fmt.Printf("\nfairness: the first tenant done finished at %s, the last at %s (%.2f×)\n",
		round(slices.Min(lasts)), round(slices.Max(lasts)), float64(slices.Max(lasts))/float64(max(slices.Min(lasts), 1)))
	if len(statuses) > 0 {
		fmt.Printf("failed answers by status (0: no answer): %v\n", statuses)
	}

	for _, r := range results {
		if r.id != "" {
			if err := clients[r.tenant].DeleteSandbox(ctx, r.id); err != nil {
				fmt.Fprintln(os.Stderr, "load: delete", r.id, err)
			}
		}
	}
	if statuses[500] > 0 {
		return fmt.Errorf("%d creates answered 500", statuses[500])
	}
	return nil
}

func round(d time.Duration) time.Duration { return d.Round(time.Millisecond) }

func pct(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*q))]
}
