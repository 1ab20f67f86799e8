// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package execd

import (
	"bufio"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/corral-dev/corral/api"
)

// cgroupFS reads the resource figures of the cgroup execd runs in, on
// cgroup v2 or the v1 hierarchies, falling back to the host's figures.
type cgroupFS struct {
	v2   string // the unified cgroup directory, if any
	mem1 string // v1 memory controller directory
	acct string // v1 cpuacct directory
	cpu1 string // v1 cpu directory (quota)
}

func findCgroup() cgroupFS {
	var c cgroupFS
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		return c
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		ctrls, path := parts[1], parts[2]
		switch {
		case parts[0] == "0" && ctrls == "":
			for _, root := range []string{"/sys/fs/cgroup", "/sys/fs/cgroup/unified"} {
				dir := filepath.Join(root, path)
				if _, err := os.Stat(filepath.Join(dir, "cgroup.controllers")); err == nil {
					c.v2 = dir
					break
				}
			}
		case hasController(ctrls, "memory"):
			c.mem1 = v1Dir(ctrls, path)
		}
		if hasController(ctrls, "cpuacct") {
			c.acct = v1Dir(ctrls, path)
		}
		if hasController(ctrls, "cpu") {
			c.cpu1 = v1Dir(ctrls, path)
		}
	}
	return c
}

func hasController(list, name string) bool {
	for _, c := range strings.Split(list, ",") {
		if c == name {
			return true
		}
	}
	return false
}

// v1Dir finds a v1 controller's directory for a cgroup path.
func v1Dir(ctrls, path string) string {
	for _, name := range append([]string{ctrls}, strings.Split(ctrls, ",")...) {
		dir := filepath.Join("/sys/fs/cgroup", name, path)
		if _, err := os.Stat(dir); err == nil {
			return dir
		}
	}
	return ""
}

func readInt(path string) (int64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	s := strings.TrimSpace(string(b))
	if s == "max" {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}

func readKey(path, key string) (int64, bool) {
	f, err := os.Open(path)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), " "); ok && k == key {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// hostMemTotal reads MemTotal from /proc/meminfo, in bytes.
func hostMemTotal() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return n * 1024
		}
	}
	return 0
}

// memory returns the limit and usage in bytes.
func (c cgroupFS) memory() (total, used int64) {
	total = hostMemTotal()
	switch {
	case c.v2 != "":
		if n, ok := readInt(filepath.Join(c.v2, "memory.max")); ok && n < total {
			total = n
		}
		used, _ = readInt(filepath.Join(c.v2, "memory.current"))
		if inactive, ok := readKey(filepath.Join(c.v2, "memory.stat"), "inactive_file"); ok && inactive < used {
			used -= inactive
		}
	case c.mem1 != "":
		if n, ok := readInt(filepath.Join(c.mem1, "memory.limit_in_bytes")); ok && n < total {
			total = n
		}
		used, _ = readInt(filepath.Join(c.mem1, "memory.usage_in_bytes"))
		if inactive, ok := readKey(filepath.Join(c.mem1, "memory.stat"), "total_inactive_file"); ok && inactive < used {
			used -= inactive
		}
	}
	return total, used
}

// cpuUsage returns the cgroup's CPU time in nanoseconds.
func (c cgroupFS) cpuUsage() (int64, bool) {
	if c.v2 != "" {
		if us, ok := readKey(filepath.Join(c.v2, "cpu.stat"), "usage_usec"); ok {
			return us * 1000, true
		}
	}
	if c.acct != "" {
		return readInt(filepath.Join(c.acct, "cpuacct.usage"))
	}
	return 0, false
}

// cpuLimit returns the CPUs the cgroup may use.
func (c cgroupFS) cpuLimit() float64 {
	n := float64(runtime.NumCPU())
	if c.v2 != "" {
		if b, err := os.ReadFile(filepath.Join(c.v2, "cpu.max")); err == nil {
			f := strings.Fields(string(b))
			if len(f) == 2 && f[0] != "max" {
				q, _ := strconv.ParseFloat(f[0], 64)
				p, _ := strconv.ParseFloat(f[1], 64)
				if q > 0 && p > 0 {
					n = min(n, q/p)
				}
			}
		}
	} else if c.cpu1 != "" {
		q, ok1 := readInt(filepath.Join(c.cpu1, "cpu.cfs_quota_us"))
		p, ok2 := readInt(filepath.Join(c.cpu1, "cpu.cfs_period_us"))
		if ok1 && ok2 && q > 0 && p > 0 {
			n = min(n, float64(q)/float64(p))
		}
	}
	return n
}

// sampler measures CPU utilisation between one request and the next. It
// samples only when asked, never in the background: an idle sandbox's
// execd then wakes for nothing (a one-second ticker cost each idle
// sandbox about 0.4 ms of CPU a second, its file reads and the Go
// scheduler's wake-ups; at thousands of sandboxes, whole cores). A client
// that polls, or watches, gets the utilisation over its own interval; the
// first request after a quiet spell gets the average over that spell.
type sampler struct {
	cg cgroupFS

	// mu guards the fields below.
	mu       sync.Mutex
	lastTime time.Time
	lastCPU  int64
	pct      float64
}

// minSample is the shortest interval a utilisation is measured over: a
// request sooner than that after the last sample gets the last value.
const minSample = time.Second

func newSampler() *sampler {
	s := &sampler{cg: findCgroup()}
	s.sample(time.Now())
	return s
}

// sample updates the utilisation from the CPU time used since the last
// sample, if that is at least minSample ago.
func (s *sampler) sample(now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.lastTime.IsZero() && now.Sub(s.lastTime) < minSample {
		return
	}
	used, ok := s.cg.cpuUsage()
	if !ok {
		return
	}
	if !s.lastTime.IsZero() {
		if dt := now.Sub(s.lastTime); dt > 0 {
			s.pct = float64(used-s.lastCPU) / float64(dt.Nanoseconds()) / s.cg.cpuLimit() * 100
			s.pct = max(0, min(100, s.pct))
		}
	}
	s.lastTime, s.lastCPU = now, used
}

func (s *sampler) metrics() api.Metrics {
	s.sample(time.Now())
	total, used := s.cg.memory()
	s.mu.Lock()
	pct := s.pct
	s.mu.Unlock()
	return api.Metrics{
		CPUCount: s.cg.cpuLimit(), CPUUsedPct: pct,
		MemTotalMiB: float64(total) / (1 << 20), MemUsedMiB: float64(used) / (1 << 20),
		Timestamp: time.Now().UnixMilli(),
	}
}
