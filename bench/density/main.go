// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

// Command density creates idle sandboxes (`host` image, `sleep`) on the
// native runtime until a target count, with a few concurrent clients, and
// reports creates per second, memory per sandbox three ways (the drop of
// the system's MemAvailable, the sandboxes' memory cgroups, and the PSS
// of their processes: init, execd and the entrypoint), what the server
// holds per sandbox (its RSS growth), and that every sandbox still runs
// a command at the end. Needs root and runc.
//
// The baseline, measured in the same run before corral's: -baseline
// containers made with runc alone, at the same concurrency, each a
// busybox `sleep` on one shared read-only root with runc's default
// namespaces (network included) and nothing else — what this machine's
// runc can do at best, and the floor of a container's memory.
//
//	go run ./bench/density [-n 1000] [-concurrency 4] [-baseline 200]
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
	n := flag.Int("n", 1000, "idle sandboxes to reach")
	conc := flag.Int("concurrency", 4, "concurrent creates")
	baseline := flag.Int("baseline", 200, "containers of the raw runc baseline (0: none)")
	flag.Parse()
	if *n < 1 || *conc < 1 || *baseline < 0 {
		fmt.Fprintln(os.Stderr, "density: -n and -concurrency must be at least 1, -baseline at least 0")
		os.Exit(2)
	}
	if *baseline > 0 {
		if err := rawRunc(*baseline, *conc); err != nil {
			fmt.Fprintln(os.Stderr, "density: baseline:", err)
			os.Exit(1)
		}
	}
	if err := run(*n, *conc); err != nil {
		fmt.Fprintln(os.Stderr, "density:", err)
		os.Exit(1)
	}
}

