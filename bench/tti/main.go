// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

// Command tti measures time-to-interactive of a runtime: from the create
// request to the end of the first `true` run through execd, over HTTP, for
// sequential and concurrent creates, next to the raw runtime measured in
// the same run: for the native runtime a `runc run` of `true` in a bundle
// of the same image; for docker a `docker run -d` of the same image plus
// its first `docker exec … true`. Needs root, /bin/busybox (Debian's
// busybox-static), and runc or a running Docker engine.
//
// -png writes the distribution of every measurement (box plots: median,
// quartiles, whiskers, outliers) as a PNG.
//
//	go run ./bench/tti [-runtime oci|docker] [-n 20] [-concurrency 4] [-png tti.png]
package main

import (
	"archive/tar"
	"bytes"
	"context"
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
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/corral-dev/corral/bench/internal/chart"
	"github.com/corral-dev/corral/bench/internal/rawspec"
	"github.com/corral-dev/corral/internal/driver/oci"
	"github.com/corral-dev/corral/internal/testutil/corraltest"
	"github.com/corral-dev/corral/sse"
)

const key = "ck_bench-admin-key-0123456789"

func main() {
	n := flag.Int("n", 20, "sandboxes per measurement")
	conc := flag.Int("concurrency", 4, "concurrent creates")
	runtime := flag.String("runtime", "oci", "runtime to measure: oci or docker")
	disk := flag.String("disk", "", "give each sandbox this disk limit (resourceLimits.disk, such as 1Gi): a file system of its own")
	runscs := flag.String("runsc", "runsc", "runtime oci: the runsc binaries to measure the gVisor tier with, comma-separated, a row each (--oci-runsc), such as runsc,/usr/bin/runsc")
	png := flag.String("png", "", "write the distributions' chart here")
	parts := flag.Bool("spec-parts", false, "runtime oci: only time raw `runc run` in corral's spec with each of its parts taken out in turn (seccomp, the user namespace, masked and read-only paths), to show what each costs runc")
	flag.Parse()
	pngPath = *png
	specParts = *parts
	diskLimit = *disk
	runscBins = strings.Split(*runscs, ",")
	if *runtime != "oci" && *runtime != "docker" {
		fmt.Fprintln(os.Stderr, "bench: -runtime must be oci or docker")
		os.Exit(2)
	}
	if err := run(*runtime, *n, *conc); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(runtime string, n, conc int) error {
	dir, err := os.MkdirTemp("", "corral-bench-tti-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	// The native runtime mounts a tmpfs in its data dir; it goes first.
	defer func() { _ = corraltest.Unmount(filepath.Join(dir, "data")) }()
	bin, err := corraltest.Build(dir)
	if err != nil {
		return err
	}
	rootfs := filepath.Join(dir, "bundle", "rootfs")
	layer, err := busyboxRootfs(rootfs)
	if err != nil {
		return err
	}
	imgTar := filepath.Join(dir, "busybox.tar")
	if err := writeImage(imgTar, layer); err != nil {
		return err
	}
	data := filepath.Join(dir, "data")
	var tiers []tier
	if runtime == "docker" {
		if out, err := exec.Command("docker", "load", "-i", imgTar).CombinedOutput(); err != nil {
			return fmt.Errorf("docker load: %v %s", err, out)
		}
		defer func() { _ = exec.Command("docker", "rmi", "local/busybox:bench").Run() }()
		raw, err := rawDocker(n, "")
		if err != nil {
			return fmt.Errorf("raw docker: %w", err)
		}
		tiers = append(tiers, tier{name: "docker, runc", short: "docker", raw: raw,
			rawName: "`docker run -d` of the same image + first `docker exec … true`"})
		if engineHasRunsc() {
			raw, err := rawDocker(n, "runsc")
			if err != nil {
				return fmt.Errorf("raw docker runsc: %w", err)
			}
			tiers = append(tiers, tier{name: "docker, runsc (gVisor)", short: "docker runsc", raw: raw, isolation: "runsc",
				args:    []string{"--isolation", "runc,runsc"},
				rawName: "`docker run -d --runtime runsc` of the same image + first `docker exec … true`"})
		} else {
			fmt.Fprintln(os.Stderr, "bench: the engine has no runtime runsc: no gVisor rows")
		}
	} else {
		if out, err := exec.Command(bin, "image", "import", imgTar, "--data-dir", data).CombinedOutput(); err != nil {
			return fmt.Errorf("import: %v %s", err, out)
		}
		raw, err := rawRunc(filepath.Join(dir, "bundle"), n)
		if err != nil {
			return fmt.Errorf("raw runc: %w", err)
		}
		rawName := "`runc run` of `true` in the same image's bundle"
		// runc alone in corral's own spec: what corral's hardening costs
		// runc (a user namespace and its ID range, seccomp, masked paths),
		// apart from what corral adds.
		inSpec, err := rawRuncInCorralSpec(bin, data, dir, n)
		if err != nil {
			return fmt.Errorf("raw runc in corral's spec: %w", err)
		}
		if specParts {
			fmt.Println("| `runc run` of `true` | p50 | p99 | p50 vs corral's whole spec |")
			fmt.Println("|---|---:|---:|---:|")
			fmt.Printf("| in runc's default spec | %s | %s | %.2f× |\n", round(pct(raw, 0.5)), round(pct(raw, 0.99)), float64(pct(raw, 0.5))/float64(pct(inSpec, 0.5)))
			fmt.Printf("| in corral's spec, whole | %s | %s | 1.00× |\n", round(pct(inSpec, 0.5)), round(pct(inSpec, 0.99)))
			for _, part := range specPartList {
				lat, err := rawRunCorralSpecWithout(dir, part.name, part.drop, n)
				if err != nil {
					return fmt.Errorf("raw runc in corral's spec without %s: %w", part.name, err)
				}
				fmt.Printf("| in corral's spec without %s | %s | %s | %.2f× |\n", part.name, round(pct(lat, 0.5)), round(pct(lat, 0.99)), float64(pct(lat, 0.5))/float64(pct(inSpec, 0.5)))
			}
			return nil
		}
		tiers = []tier{
			{name: "runc, user namespaces (the default)", short: "runc", raw: raw, rawName: rawName},
			{name: "runc, user namespaces (the default), against runc in its spec", short: "runc", raw: inSpec, rawName: "`runc run` of `true` in corral's spec for a sandbox (user namespace, seccomp…)", rawShort: "runc, corral's spec", noMeasure: true},
			{name: "runc, no user namespaces", short: "runc no userns", args: []string{"--oci-user-namespaces=false"}, raw: raw, rawName: rawName},
		}
		for i, bin := range runscBins {
			path, err := exec.LookPath(bin)
			if err != nil {
				fmt.Fprintf(os.Stderr, "bench: no %s: no gVisor row for it\n", bin)
				continue
			}
			name, short, rawName := "runsc (gVisor)", "runsc", "`runsc run` of `true` in the same image's bundle"
			if len(runscBins) > 1 {
				v, _ := exec.Command(path, "--version").Output()
				first, _, _ := strings.Cut(string(v), "\n")
				name = fmt.Sprintf("runsc (gVisor), %s (%s)", path, strings.TrimPrefix(first, "runsc version "))
				rawName = fmt.Sprintf("`%s run` of `true` in the same image's bundle", path)
				short = fmt.Sprintf("runsc %d", i+1)
			}
			// The same bundle, whose config.json rawRunc wrote, run with
			// the flags corral gives this runsc (but gVisor's own empty
			// network).
			global := append(oci.RunscArgs(context.Background(), path), "--network=none")
			raw, err := rawRun(path, filepath.Join(dir, fmt.Sprintf("runsc-root-%d", i)), filepath.Join(dir, "bundle"), n, global...)
			if err != nil {
				return fmt.Errorf("raw %s: %w", path, err)
			}
			tiers = append(tiers, tier{name: name, short: short, args: []string{"--isolation", "runc,runsc", "--oci-runsc", path}, isolation: "runsc", raw: raw,
				rawName: rawName})
		}
	}
	var results []tierResult
	for i, t := range tiers {
		if t.noMeasure {
			// The previous tier's measurements, against another raw runtime.
			r := results[len(results)-1]
			r.tier = t
			results = append(results, r)
			continue
		}
		r, err := measure(bin, runtime, data, filepath.Join(dir, fmt.Sprintf("server-%d", i)), t, n, conc)
		if err != nil {
			return fmt.Errorf("%s: %w", t.name, err)
		}
		r.tier = t
		results = append(results, r)
	}
	fmt.Printf("time to interactive, runtime %s, busybox image, %d samples each; each tier against its own raw runtime\n\n", runtime, n)
	fmt.Println("| tier | measurement | p50 | p99 | p50 vs raw | p50 − raw |")
	fmt.Println("|---|---|---:|---:|---:|---:|")
	printedRaw := map[string]bool{}
	for _, r := range results {
		raw := r.tier.raw
		rp := pct(raw, .5)
		if !printedRaw[r.tier.rawName] {
			printedRaw[r.tier.rawName] = true
			fmt.Printf("| — | raw %s | %s | %s | 1.00× | 0 |\n", r.tier.rawName, round(rp), round(pct(raw, .99)))
		}
		row := func(what string, d []time.Duration) {
			fmt.Printf("| %s | %s | %s | %s | %.2f× | %s |\n", r.tier.name, what, round(pct(d, .5)), round(pct(d, .99)),
				float64(pct(d, .5))/float64(rp), round(pct(d, .5)-rp))
		}
		row("create → first `true` done, sequential", r.seq)
		if r.tier.noMeasure {
			continue
		}
		row(fmt.Sprintf("create → first `true` done, %d concurrent", conc), r.par)
		if len(r.warm) > 0 {
			row("create → first `true` done, warm pool (`--warm-pool IMAGE=1`, a sandbox ready)", r.warm)
		}
		if len(r.tmpl) > 0 {
			row("create from a template → first `true` done, its warm pool (`warmPool: 1`, a sandbox ready)", r.tmpl)
		}
	}
	fmt.Println()
	for _, r := range results {
		if r.tier.noMeasure {
			continue
		}
		fmt.Printf("%s: %d concurrent creates: %d sandboxes interactive in %s (%.1f/s)\n", r.tier.name, conc, n, round(r.wall), float64(n)/r.wall.Seconds())
	}
	if pngPath != "" {
		return drawChart(runtime, results, n, conc)
	}
	return nil
}

// runscBins is -runsc.
var runscBins []string

// pngPath is -png.
var pngPath string

// drawChart writes the box plots of every measurement in results.
func drawChart(runtime string, results []tierResult, n, conc int) error {
	var ds []chart.Distribution
	ms := func(d []time.Duration) []float64 {
		out := make([]float64, len(d))
		for i, v := range d {
			out[i] = float64(v.Microseconds()) / 1000
		}
		return out
	}
	drawn := map[string]bool{}
	for _, r := range results {
		if !drawn[r.tier.rawName] {
			drawn[r.tier.rawName] = true
			name := "raw " + r.tier.short
			if r.tier.rawShort != "" {
				name = "raw " + r.tier.rawShort
			}
			ds = append(ds, chart.Distribution{Name: name, Samples: ms(r.tier.raw)})
		}
		if r.tier.noMeasure {
			continue
		}
		ds = append(ds, chart.Distribution{Name: r.tier.short + "\nsequential", Samples: ms(r.seq)},
			chart.Distribution{Name: fmt.Sprintf("%s\n%d concurrent", r.tier.short, conc), Samples: ms(r.par)})
		if len(r.warm) > 0 {
			ds = append(ds, chart.Distribution{Name: r.tier.short + "\nwarm pool", Samples: ms(r.warm)})
		}
		if len(r.tmpl) > 0 {
			ds = append(ds, chart.Distribution{Name: r.tier.short + "\ntemplate pool", Samples: ms(r.tmpl)})
		}
	}
	title := fmt.Sprintf("create → first command done, runtime %s, busybox image, %d samples each", runtime, n)
	if err := chart.Boxes(pngPath, title, ds); err != nil {
		return err
	}
	fmt.Printf("\nchart: %s\n", pngPath)
	return nil
}

// tier is a server configuration measured: its name, serve flags, the
// isolation its creates ask for, and its raw runtime's times.
type tier struct {
	name      string
	short     string // in the chart
	args      []string
	isolation string
	raw       []time.Duration
	rawName   string
	// rawShort names the raw runtime in the chart ("raw " + short if "");
	// noMeasure: the tier is the previous one's measurements against
	// another raw runtime.
	rawShort  string
	noMeasure bool
}

// engineHasRunsc reports whether the Docker engine has a runtime runsc.
func engineHasRunsc() bool {
	out, err := exec.Command("docker", "info", "--format", "{{json .Runtimes}}").Output()
	if err != nil {
		return false
	}
	var rts map[string]json.RawMessage
	_ = json.Unmarshal(out, &rts)
	_, ok := rts["runsc"]
	return ok
}

type tierResult struct {
	tier           tier
	seq, par, warm []time.Duration
	// tmpl are creates from a template with a warm pool.
	tmpl []time.Duration
	wall time.Duration
}

// measure runs the sequential, concurrent and (oci) warm-pool creates
// against a server started with args; logs go to logBase*.log.
func measure(bin, runtime, data, logBase string, t tier, n, conc int) (tierResult, error) {
	var r tierResult
	args := t.args
	create := func(base string) (time.Duration, string, error) { return tti(base, t.isolation) }
	base, stop, err := startServer(bin, runtime, data, logBase+".log", args...)
	if err != nil {
		return r, err
	}
	defer func() { stop() }()
	// One warm-up sandbox: the first create pays one-time costs.
	if _, id, err := create(base); err != nil {
		return r, err
	} else if err := del(base, id); err != nil {
		return r, err
	}
	var ids []string
	for range n {
		d, id, err := create(base)
		if err != nil {
			return r, fmt.Errorf("sequential create: %w", err)
		}
		r.seq = append(r.seq, d)
		ids = append(ids, id)
	}
	for _, id := range ids {
		_ = del(base, id)
	}
	var mu sync.Mutex
	ids = ids[:0]
	var firstErr error
	start := time.Now()
	sem := make(chan struct{}, conc)
	var wg sync.WaitGroup
	for range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			d, id, err := create(base)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				firstErr = err
				return
			}
			r.par = append(r.par, d)
			ids = append(ids, id)
		})
	}
	wg.Wait()
	r.wall = time.Since(start)
	for _, id := range ids {
		_ = del(base, id)
	}
	if firstErr != nil {
		return r, firstErr
	}
	if t.isolation != "" || diskLimit != "" {
		return r, nil // warm pools hold runc sandboxes without a disk limit
	}
	// A template with a warm pool; each create from it takes the sandbox
	// the pool had ready (the bench waits for the refill in between).
	tbody := `{"name":"bench","warmPool":1,"spec":` + createBody("") + `}`
	if err := call("POST", base+"/v1/templates", tbody, nil, 201); err != nil {
		return r, fmt.Errorf("template: %w", err)
	}
	for range n {
		if err := waitWarm(base, "bench"); err != nil {
			return r, err
		}
		d, id, err := ttiBody(base, `{"extensions":{"corral.dev/template":"bench"}}`)
		if err != nil {
			return r, fmt.Errorf("create from the template: %w", err)
		}
		r.tmpl = append(r.tmpl, d)
		if err := del(base, id); err != nil {
			return r, err
		}
	}
	if err := call("DELETE", base+"/v1/templates/bench", "", nil, 204); err != nil {
		return r, err
	}
	if runtime != "oci" {
		return r, nil // --warm-pool is the native runtime's
	}
	// Warm: a server keeping a warm pool of the image; each create
	// claims a sandbox the pool had ready (the bench waits for the pool to
	// refill between creates, so this is the time when one is ready).
	stop()
	stop = func() {}
	wbase, wstop, err := startServer(bin, runtime, data, logBase+"-warm.log", append(slices.Clone(args), "--warm-pool", "local/busybox:bench=1")...)
	if err != nil {
		return r, err
	}
	stop = wstop
	bundles := filepath.Join(data, "oci", "run", "bundles")
	for range n {
		if err := waitEntries(bundles, 1); err != nil {
			return r, err
		}
		// The warm bundle is there from the start of its making: the
		// server has no answer for an image pool's readiness, so the bench
		// gives it the time a warm create takes, with room.
		time.Sleep(time.Second)
		d, id, err := create(wbase)
		if err != nil {
			return r, fmt.Errorf("warm create: %w", err)
		}
		r.warm = append(r.warm, d)
		if err := del(wbase, id); err != nil {
			return r, err
		}
	}
	return r, nil
}

