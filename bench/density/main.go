// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

// Command density creates idle sandboxes (`host` image, `sleep`) on the
// native runtime until a target count, with a few concurrent clients, in
// blocks (500 by default), and reports for each block its creates per
// second, the memory per sandbox so far (the drop of the system's
// MemAvailable) and the server's CPU per create; then, at the end, memory
// per sandbox three ways (MemAvailable, the sandboxes' memory cgroups,
// and the PSS of their processes: init, execd and the entrypoint), what
// the server holds per sandbox (its RSS growth), and that every sandbox
// still runs a command.
//
// The baseline, measured in the same run before corral's, in the same
// blocks and at the same concurrency: containers made by runc alone from
// the runtime spec corral wrote for a sandbox of the same request (the
// same namespaces, its user namespace's ID mapping included, the same
// seccomp profile, capabilities, limits, masked and read-only paths),
// with PID 1 a busybox `sleep` on one shared read-only root in place of
// corral init on the host image's overlays, and without corral's own
// binds (-plain: runc's default spec instead, the floor of any
// container). What corral adds over it is its own cost: the root's
// overlays, staging, init and execd, the network, the records.
//
// -png writes the curves (creates/s and memory per sandbox against the
// count, corral beside runc alone) as a PNG. Needs root, runc and busybox.
//
//	go run ./bench/density [-n 3000] [-block 500] [-concurrency 4] [-baseline 3000] [-png density.png]
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/bench/internal/benchsrv"
	"github.com/corral-dev/corral/bench/internal/chart"
	"github.com/corral-dev/corral/bench/internal/rawspec"
	"github.com/corral-dev/corral/sdk"
)

// block is what is measured of a block of creates.
type block struct {
	count    int // sandboxes (or containers) after it
	made     int // created in it
	wall     time.Duration
	rate     float64 // its creates per second
	failed   int64
	mib      float64 // MemAvailable drop per sandbox so far
	serverMs float64 // the server's CPU (with its runc) per create in it
	ownMs    float64 // of which the server's own (and its helper's), without the runtimes it ran
}

func main() {
	n := flag.Int("n", 3000, "idle sandboxes to reach")
	blockSize := flag.Int("block", 500, "sandboxes per measured block")
	conc := flag.Int("concurrency", 4, "concurrent creates")
	baseline := flag.Int("baseline", -1, "containers of the runc-alone baseline (0: none; default: -n)")
	plain := flag.Bool("plain", false, "the baseline in runc's default spec, not corral's")
	pngPath := flag.String("png", "", "write the chart here")
	flag.Parse()
	if *baseline < 0 {
		*baseline = *n
	}
	if *n < 1 || *conc < 1 || *blockSize < 1 {
		fmt.Fprintln(os.Stderr, "density: -n, -block and -concurrency must be at least 1")
		os.Exit(2)
	}
	if err := bench(*n, *blockSize, *conc, *baseline, *plain, *pngPath); err != nil {
		fmt.Fprintln(os.Stderr, "density:", err)
		os.Exit(1)
	}
}

func bench(n, size, conc, baseline int, plain bool, pngPath string) error {
	srv, err := benchsrv.Start("--runtime", "oci")
	if err != nil {
		return err
	}
	defer srv.Close()
	c := srv.Admin
	ctx := context.Background()
	timeout := int64(3600)
	req := api.CreateSandboxRequest{Image: &api.ImageSpec{URI: "host"}, Timeout: &timeout, Entrypoint: []string{"sleep", "86400"}}
	// The warm-up sandbox's runtime spec is the baseline's shape.
	sb, err := c.CreateSandbox(ctx, req, sdk.CreateOptions{})
	if err != nil {
		return err
	}
	template, err := os.ReadFile(filepath.Join(srv.Data, "oci", "run", "bundles", sb.ID, "config.json"))
	if err != nil && !plain {
		return fmt.Errorf("the warm-up sandbox's runtime spec: %w", err)
	}
	if err := c.DeleteSandbox(ctx, sb.ID); err != nil {
		return err
	}
	v, _ := exec.Command("runc", "--version").Output()
	fmt.Printf("runc: %s\n\n", bytes.SplitN(v, []byte("\n"), 2)[0])

	var raw []block
	if baseline > 0 {
		if plain {
			template = nil
		}
		if raw, err = rawRunc(template, baseline, size, conc); err != nil {
			return fmt.Errorf("baseline: %w", err)
		}
	}
	_, err = run(srv, req, n, size, conc, func(blocks []block) error { return report(blocks, raw, size, conc, plain, pngPath) })
	return err
}

