// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

// Command events measures the platform layer of a real `corral serve`
// (fake runtime, real SQLite), from a separate process, against raw
// baselines measured in the same run:
//
//   - event → webhook: the time from an event's record to its signed POST
//     reaching a loopback receiver, beside a bare loopback POST;
//
//   - the event stream: events written as fast as the server takes them,
//     read by several followers, none lost or repeated;
//
//   - admission: tenants' creates queued behind the server's capacity,
//     the wait of each tenant's creates.
//
//     go run ./bench/events [-webhooks 200] [-stream 5000] [-followers 10] [-tenants 4] [-creates 100] [-capacity 8]
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/internal/testutil/corraltest"
	"github.com/corral-dev/corral/sdk"
)

const key = "ck_bench-admin-key-0123456789"

func main() {
	hooks := flag.Int("webhooks", 200, "events timed to a webhook receiver")
	stream := flag.Int("stream", 5000, "events written for the stream phase")
	followers := flag.Int("followers", 10, "followers of the stream")
	tenants := flag.Int("tenants", 4, "tenants of the admission phase")
	creates := flag.Int("creates", 100, "creates per tenant in the admission phase")
	capacity := flag.Int("capacity", 8, "the server's capacity in the admission phase")
	flag.Parse()
	if err := run(*hooks, *stream, *followers, *tenants, *creates, *capacity); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func pct(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*p))]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)) }

func run(hooks, stream, followers, tenants, creates, capacity int) error {
	dir, err := os.MkdirTemp("", "corral-bench-events-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin, err := corraltest.Build(dir)
	if err != nil {
		return err
	}
	srv, err := corraltest.Serve(bin, dir+"/data", key, "--runtime", "fake", "--webhook-allow-cidr", "127.0.0.0/8",
		"--capacity", fmt.Sprint(capacity), "--quota-policy", "queue", "--quota-queue-timeout", "10m")
	if err != nil {
		return err
	}
	defer srv.Stop()
	c, err := sdk.New(sdk.WithBaseURL(srv.URL), sdk.WithAPIKey(key))
	if err != nil {
		return err
	}
	ctx := context.Background()
	if err := webhookPhase(ctx, c, hooks); err != nil {
		return fmt.Errorf("webhooks: %w", err)
	}
	if err := streamPhase(ctx, c, srv.URL, stream, followers); err != nil {
		return fmt.Errorf("stream: %w", err)
	}
	if err := admissionPhase(ctx, c, srv.URL, tenants, creates, capacity); err != nil {
		return fmt.Errorf("admission: %w", err)
	}
	return nil
}

func timeout(s int64) *int64 { return &s }

func fakeSandbox() api.CreateSandboxRequest {
	return api.CreateSandboxRequest{Image: &api.ImageSpec{URI: "fake:ok"}, Timeout: timeout(3600),
		ResourceLimits: map[string]string{"cpu": "100m", "memory": "64Mi"}}
}

// webhookPhase renews one sandbox n times, one at a time, and times each
// renewed event from its record to its arrival; the baseline is a bare
// POST of the same body on loopback.
func webhookPhase(ctx context.Context, c *sdk.Client, n int) error {
	var mu sync.Mutex
	arrived := map[string]time.Time{}
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		at := time.Now()
		body, _ := io.ReadAll(r.Body)
		var ev api.Event
		_ = json.Unmarshal(body, &ev)
		mu.Lock()
		arrived[ev.ID] = at
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	defer recv.Close()
	wh, err := c.CreateWebhook(ctx, api.WebhookRequest{URL: recv.URL, Types: []string{api.EventSandboxRenewed}})
	if err != nil {
		return err
	}
	defer func() { _ = c.DeleteWebhook(ctx, wh.ID) }()
	sb, err := c.CreateSandbox(ctx, fakeSandbox(), sdk.CreateOptions{})
	if err != nil {
		return err
	}
	defer func() { _ = c.DeleteSandbox(ctx, sb.ID) }()
	st, err := c.Events(ctx, sdk.EventStreamOptions{SandboxID: sb.ID, Types: []string{api.EventSandboxRenewed}})
	if err != nil {
		return err
	}
	defer st.Close()
	var lat []time.Duration
	for i := range n {
		if _, err := c.RenewSandbox(ctx, sb.ID, time.Now().Add(2*time.Hour+time.Duration(i)*time.Second)); err != nil {
			return err
		}
		ev, err := st.Next()
		if err != nil {
			return err
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			mu.Lock()
			at, ok := arrived[ev.ID]
			mu.Unlock()
			if ok {
				lat = append(lat, at.Sub(ev.Time))
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("event %s not delivered in 10s", ev.ID)
			}
			time.Sleep(200 * time.Microsecond)
		}
	}
	// Raw: the same POST, straight.
	hc := &http.Client{}
	var raw []time.Duration
	for range n {
		start := time.Now()
		res, err := hc.Post(recv.URL, "application/json", http.NoBody)
		if err != nil {
			return err
		}
		res.Body.Close()
		raw = append(raw, time.Since(start))
	}
	fmt.Printf("event → webhook delivered (%d events, loopback receiver)\n", n)
	fmt.Printf("  corral  p50 %s  p90 %s  p99 %s\n", ms(pct(lat, .5)), ms(pct(lat, .9)), ms(pct(lat, .99)))
	fmt.Printf("  raw POST p50 %s  p90 %s  p99 %s\n", ms(pct(raw, .5)), ms(pct(raw, .9)), ms(pct(raw, .99)))
	fmt.Printf("  ratio p50 %.1fx\n", float64(pct(lat, .5))/float64(pct(raw, .5)))
	return nil
}

// streamPhase writes n renewed events from 8 writers (a sandbox each)
// as fast as the server takes them while followers read the stream; each
// follower must read every event once, in order.
func streamPhase(ctx context.Context, c *sdk.Client, url string, n, followers int) error {
	// A sandbox per writer: one sandbox's changes are made one at a time.
	md := map[string]string{"bench": "stream"}
	var sbs []string
	for range 8 {
		req := fakeSandbox()
		req.Metadata = md
		sb, err := c.CreateSandbox(ctx, req, sdk.CreateOptions{})
		if err != nil {
			return err
		}
		sbs = append(sbs, sb.ID)
	}
	defer func() {
		for _, id := range sbs {
			_ = c.DeleteSandbox(ctx, id)
		}
	}()
	type result struct {
		got  int
		bad  error
		last time.Time
	}
	results := make([]result, followers)
	var wg sync.WaitGroup
	for i := range followers {
		fc, _ := sdk.New(sdk.WithBaseURL(url), sdk.WithAPIKey(key))
		st, err := fc.Events(ctx, sdk.EventStreamOptions{Metadata: md, Types: []string{api.EventSandboxRenewed}, Limit: n})
		if err != nil {
			return err
		}
		wg.Go(func() {
			defer st.Close()
			prev := int64(0)
			for {
				ev, err := st.Next()
				if errors.Is(err, io.EOF) {
					return
				}
				if err != nil {
					results[i].bad = err
					return
				}
				var id int64
				fmt.Sscan(ev.ID, &id)
				if id <= prev {
					results[i].bad = fmt.Errorf("event %d after %d", id, prev)
					return
				}
				prev = id
				results[i].got++
				results[i].last = time.Now()
			}
		})
	}
	var next atomic.Int64
	start := time.Now()
	var writers sync.WaitGroup
	var werr atomic.Value
	for w := range 8 {
		writers.Go(func() {
			for {
				i := next.Add(1)
				if i > int64(n) {
					return
				}
				if _, err := c.RenewSandbox(ctx, sbs[w], time.Now().Add(2*time.Hour+time.Duration(i)*time.Millisecond)); err != nil {
					werr.Store(err)
					return
				}
			}
		})
	}
	writers.Wait()
	written := time.Since(start)
	if err, _ := werr.Load().(error); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		return errors.New("followers did not finish within a minute")
	}
	var lastRead time.Time
	for i, r := range results {
		if r.bad != nil {
			return fmt.Errorf("follower %d: %w", i, r.bad)
		}
		if r.got != n {
			return fmt.Errorf("follower %d read %d of %d events", i, r.got, n)
		}
		if r.last.After(lastRead) {
			lastRead = r.last
		}
	}
	fmt.Printf("event stream: %d events written by 8 writers in %v (%.0f events/s), %d followers\n", n, written.Round(time.Millisecond),
		float64(n)/written.Seconds(), followers)
	fmt.Printf("  every follower read all %d, in order, none twice; the last read %v after the last write\n", n, lastRead.Sub(start.Add(written)).Round(time.Millisecond))
	return nil
}