// startServer runs corral serve and returns its URL and a stop function.
func startServer(bin, runtime, data, logPath string, extra ...string) (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	args := append([]string{"serve", "--runtime", runtime, "--listen", addr, "--data-dir", data, "--api-key", key,
		"--log-level", "debug", "--log-format", "json"}, extra...)
	srv := exec.Command(bin, args...)
	// The server logs each create's steps at debug level; the log stays
	// in the temporary directory for the run's duration.
	srv.Stderr, _ = os.Create(logPath)
	if err := srv.Start(); err != nil {
		return "", nil, err
	}
	stop := func() { _ = srv.Process.Signal(os.Interrupt); _ = srv.Wait() }
	base := "http://" + addr
	for deadline := time.Now().Add(30 * time.Second); ; {
		if res, err := http.Get(base + "/health"); err == nil {
			res.Body.Close()
			return base, stop, nil
		}
		if time.Now().After(deadline) {
			stop()
			return "", nil, errors.New("server did not start")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitWarm waits until template name has a warm sandbox ready.
func waitWarm(base, name string) error {
	deadline := time.Now().Add(time.Minute)
	for {
		var t struct{ WarmReady int }
		if err := call("GET", base+"/v1/templates/"+name, "", &t, 200); err != nil {
			return err
		}
		if t.WarmReady >= 1 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("template %s has no warm sandbox after a minute", name)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitEntries waits until dir holds exactly n entries.
func waitEntries(dir string, n int) error {
	deadline := time.Now().Add(time.Minute)
	for {
		if entries, err := os.ReadDir(dir); err == nil && len(entries) == n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not come to %d entries", dir, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func round(d time.Duration) time.Duration { return d.Round(100 * time.Microsecond) }

func pct(d []time.Duration, q float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*q))]
}

// tti creates a sandbox and runs `true` in it, timing the whole.
// diskLimit is -disk, for every create.
var diskLimit string

func tti(base, isolation string) (time.Duration, string, error) {
	return ttiBody(base, createBody(isolation))
}

// createBody is the create the bench times.
func createBody(isolation string) string {
	limits := `"cpu":"1","memory":"256Mi"`
	if diskLimit != "" {
		limits += `,"disk":"` + diskLimit + `"`
	}
	ext := ""
	if isolation != "" {
		ext = `,"extensions":{"corral.dev/isolation":"` + isolation + `"}`
	}
	return `{"image":{"uri":"local/busybox:bench"},"timeout":600,"entrypoint":["sleep","3600"],"resourceLimits":{` + limits + `}` + ext + `}`
}

// ttiBody creates a sandbox with body and runs `true` in it, timing the
// whole.
func ttiBody(base, body string) (time.Duration, string, error) {
	start := time.Now()
	var created struct{ ID string }
	if err := call("POST", base+"/v1/sandboxes", body, &created, 202); err != nil {
		return 0, "", err
	}
	var ep struct {
		Endpoint string
		Headers  map[string]string
	}
	if err := call("GET", base+"/v1/sandboxes/"+created.ID+"/endpoints/44772", "", &ep, 200); err != nil {
		return 0, created.ID, err
	}
	req, _ := http.NewRequest("POST", "http://"+ep.Endpoint+"/command", strings.NewReader(`{"command":"true"}`))
	for k, v := range ep.Headers {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, created.ID, err
	}
	defer res.Body.Close()
	rd := sse.NewReader(res.Body)
	ok := false
	for {
		raw, err := rd.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return 0, created.ID, err
		}
		ok = ok || bytes.Contains(raw, []byte(`"execution_complete"`))
	}
	if !ok {
		return 0, created.ID, errors.New("true did not complete")
	}
	return time.Since(start), created.ID, nil
}

func call(method, url, body string, out any, want int) error {
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	req.Header.Set("OPEN-SANDBOX-API-KEY", key)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != want {
		return fmt.Errorf("%s %s = %d %s", method, url, res.StatusCode, b)
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

func del(base, id string) error { return call("DELETE", base+"/v1/sandboxes/"+id, "", nil, 204) }

// rawRunc times `runc run` of `true` in a plain bundle of the image.
func rawRunc(bundle string, n int) ([]time.Duration, error) {
	root := filepath.Join(bundle, "..", "runc-root")
	if out, err := exec.Command("runc", "spec", "--bundle", bundle).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("runc spec: %v %s", err, out)
	}
	cfgPath := filepath.Join(bundle, "config.json")
	var spec map[string]any
	raw, _ := os.ReadFile(cfgPath)
	if err := json.Unmarshal(raw, &spec); err != nil {
		return nil, err
	}
	proc := spec["process"].(map[string]any)
	proc["terminal"], proc["args"] = false, []string{"/bin/true"}
	spec["root"].(map[string]any)["readonly"] = false
	out, _ := json.Marshal(spec)
	if err := os.WriteFile(cfgPath, out, 0o600); err != nil {
		return nil, err
	}
	return rawRun("runc", root, bundle, n)
}

// rawRun times `BIN run` of the bundle (whose process is `true`), n
// times after one that warms caches.
func rawRun(bin, root, bundle string, n int, global ...string) ([]time.Duration, error) {
	var ds []time.Duration
	for i := range n + 1 {
		start := time.Now()
		args := append(append([]string{"--root", root}, global...), "run", "--bundle", bundle, fmt.Sprintf("raw%d", i))
		if out, err := exec.Command(bin, args...).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("%s run: %v %s", bin, err, out)
		}
		if i > 0 { // the first one warms caches
			ds = append(ds, time.Since(start))
		}
		_ = exec.Command(bin, append(append([]string{"--root", root}, global...), "delete", "-f", fmt.Sprintf("raw%d", i))...).Run()
	}
	return ds, nil
}

// rawDocker times `docker run -d` of the image plus its first `docker
// exec … true`, the way a user of Docker gets a shell-ready container.
func rawDocker(n int, runtime string) ([]time.Duration, error) {
	var ds []time.Duration
	args := []string{"run", "-d", "--network", "none"}
	if runtime != "" {
		args = append(args, "--runtime", runtime)
	}
	args = append(args, "local/busybox:bench", "sleep", "3600")
	for i := range n + 1 {
		start := time.Now()
		out, err := exec.Command("docker", args...).Output()
		if err != nil {
			return nil, fmt.Errorf("docker run: %w", err)
		}
		id := strings.TrimSpace(string(out))
		if out, err := exec.Command("docker", "exec", id, "true").CombinedOutput(); err != nil {
			return nil, fmt.Errorf("docker exec: %v %s", err, out)
		}
		if i > 0 { // the first one warms caches
			ds = append(ds, time.Since(start))
		}
		_ = exec.Command("docker", "rm", "-f", id).Run()
	}
	return ds, nil
}

// busyboxRootfs writes a busybox root filesystem to dir and returns the
// same as a tar layer.
func busyboxRootfs(dir string) ([]byte, error) {
	bb, err := os.ReadFile("/bin/busybox")
	if err != nil {
		return nil, fmt.Errorf("needs /bin/busybox (apt-get install busybox-static): %w", err)
	}
	list, err := exec.Command("/bin/busybox", "--list").Output()
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	add := func(h *tar.Header, body []byte) error {
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		_, err := tw.Write(body)
		return err
	}
	for _, d := range []string{"bin", "etc", "tmp", "proc", "sys", "dev", "root"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return nil, err
		}
		if err := add(&tar.Header{Name: d + "/", Typeflag: tar.TypeDir, Mode: 0o755}, nil); err != nil {
			return nil, err
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "bin", "busybox"), bb, 0o755); err != nil {
		return nil, err
	}
	if err := add(&tar.Header{Name: "bin/busybox", Mode: 0o755, Size: int64(len(bb))}, bb); err != nil {
		return nil, err
	}
	for _, applet := range strings.Fields(string(list)) {
		if applet == "busybox" {
			continue
		}
		if err := os.Symlink("busybox", filepath.Join(dir, "bin", applet)); err != nil {
			return nil, err
		}
		if err := add(&tar.Header{Name: "bin/" + applet, Typeflag: tar.TypeSymlink, Linkname: "busybox", Mode: 0o777}, nil); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func writeImage(path string, layerTar []byte) error {
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(layerTar)), nil })
	if err != nil {
		return err
	}
	img, err := mutate.AppendLayers(empty.Image, l)
	if err != nil {
		return err
	}
	cf, _ := img.ConfigFile()
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", "amd64"
	cf.Config.Env = []string{"PATH=/bin"}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return err
	}
	tag, _ := name.NewTag("local/busybox:bench")
	return tarball.WriteToFile(path, tag, img)
}

