// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

// Command e2b measures corral's E2B API next to corral's own, in the same
// run, on the native runtime with the host image (as root, runc on PATH,
// node and npm installed):
//
//   - create → first command: E2B's JavaScript SDK, unchanged
//     (Sandbox.create, commands.run('true')), next to corral's Go SDK
//     (create and wait, then run true);
//
//   - a command round trip (`true`) through envd's Process.Start (Connect,
//     JSON, as the SDKs speak it) next to execd's POST /command (the route
//     OpenSandbox's SDKs use), both on the sandbox's direct endpoint; and
//     envd through the E2B listener, as an SDK in sandboxUrl mode reaches
//     it.
//
//     go run ./bench/e2b [-n 20] [-rtt 300]
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"time"

	"connectrpc.com/connect"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/bench/internal/benchsrv"
	"github.com/corral-dev/corral/internal/e2b"
	pb "github.com/corral-dev/corral/internal/e2b/envd/process"
	"github.com/corral-dev/corral/internal/e2b/envd/process/processconnect"
	"github.com/corral-dev/corral/sdk"
)

func main() {
	n := flag.Int("n", 20, "creates to time with each SDK")
	rtt := flag.Int("rtt", 300, "command round trips to time on each route")
	flag.Parse()
	if err := run(*n, *rtt); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(n, rtt int) error {
	srv, err := benchsrv.Start("--runtime", "oci", "--e2b-listen", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer srv.Close()
	ctx := context.Background()

	// create → first command, E2B's SDK first, then corral's.
	js, err := jsCreates(srv.E2BURL, n)
	if err != nil {
		return err
	}
	var own []time.Duration
	for i := 0; i < n+2; i++ {
		start := time.Now()
		sb, err := srv.Admin.CreateSandbox(ctx, api.CreateSandboxRequest{Image: &api.ImageSpec{URI: "host"}, Timeout: ptr(int64(120))}, sdk.CreateOptions{Wait: true})
		if err != nil {
			return err
		}
		x, err := srv.Admin.Sandbox(ctx, sb.ID, sdk.SandboxOptions{})
		if err != nil {
			return err
		}
		if _, _, code, err := x.Run(ctx, "true", sdk.CommandOptions{}); err != nil || code != 0 {
			return fmt.Errorf("true: %d %v", code, err)
		}
		d := time.Since(start)
		if err := srv.Admin.DeleteSandbox(ctx, sb.ID); err != nil {
			return err
		}
		if i >= 2 {
			own = append(own, d)
		}
	}
	fmt.Printf("create → first command, %d each (native runtime, host image)\n", n)
	fmt.Printf("  %-32s p50 %8v  p90 %8v\n", "E2B JavaScript SDK", pct(js, 50), pct(js, 90))
	fmt.Printf("  %-32s p50 %8v  p90 %8v\n", "corral Go SDK", pct(own, 50), pct(own, 90))
	fmt.Printf("  ratio (p50)                      %.2f\n", float64(pct(js, 50))/float64(pct(own, 50)))

	// Round trips on one sandbox.
	sb, err := srv.Admin.CreateSandbox(ctx, api.CreateSandboxRequest{Image: &api.ImageSpec{URI: "host"}, Timeout: ptr(int64(600))}, sdk.CreateOptions{Wait: true})
	if err != nil {
		return err
	}
	defer func() { _ = srv.Admin.DeleteSandbox(ctx, sb.ID) }()
	x, err := srv.Admin.Sandbox(ctx, sb.ID, sdk.SandboxOptions{})
	if err != nil {
		return err
	}
	ep, err := srv.Admin.GetEndpoint(ctx, sb.ID, api.ExecdPort, false)
	if err != nil {
		return err
	}
	direct := processconnect.NewProcessClient(&http.Client{Transport: headers{api.HeaderExecdToken: ep.Headers[api.HeaderExecdToken]}},
		"http://"+ep.Endpoint+api.PathExecdE2BEnvd, connect.WithProtoJSON())
	var info e2b.SandboxDetail
	id, _ := e2b.FromCorralID(sb.ID)
	if err := getJSON(srv.E2BURL+"/sandboxes/"+id, &info); err != nil {
		return err
	}
	viaServer := processconnect.NewProcessClient(&http.Client{Transport: headers{e2b.HeaderSandboxID: id, e2b.HeaderAccessToken: info.EnvdAccessToken}},
		srv.E2BURL, connect.WithProtoJSON())
	routes := []struct {
		name string
		once func() error
	}{
		{"execd POST /command (direct)", func() error {
			_, _, code, err := x.Run(ctx, "true", sdk.CommandOptions{})
			if err == nil && code != 0 {
				err = fmt.Errorf("exit %d", code)
			}
			return err
		}},
		{"envd Process.Start (direct)", func() error { return envdTrue(ctx, direct, "-c") }},
		{"envd, bash -l as the SDK (direct)", func() error { return envdTrue(ctx, direct, "-l", "-c") }},
		{"envd via the E2B listener", func() error { return envdTrue(ctx, viaServer, "-c") }},
	}
	results := make([][]time.Duration, len(routes))
	// Interleaved rounds, so the machine's noise falls on every route.
	for range 20 {
		for _, r := range routes {
			if err := r.once(); err != nil {
				return fmt.Errorf("%s: %w", r.name, err)
			}
		}
	}
	for range rtt {
		for i, r := range routes {
			start := time.Now()
			if err := r.once(); err != nil {
				return fmt.Errorf("%s: %w", r.name, err)
			}
			results[i] = append(results[i], time.Since(start))
		}
	}
	fmt.Printf("\ncommand round trip (`true`), %d each, interleaved\n", rtt)
	base := pct(results[0], 50)
	for i, r := range routes {
		fmt.Printf("  %-36s p50 %8v  p99 %8v  ×%.2f\n", r.name, pct(results[i], 50), pct(results[i], 99), float64(pct(results[i], 50))/float64(base))
	}
	return nil
}

func ptr[T any](v T) *T { return &v }

// envdTrue runs bash args... true through envd and waits for its end.
func envdTrue(ctx context.Context, c processconnect.ProcessClient, args ...string) error {
	s, err := c.Start(ctx, connect.NewRequest(&pb.StartRequest{Process: &pb.ProcessConfig{Cmd: "/bin/bash", Args: append(args, "true")}}))
	if err != nil {
		return err
	}
	var end *pb.ProcessEvent_EndEvent
	for s.Receive() {
		if e := s.Msg().GetEvent().GetEnd(); e != nil {
			end = e
		}
	}
	if err := s.Err(); err != nil {
		return err
	}
	if end == nil || end.GetExitCode() != 0 {
		return fmt.Errorf("end = %v", end)
	}
	return nil
}

// headers adds fixed headers to every request.
type headers map[string]string

func (h headers) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h {
		r.Header.Set(k, v)
	}
	return http.DefaultTransport.RoundTrip(r)
}

func getJSON(url string, v any) error {
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		return err
	}
	req.Header.Set(e2b.HeaderAPIKey, benchsrv.AdminKey)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != 200 {
		return fmt.Errorf("GET %s: %s", url, res.Status)
	}
	return json.NewDecoder(res.Body).Decode(v)
}

