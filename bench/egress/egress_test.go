// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

// Package egress benchmarks the network paths of sandboxes in one run:
// HTTP through an allow-all policy (the unrestricted baseline) and
// through an enforced allow-list, then HTTPS straight through the
// allow-list, through a plain relay process (the floor of any
// interception by another process) and through the credential proxy
// (TLS interception and injection). wrk runs inside native sandboxes of the "host" image
// against servers in network namespaces the benchmark makes; nothing
// leaves this machine. Needs root, runc and wrk.
//
//	go test ./bench/egress -run XXX -bench . -benchtime 1x [-args -duration 5s]
package egress

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/internal/testutil/corraltest"
	"github.com/corral-dev/corral/internal/testutil/netlab"
	"github.com/corral-dev/corral/sdk"
)

var duration = flag.Duration("duration", 4*time.Second, "how long wrk runs per measurement")

const key = "ck_bench-admin-key-0123456789"

type result struct {
	rps     float64
	latency time.Duration // mean
	p99     time.Duration
}

func BenchmarkEgress(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("needs root")
	}
	if _, err := os.Stat("/usr/bin/wrk"); err != nil {
		b.Skip("needs wrk (apt-get install wrk)")
	}
	w := netlab.NewWorld(b)
	ca := netlab.NewCA(b, "bench world CA")
	caFile := filepath.Join(b.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, ca.PEM, 0o644); err != nil {
		b.Fatal(err)
	}
	body := bytes.Repeat([]byte("x"), 1024)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api" {
			// An upstream that takes 5 ms, as a real API across a network.
			time.Sleep(5 * time.Millisecond)
		}
		_, _ = w.Write(body)
	})
	netlab.ServeHTTPIn(b, w.World, netlab.WorldWeb+":8080", h)
	netlab.ServeHTTPIn(b, w.World, netlab.WorldWeb+":443", h, ca.Issue(b, "secure.test"))
	netlab.ServeDNS(b, w.World, netlab.WorldDNS+":53", map[string]string{"bench.test.": netlab.WorldWeb, "secure.test.": netlab.WorldWeb,
		"relay.test.": worldRelay})
	startRelay(b, w)

	c := startServer(b, w, caFile)
	allowed := []api.NetworkRule{{Action: "allow", Target: "bench.test"}, {Action: "allow", Target: "secure.test"}, {Action: "allow", Target: "relay.test"}}
	open := sandbox(b, c, &api.NetworkPolicy{DefaultAction: "allow"}, false)
	enforced := sandbox(b, c, &api.NetworkPolicy{DefaultAction: "deny", Egress: allowed}, false)
	vaulted := sandbox(b, c, &api.NetworkPolicy{DefaultAction: "deny", Egress: allowed}, true)
	egressPost(b, c, vaulted, `{"credentials":[{"name":"k","source":{"type":"inline","value":"bench-key"}}],
		"bindings":[{"name":"secure","match":{"hosts":["secure.test"]},"auth":{"type":"bearer","credential":"k"}}]}`)

	// Latency: one connection, one request at a time. Throughput: four
	// connections, as fast as they go (the machine's two cores are then
	// shared by wrk, the server and, on the proxied path, the proxy).
	run := func(name, id, url string) (lat, thr result) {
		b.Run(name+"/latency", func(b *testing.B) {
			lat = wrk(b, c, id, url, 1)
			b.ReportMetric(float64(lat.latency.Microseconds()), "µs/req-mean")
			b.ReportMetric(float64(lat.p99.Microseconds()), "µs/req-p99")
		})
		b.Run(name+"/throughput", func(b *testing.B) {
			thr = wrk(b, c, id, url, 4)
			b.ReportMetric(thr.rps, "req/s")
		})
		return lat, thr
	}
	baseL, baseT := run("HTTP/allow-all", open, "http://bench.test:8080/")
	enfL, enfT := run("HTTP/enforced", enforced, "http://bench.test:8080/")
	tlsL, tlsT := run("HTTPS/enforced", enforced, "https://secure.test/")
	relayL, relayT := run("HTTPS/enforced-via-a-relay-process", enforced, "https://relay.test/")
	mitmL, mitmT := run("HTTPS/credential-proxy", vaulted, "https://secure.test/")
	var apiDirect, apiProxied result
	b.Run("HTTPS-5ms-upstream/enforced/latency", func(b *testing.B) {
		apiDirect = wrk(b, c, enforced, "https://secure.test/api", 1)
		b.ReportMetric(float64(apiDirect.latency.Microseconds()), "µs/req-mean")
	})
	b.Run("HTTPS-5ms-upstream/credential-proxy/latency", func(b *testing.B) {
		apiProxied = wrk(b, c, vaulted, "https://secure.test/api", 1)
		b.ReportMetric(float64(apiProxied.latency.Microseconds()), "µs/req-mean")
	})
	fmt.Printf("enforced vs allow-all (HTTP): latency %+.1f%%, throughput %+.1f%%\n", pctDiff(enfL.latency, baseL.latency), (enfT.rps/baseT.rps-1)*100)
	fmt.Printf("credential proxy vs enforced (HTTPS): latency %+.1f%%, throughput %+.1f%%\n", pctDiff(mitmL.latency, tlsL.latency), (mitmT.rps/tlsT.rps-1)*100)
	fmt.Printf("a plain TCP relay process vs enforced (HTTPS; the floor of any interception by another process): latency %+.1f%%, throughput %+.1f%%\n",
		pctDiff(relayL.latency, tlsL.latency), (relayT.rps/tlsT.rps-1)*100)
	fmt.Printf("credential proxy vs that relay: latency %+.1f%%, throughput %+.1f%%\n", pctDiff(mitmL.latency, relayL.latency), (mitmT.rps/relayT.rps-1)*100)
	fmt.Printf("credential proxy vs enforced (HTTPS, upstream answering in 5 ms): latency %+.1f%%\n", pctDiff(apiProxied.latency, apiDirect.latency))
}