func run(n, conc int) error {
	srv, err := benchsrv.Start("--runtime", "oci")
	if err != nil {
		return err
	}
	defer srv.Close()
	c := srv.Admin
	ctx := context.Background()
	timeout := int64(3600)
	req := api.CreateSandboxRequest{Image: &api.ImageSpec{URI: "host"}, Timeout: &timeout, Entrypoint: []string{"sleep", "86400"}}
	if sb, err := c.CreateSandbox(ctx, req, sdk.CreateOptions{}); err != nil { // warm-up
		return err
	} else if err := c.DeleteSandbox(ctx, sb.ID); err != nil {
		return err
	}
	dropCaches()
	before, serverBefore := meminfo(), int64(srv.Gauges()["process_resident_memory_bytes"])
	busyBefore, serverCPUBefore := cpuBusy(), procCPU(srv.Pid())

	var mu sync.Mutex
	var ids []string
	var failed atomic.Int64
	var lastErr atomic.Value
	next := atomic.Int64{}
	start, lap := time.Now(), time.Duration(0)
	var wg sync.WaitGroup
	for range conc {
		wg.Go(func() {
			for next.Add(1) <= int64(n) {
				sb, err := c.CreateSandbox(ctx, req, sdk.CreateOptions{})
				if err != nil {
					failed.Add(1)
					lastErr.Store(err.Error())
					continue
				}
				mu.Lock()
				ids = append(ids, sb.ID)
				if len(ids)%250 == 0 {
					// The rate of the last 250 shows whether a create costs
					// more as sandboxes pile up.
					now := time.Since(start)
					fmt.Fprintf(os.Stderr, "density: %d sandboxes after %s (the last 250 at %.1f/s)\n", len(ids), now.Round(time.Second), 250/(now-lap).Seconds())
					lap = now
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	wall := time.Since(start)
	busy, serverCPU := cpuBusy()-busyBefore, procCPU(srv.Pid())-serverCPUBefore
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
	time.Sleep(5 * time.Second) // let the new sandboxes' start-up garbage settle
	dropCaches()
	after, serverAfter := meminfo(), int64(srv.Gauges()["process_resident_memory_bytes"])
	cg, pss, procs, tasks := cgroupsAndPSS(ids)

	// Every one still answers.
	var answered atomic.Int64
	var silent sync.Map // id → why it did not answer
	work := make(chan string)
	var awg sync.WaitGroup
	ask := func(id string) error {
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
	fmt.Printf("density: %d idle sandboxes (`host` image, sleep), native runtime, %d concurrent creates\n\n", len(ids), conc)
	fmt.Println("| measure | value |")
	fmt.Println("|---|---:|")
	fmt.Printf("| created | %d in %s (%.1f/s); %d failed |\n", len(ids), wall.Round(time.Second), k/wall.Seconds(), failed.Load())
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
	fmt.Printf("| CPU per create: the machine's / the server's (with the runc it ran) / the sandbox's (runc's init, corral init, execd, since start) | %.1f / %.1f / %.1f ms |\n",
		ms(busy), ms(serverCPU), ms(sandboxCPU(ids)))
	fmt.Printf("| answered a command afterwards | %d of %d |\n", answered.Load(), len(ids))
	silent.Range(func(id, why any) bool {
		// Once more, alone: a sandbox that answers now was only slow.
		again := ask(id.(string))
		fmt.Printf("\nsandbox %s did not answer: %v; asked again alone: %v\n", id, why, again)
		return true
	})
	if e, ok := lastErr.Load().(string); ok {
		fmt.Printf("\nlast create error: %s\n", e)
	}
	return nil
}

// rawRunc is the baseline: k containers by runc alone, conc at a time.
func rawRunc(k, conc int) error {
	dir, err := os.MkdirTemp("", "density-runc-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	rootfs, state := filepath.Join(dir, "rootfs"), filepath.Join(dir, "state")
	for _, d := range []string{"bin", "proc", "dev", "sys", "tmp"} {
		if err := os.MkdirAll(filepath.Join(rootfs, d), 0o755); err != nil {
			return err
		}
	}
	if out, err := exec.Command("cp", "/bin/busybox", filepath.Join(rootfs, "bin", "busybox")).CombinedOutput(); err != nil {
		return fmt.Errorf("copy busybox (apt-get install busybox-static): %v %s", err, out)
	}
	if out, err := exec.Command("runc", "spec", "--bundle", dir).CombinedOutput(); err != nil {
		return fmt.Errorf("runc spec: %v %s", err, out)
	}
	var spec map[string]any
	b, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err == nil {
		err = json.Unmarshal(b, &spec)
	}
	if err != nil {
		return err
	}
	proc := spec["process"].(map[string]any)
	proc["terminal"], proc["args"] = false, []string{"/bin/busybox", "sleep", "86400"}
	spec["root"] = map[string]any{"path": rootfs, "readonly": true}
	if b, err = json.Marshal(spec); err == nil {
		err = os.WriteFile(filepath.Join(dir, "config.json"), b, 0o600)
	}
	if err != nil {
		return err
	}
	runc := func(args ...string) error {
		// A file, not a pipe: a detached container keeps runc's output
		// descriptors, and a pipe would never see its end.
		out, err := os.CreateTemp(dir, "out-")
		if err != nil {
			return err
		}
		defer os.Remove(out.Name())
		defer out.Close()
		cmd := exec.Command("runc", append([]string{"--root", state}, args...)...)
		cmd.Dir, cmd.Stdout, cmd.Stderr = dir, out, out
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
			_ = runc("delete", "--force", id)
		}
	}()
	dropCaches()
	before := meminfo()
	var failed atomic.Int64
	var lastErr atomic.Value
	next := atomic.Int64{}
	start := time.Now()
	var wg sync.WaitGroup
	for range conc {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(k); i = next.Add(1) - 1 {
				if err := runc("run", "--detach", "--bundle", dir, ids[i]); err != nil {
					failed.Add(1)
					lastErr.Store(err.Error())
				}
			}
		})
	}
	wg.Wait()
	wall := time.Since(start)
	time.Sleep(2 * time.Second)
	dropCaches()
	after := meminfo()
	made := float64(k - int(failed.Load()))
	fmt.Printf("baseline: %d containers by runc alone (busybox sleep, one shared read-only root, runc's default namespaces), %d concurrent\n\n", k, conc)
	fmt.Println("| measure | value |")
	fmt.Println("|---|---:|")
	fmt.Printf("| created | %.0f in %s (%.1f/s); %d failed |\n", made, wall.Round(time.Millisecond), made/wall.Seconds(), failed.Load())
	grew := func(field string) float64 { return float64(after[field]-before[field]) / made / (1 << 20) }
	fmt.Printf("| system MemAvailable drop per container | %.2f MiB |\n", -grew("MemAvailable"))
	fmt.Printf("| of which: anonymous memory (user space) / slab / kernel stacks / page tables | %.2f / %.2f / %.2f / %.2f MiB |\n\n",
		grew("AnonPages"), grew("Slab"), grew("KernelStack"), grew("PageTables"))
	if e, ok := lastErr.Load().(string); ok {
		fmt.Printf("last runc error: %s\n\n", e)
	}
	return nil
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

// procCPU is the CPU time of process pid and of the children it reaped.
func procCPU(pid int) time.Duration {
	_, rest, ok := strings.Cut(readFile("/proc/"+strconv.Itoa(pid)+"/stat"), ") ")
	if f := strings.Fields(rest); ok && len(f) > 14 {
		var ticks int64
		for _, v := range f[11:15] { // utime, stime, cutime, cstime
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