// report prints the blocks' table beside the baseline's and draws the
// chart: as soon as the creates are done, before the long checks.
func report(blocks, raw []block, size, conc int, plain bool, pngPath string) error {
	fmt.Printf("\nby block of %d, %d concurrent creates (runc alone: %s)\n\n", size, conc, map[bool]string{true: "runc's default spec", false: "corral's spec"}[plain])
	fmt.Println("| sandboxes | runc alone creates/s | corral creates/s | ratio | runc alone MiB each | corral MiB each | server CPU per create (with its runc) | of which the server's own |")
	fmt.Println("|---:|---:|---:|---:|---:|---:|---:|---:|")
	for i, b := range blocks {
		r, ratio, rmib := "—", "—", "—"
		if i < len(raw) {
			r, ratio, rmib = fmt.Sprintf("%.1f", raw[i].rate), fmt.Sprintf("%.2f×", b.rate/raw[i].rate), fmt.Sprintf("%.2f", raw[i].mib)
		}
		fmt.Printf("| %d | %s | %.1f | %s | %s | %.2f | %.1f ms | %.1f ms |\n", b.count, r, b.rate, ratio, rmib, b.mib, b.serverMs, b.ownMs)
	}
	if pngPath == "" {
		return nil
	}
	series := func(name string, bs []block, y func(block) float64) chart.Series {
		s := chart.Series{Name: name}
		for _, b := range bs {
			s.X, s.Y = append(s.X, float64(b.count)), append(s.Y, y(b))
		}
		return s
	}
	rate, mib := func(b block) float64 { return b.rate }, func(b block) float64 { return b.mib }
	rawName := "runc alone (corral's spec, busybox sleep)"
	if plain {
		rawName = "runc alone (runc's default spec)"
	}
	panels := []chart.Panel{
		{Title: fmt.Sprintf("creates per second, %d concurrent, each block of %d", conc, size), XLabel: "sandboxes", YLabel: "creates/s", YFromZero: true,
			Lines: []chart.Series{series("corral", blocks, rate)}},
		{Title: "memory per idle sandbox (system MemAvailable drop)", XLabel: "sandboxes", YLabel: "MiB", YFromZero: true,
			Lines: []chart.Series{series("corral", blocks, mib)}},
	}
	if len(raw) > 0 {
		panels[0].Lines = append(panels[0].Lines, series(rawName, raw, rate))
		panels[1].Lines = append(panels[1].Lines, series(rawName, raw, mib))
	}
	if err := chart.Lines(pngPath, panels...); err != nil {
		return err
	}
	fmt.Printf("\nchart: %s\n", pngPath)
	return nil
}

// inBlocks makes n things with conc workers calling make(i), block by
// block, and calls measure after each block with its wall time.
func inBlocks(n, size, conc int, make func(i int) error, measure func(b *block)) ([]block, error) {
	var blocks []block
	var lastErr atomic.Value
	for from := 0; from < n; from += size {
		to := min(from+size, n)
		var failed atomic.Int64
		next := atomic.Int64{}
		next.Store(int64(from))
		start := time.Now()
		var wg sync.WaitGroup
		for range conc {
			wg.Go(func() {
				for i := next.Add(1) - 1; i < int64(to); i = next.Add(1) - 1 {
					if err := make(int(i)); err != nil {
						failed.Add(1)
						lastErr.Store(err)
					}
				}
			})
		}
		wg.Wait()
		wall := time.Since(start)
		b := block{count: to, made: to - from - int(failed.Load()), wall: wall, failed: failed.Load()}
		b.rate = float64(b.made) / wall.Seconds()
		measure(&b)
		blocks = append(blocks, b)
		fmt.Fprintf(os.Stderr, "density: %d after %s (%.1f/s, %d failed), %.2f MiB each\n", to, wall.Round(time.Millisecond), b.rate, b.failed, b.mib)
		if b.failed == int64(to-from) {
			return blocks, fmt.Errorf("every create of a block failed: %v", lastErr.Load())
		}
	}
	if err, ok := lastErr.Load().(error); ok {
		fmt.Printf("last create error: %v\n\n", err)
	}
	return blocks, nil
}