func pctDiff(a, b time.Duration) float64 { return (float64(a)/float64(b) - 1) * 100 }

// worldRelay is where the relay process listens, in the World.
const worldRelay = "203.0.113.30"

// TestMain runs the relay process when asked to (see startRelay).
func TestMain(m *testing.M) {
	if to := os.Getenv("CORRAL_BENCH_RELAY_TO"); to != "" {
		os.Exit(relay(os.Getenv("CORRAL_BENCH_RELAY_LISTEN"), to))
	}
	os.Exit(m.Run())
}

// startRelay runs a plain TCP relay (the kernel copies, by splice) in a
// process of its own in the World, from worldRelay:443 to the HTTPS
// server: one more process on the path and nothing else, the least any
// interception by another process costs.
func startRelay(b *testing.B, w netlab.World) {
	if out, err := exec.Command("ip", "-n", w.World, "addr", "add", worldRelay+"/32", "dev", "lo").CombinedOutput(); err != nil {
		b.Fatalf("%v %s", err, out)
	}
	cmd := exec.Command("ip", "netns", "exec", w.World, os.Args[0])
	cmd.Env = append(os.Environ(), "CORRAL_BENCH_RELAY_LISTEN="+worldRelay+":443", "CORRAL_BENCH_RELAY_TO="+netlab.WorldWeb+":443")
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	deadline := time.Now().Add(10 * time.Second)
	for !netlab.Reaches(w.World, worldRelay+":443") {
		if time.Now().After(deadline) {
			b.Fatal("the relay did not listen")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func relay(listen, to string) int {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	for {
		c, err := ln.Accept()
		if err != nil {
			return 1
		}
		go func() {
			defer c.Close()
			u, err := net.Dial("tcp", to)
			if err != nil {
				return
			}
			defer u.Close()
			go func() { _, _ = io.Copy(u, c) }()
			_, _ = io.Copy(c, u)
		}()
	}
}

func startServer(b *testing.B, w netlab.World, caFile string) *sdk.Client {
	dir := b.TempDir()
	bin, err := corraltest.Build(dir)
	if err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	data := filepath.Join(dir, "data")
	logf, err := os.Create(filepath.Join(dir, "server.log"))
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(bin, "serve", "--runtime", "oci", "--listen", addr, "--data-dir", data, "--api-key", key,
		"--log-format", "json", "--egress-uplink-netns", netlab.NetnsPath(w.Uplink), "--egress-subnet", "10.217.0.0/24",
		"--egress-upstream", netlab.WorldDNS+":53", "--egress-upstream-ca", caFile)
	cmd.Stderr = logf
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	c, err := sdk.New(sdk.WithBaseURL("http://"+addr), sdk.WithAPIKey(key))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if list, err := c.ListSandboxes(ctx, sdk.ListOptions{PageSize: 200}); err == nil {
			for _, sb := range list.Items {
				_ = c.DeleteSandbox(ctx, sb.ID)
			}
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		logf.Close()
		_ = corraltest.Unmount(data)
	})
	deadline := time.Now().Add(time.Minute)
	for {
		if res, err := http.Get("http://" + addr + "/health"); err == nil {
			res.Body.Close()
			return c
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(logf.Name())
			b.Fatalf("corral serve did not start:\n%s", log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func sandbox(b *testing.B, c *sdk.Client, pol *api.NetworkPolicy, vault bool) string {
	timeout := int64(600)
	req := api.CreateSandboxRequest{Image: &api.ImageSpec{URI: "host"}, Timeout: &timeout, Entrypoint: []string{"sleep", "3600"},
		ResourceLimits: map[string]string{"cpu": "1", "memory": "512Mi"}, NetworkPolicy: pol}
	if vault {
		req.CredentialProxy = &api.CredentialProxyConfig{Enabled: true}
	}
	sb, err := c.CreateSandbox(context.Background(), req, sdk.CreateOptions{})
	if err != nil {
		b.Fatal(err)
	}
	return sb.ID
}

func egressPost(b *testing.B, c *sdk.Client, id, body string) {
	ep, err := c.GetEndpoint(context.Background(), id, api.EgressPort, false)
	if err != nil {
		b.Fatal(err)
	}
	req, _ := http.NewRequest("POST", "http://"+ep.Endpoint+"/credential-vault", strings.NewReader(body))
	for k, v := range ep.Headers {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != 201 {
		msg, _ := io.ReadAll(res.Body)
		b.Fatalf("create the vault: %d %s", res.StatusCode, msg)
	}
}

var (
	latencyRE = regexp.MustCompile(`Latency\s+([\d.]+)(us|ms|s)`)
	p99RE     = regexp.MustCompile(`\s99%\s+([\d.]+)(us|ms|s)`)
	rpsRE     = regexp.MustCompile(`Requests/sec:\s+([\d.]+)`)
)

func parseDur(num, unit string) time.Duration {
	f, _ := strconv.ParseFloat(num, 64)
	switch unit {
	case "us":
		return time.Duration(f * float64(time.Microsecond))
	case "ms":
		return time.Duration(f * float64(time.Millisecond))
	}
	return time.Duration(f * float64(time.Second))
}

// wrk runs wrk inside the sandbox (one thread, conns connections) and
// parses its summary.
func wrk(b *testing.B, c *sdk.Client, id, url string, conns int) result {
	x, err := c.Sandbox(context.Background(), id, sdk.SandboxOptions{})
	if err != nil {
		b.Fatal(err)
	}
	cmd := fmt.Sprintf("wrk -t1 -c%d -d%ds --latency %s", conns, int(duration.Seconds()), url)
	out, errOut, code, err := x.Run(context.Background(), cmd, sdk.CommandOptions{Timeout: 2*(*duration) + 30*time.Second})
	if err != nil || code != 0 {
		b.Fatalf("%s: exit %d %v\n%s%s", cmd, code, err, out, errOut)
	}
	if strings.Contains(out, "Non-2xx") || strings.Contains(out, "Socket errors") {
		b.Fatalf("%s: errors:\n%s", cmd, out)
	}
	var r result
	if m := latencyRE.FindStringSubmatch(out); m != nil {
		r.latency = parseDur(m[1], m[2])
	}
	if m := p99RE.FindStringSubmatch(out); m != nil {
		r.p99 = parseDur(m[1], m[2])
	}
	if m := rpsRE.FindStringSubmatch(out); m != nil {
		r.rps, _ = strconv.ParseFloat(m[1], 64)
	}
	if r.rps == 0 || r.latency == 0 {
		b.Fatalf("%s: unreadable output:\n%s", cmd, out)
	}
	return r
}
