// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

// Command lifecycle measures the lifecycle API of a real `corral serve`
// (fake runtime, real SQLite) from a separate process: create latency and
// throughput, and GET/list throughput with latency percentiles.
//
//	go run ./bench/lifecycle [-duration 10s] [-concurrency 32] [-sandboxes 1000]
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/corral-dev/corral/internal/testutil/corraltest"
)

const key = "ck_bench-admin-key-0123456789"

func main() {
	duration := flag.Duration("duration", 10*time.Second, "how long each throughput phase runs")
	conc := flag.Int("concurrency", 32, "concurrent client connections")
	n := flag.Int("sandboxes", 1000, "sandboxes to create before the read phases")
	bin := flag.String("binary", "", "corral binary (default: build it)")
	flag.Parse()
	if err := run(*bin, *duration, *conc, *n); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(bin string, duration time.Duration, conc, n int) error {
	dir, err := os.MkdirTemp("", "corral-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if bin == "" {
		if bin, err = corraltest.Build(dir); err != nil {
			return err
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	addr := ln.Addr().String()
	ln.Close()
	srv := exec.Command(bin, "serve", "--runtime", "fake", "--listen", addr, "--data-dir", filepath.Join(dir, "data"),
		"--api-key", key, "--log-level", "warn", "--log-format", "json")
	srv.Stderr = os.Stderr
	if err := srv.Start(); err != nil {
		return err
	}
	defer func() { _ = srv.Process.Kill(); _ = srv.Wait() }()
	base := "http://" + addr
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: conc * 2, MaxIdleConns: conc * 2}}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if res, err := hc.Get(base + "/health"); err == nil {
			res.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			return errors.New("server did not start")
		}
		time.Sleep(20 * time.Millisecond)
	}
	fmt.Printf("corral lifecycle API, fake runtime, real SQLite; %d CPUs, GOMAXPROCS %d, %d client connections\n\n",
		runtime.NumCPU(), runtime.GOMAXPROCS(0), conc)
	fmt.Println("| operation | requests | throughput (req/s) | p50 | p99 |")
	fmt.Println("|---|---:|---:|---:|---:|")

	body, _ := json.Marshal(map[string]any{"image": map[string]string{"uri": "fake:ok"}, "timeout": 3600,
		"resourceLimits": map[string]string{"cpu": "500m", "memory": "512Mi"}, "metadata": map[string]string{"bench": "yes"}})
	var ids []string
	var idsMu sync.Mutex
	create := func() error {
		req, _ := http.NewRequest("POST", base+"/v1/sandboxes", bytes.NewReader(body))
		req.Header.Set("OPEN-SANDBOX-API-KEY", key)
		res, err := hc.Do(req)
		if err != nil {
			return err
		}
		defer res.Body.Close()
		var out struct{ ID string }
		if res.StatusCode != 202 || json.NewDecoder(res.Body).Decode(&out) != nil {
			return fmt.Errorf("create: %d", res.StatusCode)
		}
		idsMu.Lock()
		ids = append(ids, out.ID)
		idsMu.Unlock()
		return nil
	}
	seq := n / 10
	if err := report("create, sequential", measureCount(1, seq, create)); err != nil {
		return err
	}
	if err := report(fmt.Sprintf("create, %d concurrent", conc), measureCount(conc, n-seq, create)); err != nil {
		return err
	}
	get := func(path string) func() error {
		return func() error {
			req, _ := http.NewRequest("GET", base+path, nil)
			req.Header.Set("OPEN-SANDBOX-API-KEY", key)
			res, err := hc.Do(req)
			if err != nil {
				return err
			}
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode != 200 {
				return fmt.Errorf("%s: %d", path, res.StatusCode)
			}
			return nil
		}
	}
	reads := []struct{ name, path string }{
		{"GET /v1/sandboxes/{id}", "/v1/sandboxes/" + ids[len(ids)/2]},
		{fmt.Sprintf("GET /v1/sandboxes?pageSize=20 (of %d)", len(ids)), "/v1/sandboxes?pageSize=20"},
		{"GET /health", "/health"},
	}
	wrk, _ := exec.LookPath("wrk")
	for _, rd := range reads {
		var err error
		if wrk != "" {
			err = wrkReport(wrk, rd.name+" (wrk)", base+rd.path, conc, duration)
		} else {
			err = report(rd.name+" (Go client)", measureFor(conc, duration, get(rd.path)))
		}
		if err != nil {
			return err
		}
	}
	if wrk == "" {
		fmt.Println("\nwrk is not installed: read throughput was driven by the Go HTTP client, which needs")
		fmt.Println("about as much CPU as the server on 2 cores; install wrk (apt-get install wrk) to measure the server.")
	}
	return nil
}