func run(srv *benchsrv.Server, req api.CreateSandboxRequest, n, size, conc int, reported func([]block) error) ([]block, error) {
	c := srv.Admin
	ctx := context.Background()
	dropCaches()
	before, serverBefore := meminfo(), int64(srv.Gauges()["process_resident_memory_bytes"])
	busyBefore, serverCPUBefore := cpuBusy(), procCPU(srv.Pid())
	ids := make([]string, n)
	lapCPU, lapOwn := serverCPUBefore, serverOwnCPU(srv.Pid())
	blocks, err := inBlocks(n, size, conc, func(i int) error {
		sb, err := c.CreateSandbox(ctx, req, sdk.CreateOptions{})
		if err == nil {
			ids[i] = sb.ID
		}
		return err
	}, func(b *block) {
		if b.made > 0 {
			b.serverMs = float64((procCPU(srv.Pid()) - lapCPU).Microseconds()) / 1000 / float64(b.made)
			b.ownMs = float64((serverOwnCPU(srv.Pid()) - lapOwn).Microseconds()) / 1000 / float64(b.made)
		}
		time.Sleep(5 * time.Second) // let the new sandboxes' start-up garbage settle
		dropCaches()
		b.mib = float64(before["MemAvailable"]-meminfo()["MemAvailable"]) / float64(count(ids)) / (1 << 20)
		lapCPU, lapOwn = procCPU(srv.Pid()), serverOwnCPU(srv.Pid())
	})
	busy, serverCPU := cpuBusy()-busyBefore, procCPU(srv.Pid())-serverCPUBefore
	ids = slices.DeleteFunc(ids, func(id string) bool { return id == "" })
	defer func() {
		// Deleted four at a time, as they were made.
		work := make(chan string)
		var dwg sync.WaitGroup
		for range conc {
			dwg.Go(func() {
				for id := range work {
					_ = c.DeleteSandbox(ctx, id)
				}
			})
		}
		for _, id := range ids {
			work <- id
		}
		close(work)
		dwg.Wait()
	}()
	if failed := sumFailed(blocks); failed > 0 {
		// Why, from the server's log (its last three reasons).
		var why []string
		for line := range strings.SplitSeq(srv.Log(), "\n") {
			if strings.Contains(line, "start failed") {
				why = append(why, line)
			}
		}
		fmt.Printf("%d creates failed; the server's last reasons:\n%s\n\n", failed, strings.Join(why[max(0, len(why)-3):], "\n"))
	}
	if err != nil {
		return blocks, err
	}
	if err := reported(blocks); err != nil {
		return blocks, err
	}
	dropCaches()
	after, serverAfter := meminfo(), int64(srv.Gauges()["process_resident_memory_bytes"])
	cg, pss, procs, tasks := cgroupsAndPSS(ids)

	// Every one still answers.
	var answered atomic.Int64
	var silent sync.Map // id → why it did not answer
	work := make(chan string)
	var awg sync.WaitGroup
	ask := func(id string) error {
		// A sandbox that does not answer in a minute is reported, not
		// waited for.
		ctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		x, err := c.Sandbox(ctx, id, sdk.SandboxOptions{})
		if err != nil {
			return err
		}
		out, errOut, code, err := x.Run(ctx, "echo ok", sdk.CommandOptions{})
		if err == nil && (code != 0 || out != "ok\n") {
			err = fmt.Errorf("exit %d, stdout %q, stderr %q", code, out, errOut)
		}
		return err
	}
	for range conc {
		awg.Go(func() {
			for id := range work {
				if err := ask(id); err != nil {
					silent.Store(id, err)
					continue
				}
				answered.Add(1)
			}
		})
	}
	for _, id := range ids {
		work <- id
	}
	close(work)
	awg.Wait()

	k := float64(len(ids))
	mib := func(b float64) float64 { return b / (1 << 20) }
	fmt.Printf("\ndensity: %d idle sandboxes (`host` image, sleep), native runtime, %d concurrent creates\n\n", len(ids), conc)
	fmt.Println("| measure | value |")
	fmt.Println("|---|---:|")
	fmt.Printf("| created (pauses between blocks excluded) | %d in %s |\n", len(ids), sumWall(blocks).Round(time.Second))
	per := func(field string) float64 { return mib(float64(before[field]-after[field]) / k) }
	grew := func(field string) float64 { return -per(field) }
	fmt.Printf("| system MemAvailable drop per sandbox | %.2f MiB |\n", per("MemAvailable"))
	fmt.Printf("| of which: anonymous memory (user space) / slab / kernel stacks / page tables | %.2f / %.2f / %.2f / %.2f MiB |\n",
		grew("AnonPages"), grew("Slab"), grew("KernelStack"), grew("PageTables"))
	fmt.Printf("| memory cgroup usage per sandbox (its processes' memory and kernel objects) | %.2f MiB |\n", mib(float64(cg)/k))
	fmt.Printf("| PSS per sandbox (%.1f processes each: init, execd, entrypoint) | %.2f MiB |\n", float64(procs)/k, mib(float64(pss)/k))
	fmt.Printf("| tasks (threads) per sandbox; kernel.pid_max bounds them all | %.1f; %s |\n", float64(tasks)/k, strings.TrimSpace(readFile("/proc/sys/kernel/pid_max")))
	fmt.Printf("| server RSS growth per sandbox | %.1f KiB |\n", float64(serverAfter-serverBefore)/k/1024)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / k }
	fmt.Printf("| CPU per create (pauses included): the machine's / the server's (with the runc it ran) / the sandbox's (runc's init, corral init, execd, since start) | %.1f / %.1f / %.1f ms |\n",
		ms(busy), ms(serverCPU), ms(sandboxCPU(ids)))
	fmt.Printf("| answered a command afterwards | %d of %d |\n", answered.Load(), len(ids))
	silent.Range(func(id, why any) bool {
		// Once more, alone: a sandbox that answers now was only slow.
		again := ask(id.(string))
		fmt.Printf("\nsandbox %s did not answer: %v; asked again alone: %v\n", id, why, again)
		return true
	})
	return blocks, nil
}