// specParts is -spec-parts.
var specParts bool

// specPartList are the parts of corral's spec -spec-parts takes out, one
// at a time, and all together.
var specPartList = []struct {
	name string
	drop func(*specs.Spec)
}{
	{"seccomp", func(s *specs.Spec) { s.Linux.Seccomp = nil }},
	{"the user namespace", dropUserns},
	{"masked and read-only paths", func(s *specs.Spec) { s.Linux.MaskedPaths, s.Linux.ReadonlyPaths = nil, nil }},
	{"all three", func(s *specs.Spec) {
		s.Linux.Seccomp = nil
		dropUserns(s)
		s.Linux.MaskedPaths, s.Linux.ReadonlyPaths = nil, nil
	}},
}

// dropUserns takes the user namespace and its ID mappings out of s.
func dropUserns(s *specs.Spec) {
	s.Linux.Namespaces = slices.DeleteFunc(s.Linux.Namespaces, func(ns specs.LinuxNamespace) bool { return ns.Type == specs.UserNamespace })
	s.Linux.UIDMappings, s.Linux.GIDMappings = nil, nil
	for i := range s.Mounts {
		s.Mounts[i].UIDMappings, s.Mounts[i].GIDMappings = nil, nil
	}
}

// rawRunCorralSpecWithout times `runc run` of `true` in the spec
// rawRuncInCorralSpec wrote, with drop applied.
func rawRunCorralSpecWithout(dir, name string, drop func(*specs.Spec), n int) ([]time.Duration, error) {
	b, err := os.ReadFile(filepath.Join(dir, "bundle-corral-spec", "config.json"))
	if err != nil {
		return nil, err
	}
	var spec specs.Spec
	if err := json.Unmarshal(b, &spec); err != nil {
		return nil, err
	}
	drop(&spec)
	bundle := filepath.Join(dir, "bundle-corral-spec-without-"+strings.ReplaceAll(name, " ", "-"))
	if err := os.MkdirAll(bundle, 0o755); err != nil {
		return nil, err
	}
	if b, err = json.Marshal(&spec); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(bundle, "config.json"), b, 0o600); err != nil {
		return nil, err
	}
	return rawRun("runc", filepath.Join(dir, "runc-root-"+filepath.Base(bundle)), bundle, n)
}