// wrkReport drives url with wrk, which costs far less CPU than a Go client
// and so leaves the machine to the server under test.
func wrkReport(wrk, name, url string, conc int, d time.Duration) error {
	out, err := exec.Command(wrk, "-t1", fmt.Sprintf("-c%d", conc), fmt.Sprintf("-d%ds", int(d.Seconds())), "--latency",
		"-H", "OPEN-SANDBOX-API-KEY: "+key, url).CombinedOutput()
	if err != nil {
		return fmt.Errorf("wrk: %v: %s", err, out)
	}
	var rps float64
	var total int
	lat := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 2 && f[0] == "Requests/sec:":
			rps, _ = strconv.ParseFloat(f[1], 64)
		case len(f) >= 2 && f[1] == "requests" && f[2] == "in":
			total, _ = strconv.Atoi(f[0])
		case len(f) == 2 && (f[0] == "50%" || f[0] == "99%"):
			lat[f[0]] = f[1]
		case strings.Contains(line, "Non-2xx"):
			return fmt.Errorf("wrk %s: %s", name, line)
		}
	}
	fmt.Printf("| %s | %d | %.0f | %s | %s |\n", name, total, rps, lat["50%"], lat["99%"])
	return nil
}

type result struct {
	lat     []time.Duration
	elapsed time.Duration
	err     error
}

// measureCount runs total calls of fn on conc workers.
func measureCount(conc, total int, fn func() error) result {
	var next atomic.Int64
	return measure(conc, func() bool { return next.Add(1) <= int64(total) }, fn)
}

// measureFor runs fn on conc workers for d.
func measureFor(conc int, d time.Duration, fn func() error) result {
	end := time.Now().Add(d)
	return measure(conc, func() bool { return time.Now().Before(end) }, fn)
}

func measure(conc int, more func() bool, fn func() error) result {
	var mu sync.Mutex
	var all []time.Duration
	var firstErr error
	var wg sync.WaitGroup
	start := time.Now()
	for range conc {
		wg.Go(func() {
			var lat []time.Duration
			for more() {
				t := time.Now()
				if err := fn(); err != nil {
					mu.Lock()
					firstErr = cmpErr(firstErr, err)
					mu.Unlock()
					return
				}
				lat = append(lat, time.Since(t))
			}
			mu.Lock()
			all = append(all, lat...)
			mu.Unlock()
		})
	}
	wg.Wait()
	return result{lat: all, elapsed: time.Since(start), err: firstErr}
}

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

func report(name string, r result) error {
	if r.err != nil {
		return fmt.Errorf("%s: %w", name, r.err)
	}
	slices.Sort(r.lat)
	pct := func(p float64) time.Duration {
		if len(r.lat) == 0 {
			return 0
		}
		return r.lat[min(len(r.lat)-1, int(float64(len(r.lat))*p))]
	}
	fmt.Printf("| %s | %d | %.0f | %s | %s |\n", name, len(r.lat), float64(len(r.lat))/r.elapsed.Seconds(),
		pct(0.50).Round(time.Microsecond), pct(0.99).Round(time.Microsecond))
	return nil
}