func count(ids []string) int {
	k := 0
	for _, id := range ids {
		if id != "" {
			k++
		}
	}
	return max(k, 1)
}

func sumFailed(bs []block) int64 {
	var n int64
	for _, b := range bs {
		n += b.failed
	}
	return n
}

func sumWall(bs []block) time.Duration {
	var d time.Duration
	for _, b := range bs {
		d += b.wall
	}
	return d
}

// rawRunc is the baseline: k containers by runc alone, conc at a time,
// in blocks, from template (see rawSpec), each in a bundle of its own
// (its own cgroup, under corral's parent).
func rawRunc(template []byte, k, size, conc int) ([]block, error) {
	dir, err := os.MkdirTemp("", "density-runc-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	// The user namespace's root must reach the root.
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, err
	}
	rootfs, state := filepath.Join(dir, "rootfs"), filepath.Join(dir, "state")
	for _, d := range []string{"bin", "proc", "dev", "sys", "tmp"} {
		if err := os.MkdirAll(filepath.Join(rootfs, d), 0o755); err != nil {
			return nil, err
		}
	}
	if out, err := exec.Command("cp", "/bin/busybox", filepath.Join(rootfs, "bin", "busybox")).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("copy busybox (apt-get install busybox-static): %v %s", err, out)
	}
	spec, err := rawspec.FromTemplate(template, dir, rootfs, []string{"/bin/busybox", "sleep", "86400"})
	if err != nil {
		return nil, err
	}
	runc := func(bundle string, args ...string) error {
		// A file, not a pipe: a detached container keeps runc's output
		// descriptors, and a pipe would never see its end.
		out, err := os.CreateTemp(dir, "out-")
		if err != nil {
			return err
		}
		defer os.Remove(out.Name())
		defer out.Close()
		cmd := exec.Command("runc", append([]string{"--root", state}, args...)...)
		cmd.Dir, cmd.Stdout, cmd.Stderr = bundle, out, out
		if err := cmd.Run(); err != nil {
			b, _ := os.ReadFile(out.Name())
			return fmt.Errorf("runc %s: %v %s", strings.Join(args, " "), err, bytes.TrimSpace(b))
		}
		return nil
	}
	ids := make([]string, k)
	for i := range ids {
		ids[i] = fmt.Sprintf("density-raw-%d-%d", os.Getpid(), i)
	}
	defer func() {
		for _, id := range ids {
			_ = runc(dir, "delete", "--force", id)
		}
	}()
	dropCaches()
	before := meminfo()
	made := 0
	blocks, err := inBlocks(k, size, conc, func(i int) error {
		// Its own bundle, as corral writes one per sandbox.
		bundle := filepath.Join(dir, "bundles", ids[i])
		if err := os.MkdirAll(bundle, 0o700); err != nil {
			return err
		}
		s := *spec
		l := *spec.Linux
		l.CgroupsPath = "/corral/" + ids[i]
		// An ID range of its own, as each sandbox has: the kernel bounds
		// what one user holds (200 keys: runc's session keyrings).
		l.UIDMappings, l.GIDMappings = rawspec.Shift(l.UIDMappings, i), rawspec.Shift(l.GIDMappings, i)
		s.Linux, s.Hostname = &l, "raw"
		b, err := json.Marshal(&s)
		if err == nil {
			err = os.WriteFile(filepath.Join(bundle, "config.json"), b, 0o600)
		}
		if err != nil {
			return err
		}
		return runc(bundle, "run", "--detach", "--bundle", bundle, ids[i])
	}, func(b *block) {
		made += b.made
		time.Sleep(2 * time.Second)
		dropCaches()
		b.mib = float64(before["MemAvailable"]-meminfo()["MemAvailable"]) / float64(max(made, 1)) / (1 << 20)
	})
	if err != nil {
		return blocks, err
	}
	dropCaches()
	after := meminfo()
	var ns []string
	for _, n := range spec.Linux.Namespaces {
		ns = append(ns, string(n.Type))
	}
	fmt.Printf("baseline: %d containers by runc alone, %d concurrent; namespaces %s; ID mapping %d ranges; seccomp %v; %d mounts\n\n",
		made, conc, strings.Join(ns, ","), len(spec.Linux.UIDMappings), spec.Linux.Seccomp != nil, len(spec.Mounts))
	fmt.Println("| measure | value |")
	fmt.Println("|---|---:|")
	grew := func(field string) float64 {
		return float64(after[field]-before[field]) / float64(max(made, 1)) / (1 << 20)
	}
	fmt.Printf("| system MemAvailable drop per container | %.2f MiB |\n", -grew("MemAvailable"))
	fmt.Printf("| of which: anonymous memory (user space) / slab / kernel stacks / page tables | %.2f / %.2f / %.2f / %.2f MiB |\n\n",
		grew("AnonPages"), grew("Slab"), grew("KernelStack"), grew("PageTables"))
	return blocks, nil
}