// rawRuncInCorralSpec times `runc run` of `true` in the spec corral
// writes for a sandbox of the default tier, taken from a sandbox made for
// it (data is the native runtime's data dir), on the busybox root.
func rawRuncInCorralSpec(bin, data, dir string, n int) ([]time.Duration, error) {
	base, stop, err := startServer(bin, "oci", data, filepath.Join(dir, "server-spec.log"))
	if err != nil {
		return nil, err
	}
	_, id, err := tti(base, "")
	var template []byte
	if err == nil {
		template, err = os.ReadFile(filepath.Join(data, "oci", "run", "bundles", id, "config.json"))
		_ = del(base, id)
	}
	stop()
	if err != nil {
		return nil, err
	}
	// The user namespace's root must reach the root file system.
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, err
	}
	bundle := filepath.Join(dir, "bundle-corral-spec")
	if err := os.MkdirAll(bundle, 0o755); err != nil {
		return nil, err
	}
	rootfs := filepath.Join(dir, "bundle", "rootfs")
	spec, err := rawspec.FromTemplate(template, bundle, rootfs, []string{"/bin/true"})
	if err != nil {
		return nil, err
	}
	spec.Linux.CgroupsPath = "/corral/tti-raw-spec"
	b, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(bundle, "config.json"), b, 0o600); err != nil {
		return nil, err
	}
	return rawRun("runc", filepath.Join(dir, "runc-root-spec"), bundle, n)
}