// admissionPhase: tenants each send creates at once against the
// server's capacity (policy queue); every sandbox is deleted 20 ms after
// it runs, freeing its slot. Each create's time to its answer is its
// queue wait plus the create.
func admissionPhase(ctx context.Context, admin *sdk.Client, url string, tenants, creates, capacity int) error {
	waits := make([][]time.Duration, tenants)
	var wg sync.WaitGroup
	var firstErr atomic.Value
	start := time.Now()
	for t := range tenants {
		k, err := admin.CreateAPIKey(ctx, api.CreateAPIKeyRequest{Tenant: fmt.Sprintf("bench%d", t), Name: "bench"})
		if err != nil {
			return err
		}
		c, _ := sdk.New(sdk.WithBaseURL(url), sdk.WithAPIKey(k.Key), sdk.WithRetry(sdk.RetryPolicy{Attempts: 1}))
		var mu sync.Mutex
		for range creates {
			wg.Go(func() {
				t0 := time.Now()
				sb, err := c.CreateSandbox(ctx, fakeSandbox(), sdk.CreateOptions{})
				if err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
				d := time.Since(t0)
				mu.Lock()
				waits[t] = append(waits[t], d)
				mu.Unlock()
				time.Sleep(20 * time.Millisecond)
				_ = c.DeleteSandbox(ctx, sb.ID)
			})
		}
	}
	wg.Wait()
	if err, _ := firstErr.Load().(error); err != nil {
		return err
	}
	// Raw: one create with the server idle.
	var raw []time.Duration
	for range 20 {
		t0 := time.Now()
		sb, err := admin.CreateSandbox(ctx, fakeSandbox(), sdk.CreateOptions{})
		if err != nil {
			return err
		}
		raw = append(raw, time.Since(t0))
		_ = admin.DeleteSandbox(ctx, sb.ID)
	}
	fmt.Printf("admission: %d tenants × %d creates at once, capacity %d, each sandbox deleted 20 ms after it runs (%v in all)\n",
		tenants, creates, capacity, time.Since(start).Round(time.Millisecond))
	for t, w := range waits {
		fmt.Printf("  tenant %d: create answered p50 %s  p99 %s  max %s\n", t, ms(pct(w, .5)), ms(pct(w, .99)), ms(pct(w, 1)))
	}
	fmt.Printf("  raw: a create on an idle server p50 %s\n", ms(pct(raw, .5)))
	return nil
}