// cpuBusy is the time all CPUs of the machine spent not idle.
func cpuBusy() time.Duration {
	for line := range strings.SplitSeq(readFile("/proc/stat"), "\n") {
		f := strings.Fields(line)
		if len(f) < 9 || f[0] != "cpu" {
			continue
		}
		var ticks int64
		for i, v := range f[1:9] {
			if i == 3 || i == 4 { // idle, iowait
				continue
			}
			n, _ := strconv.ParseInt(v, 10, 64)
			ticks += n
		}
		return time.Duration(ticks) * (time.Second / 100)
	}
	return 0
}

// procCPU is the CPU time of the server at pid, of the children it
// reaped (the runtimes it ran) and of its helper.
func procCPU(pid int) time.Duration { return serverCPU(pid, true) }

// serverOwnCPU is procCPU without the children it reaped.
func serverOwnCPU(pid int) time.Duration { return serverCPU(pid, false) }

func serverCPU(pid int, reaped bool) time.Duration {
	total := cpuOf(pid, reaped)
	// Its long-lived helper, which it does not wait for while it runs
	// (corral userns-maker): its work is the server's. (Other children,
	// the runtimes it runs, count once waited for.)
	for _, task := range readDir("/proc/" + strconv.Itoa(pid) + "/task") {
		for child := range strings.FieldsSeq(readFile("/proc/" + strconv.Itoa(pid) + "/task/" + task + "/children")) {
			if strings.Contains(readFile("/proc/"+child+"/cmdline"), "userns-maker") {
				c, _ := strconv.Atoi(child)
				total += cpuOf(c, reaped)
			}
		}
	}
	return total
}