// jsCreates runs js/bench.mjs (npm ci first) and returns its timings.
func jsCreates(e2bURL string, n int) ([]time.Duration, error) {
	dir, err := filepath.Abs(filepath.Join("bench", "e2b", "js"))
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(dir, "bench.mjs")); err != nil {
		return nil, errors.New("run from the repository's root (bench/e2b/js/bench.mjs)")
	}
	install := exec.Command("npm", "ci", "--no-audit", "--no-fund")
	install.Dir = dir
	if out, err := install.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("npm ci: %v\n%s", err, out)
	}
	cmd := exec.Command("node", "bench.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "E2B_API_URL="+e2bURL, "E2B_SANDBOX_URL="+e2bURL, "E2B_API_KEY="+benchsrv.AdminKey, fmt.Sprintf("N=%d", n))
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return nil, fmt.Errorf("node bench.mjs: %v\n%s", err, ee.Stderr)
		}
		return nil, err
	}
	var ms []float64
	if err := json.Unmarshal(out, &ms); err != nil {
		return nil, fmt.Errorf("node bench.mjs said %s: %w", out, err)
	}
	ds := make([]time.Duration, len(ms))
	for i, m := range ms {
		ds[i] = time.Duration(m * float64(time.Millisecond))
	}
	return ds, nil
}

func pct(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(q / 100 * float64(len(s)-1))
	return s[i].Round(10 * time.Microsecond)
}