// cpuOf is the CPU time of process pid, and of the children it waited
// for if reaped.
func cpuOf(pid int, reaped bool) time.Duration {
	_, rest, ok := strings.Cut(readFile("/proc/"+strconv.Itoa(pid)+"/stat"), ") ")
	if f := strings.Fields(rest); ok && len(f) > 14 {
		fields := f[11:15] // utime, stime, cutime, cstime
		if !reaped {
			fields = f[11:13]
		}
		var ticks int64
		for _, v := range fields {
			n, _ := strconv.ParseInt(v, 10, 64)
			ticks += n
		}
		return time.Duration(ticks) * (time.Second / 100)
	}
	return 0
}

// sandboxCPU is the CPU time the sandboxes' cgroups used (cgroup v1's
// cpuacct, else v2's cpu.stat).
func sandboxCPU(ids []string) time.Duration {
	var total time.Duration
	for _, id := range ids {
		if b := readFile("/sys/fs/cgroup/cpuacct/corral/" + id + "/cpuacct.usage"); b != "" {
			n, _ := strconv.ParseInt(strings.TrimSpace(b), 10, 64)
			total += time.Duration(n)
		} else if v, ok := strings.CutPrefix(readFile("/sys/fs/cgroup/corral/"+id+"/cpu.stat"), "usage_usec "); ok {
			n, _ := strconv.ParseInt(strings.Fields(v)[0], 10, 64)
			total += time.Duration(n) * time.Microsecond
		}
	}
	return total
}

func dropCaches() { _ = os.WriteFile("/proc/sys/vm/drop_caches", []byte("3"), 0) }

func readFile(name string) string {
	b, _ := os.ReadFile(name)
	return string(b)
}

// meminfo is /proc/meminfo, in bytes by field.
func meminfo() map[string]int64 {
	m := map[string]int64{}
	for _, line := range strings.Split(readFile("/proc/meminfo"), "\n") {
		if name, rest, ok := strings.Cut(line, ":"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			m[name] = kb << 10
		}
	}
	return m
}

// cgroupsAndPSS sums the sandboxes' memory cgroup usage (cgroup v1) and
// the PSS and threads of the processes in them.
func cgroupsAndPSS(ids []string) (usage, pss int64, procs, tasks int) {
	for _, id := range ids {
		cg := filepath.Join("/sys/fs/cgroup/memory/corral", id)
		if b, err := os.ReadFile(filepath.Join(cg, "memory.usage_in_bytes")); err == nil {
			v, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
			usage += v
		}
		b, _ := os.ReadFile(filepath.Join(cg, "cgroup.procs"))
		for _, p := range strings.Fields(string(b)) {
			procs++
			if t, err := os.ReadDir("/proc/" + p + "/task"); err == nil {
				tasks += len(t)
			}
			r, err := os.ReadFile("/proc/" + p + "/smaps_rollup")
			if err != nil {
				continue
			}
			for _, line := range bytes.Split(r, []byte("\n")) {
				if rest, ok := bytes.CutPrefix(line, []byte("Pss:")); ok {
					kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(string(rest)), " kB"), 10, 64)
					pss += kb << 10
				}
			}
		}
	}
	return usage, pss, procs, tasks
}

// readDir lists the names in dir (none if it cannot be read).
func readDir(dir string) []string {
	ents, _ := os.ReadDir(dir)
	out := make([]string, 0, len(ents))
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}
