// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package sandbox

import (
	"fmt"
	"math"
	"math/big"
	"sort"
	"strconv"
	"strings"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/errdefs"
)

const codeInvalidResourceLimit = api.CodeInvalidResourceLimit

// Bounds on what a sandbox may ask for.
const (
	MinMemoryBytes = 8 << 20
	MinDiskBytes   = 16 << 20
	MaxPids        = 1 << 22
)

// Resources are the parsed resource limits of a sandbox. Zero means "the
// runtime's default" for each field.
type Resources struct {
	// CPUMillis is the CPU limit in thousandths of a CPU.
	CPUMillis int64
	// MemoryBytes is the memory limit.
	MemoryBytes int64
	// Pids is the maximum number of processes and threads.
	Pids int64
	// DiskBytes bounds what the sandbox writes to its root file system.
	DiskBytes int64
}

// ParseResources reads the contract's resourceLimits map. Keys are cpu
// ("500m", "2", "0.5"), memory ("512Mi", "1G", "256m" meaning megabytes, as
// Docker reads it) and pids ("512"). A key it does not know or a value it
// cannot parse is an error: limits are never silently ignored.
func ParseResources(limits map[string]string) (Resources, error) {
	var r Resources
	keys := make([]string, 0, len(limits))
	for k := range limits {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := strings.TrimSpace(limits[k])
		var err error
		switch strings.ToLower(k) {
		case "cpu":
			r.CPUMillis, err = parseCPU(v)
		case "memory":
			r.MemoryBytes, err = parseMemory(v)
		case "pids":
			r.Pids, err = parsePids(v)
		case "disk":
			if r.DiskBytes, err = parseMemory(v); err == nil && r.DiskBytes < MinDiskBytes {
				err = fmt.Errorf("at least %d MiB is needed", MinDiskBytes>>20)
			}
		case "gpu":
			if v == "0" || v == "" {
				continue
			}
			return Resources{}, errdefs.Newf(errdefs.ErrInvalidArgument, codeInvalidResourceLimit,
				"resourceLimits.gpu=%q: GPUs are not supported by this server", v)
		default:
			return Resources{}, errdefs.Newf(errdefs.ErrInvalidArgument, codeInvalidResourceLimit,
				"resourceLimits.%s: unknown resource (supported: cpu, memory, pids, disk)", k)
		}
		if err != nil {
			return Resources{}, errdefs.Newf(errdefs.ErrInvalidArgument, codeInvalidResourceLimit,
				"resourceLimits.%s=%q: %v", k, limits[k], err)
		}
	}
	return r, nil
}

// Map renders r back into the contract's map form, omitting defaults.
func (r Resources) Map() map[string]string {
	m := map[string]string{}
	if r.CPUMillis > 0 {
		if r.CPUMillis%1000 == 0 {
			m["cpu"] = strconv.FormatInt(r.CPUMillis/1000, 10)
		} else {
			m["cpu"] = strconv.FormatInt(r.CPUMillis, 10) + "m"
		}
	}
	if r.MemoryBytes > 0 {
		m["memory"] = strconv.FormatInt(r.MemoryBytes, 10)
	}
	if r.Pids > 0 {
		m["pids"] = strconv.FormatInt(r.Pids, 10)
	}
	if r.DiskBytes > 0 {
		m["disk"] = strconv.FormatInt(r.DiskBytes, 10)
	}
	if len(m) == 0 {
		return nil
	}
	return m
}

func parseCPU(v string) (int64, error) {
	if v == "" {
		return 0, fmt.Errorf("empty value")
	}
	var millis *big.Rat
	if n, ok := strings.CutSuffix(v, "m"); ok {
		r, ok := new(big.Rat).SetString(n)
		if !ok || !isDecimal(n) {
			return 0, fmt.Errorf("want a number of CPUs such as 2 or 0.5, or millicpus such as 500m")
		}
		millis = r
	} else {
		r, ok := new(big.Rat).SetString(v)
		if !ok || !isDecimal(v) {
			return 0, fmt.Errorf("want a number of CPUs such as 2 or 0.5, or millicpus such as 500m")
		}
		millis = r.Mul(r, big.NewRat(1000, 1))
	}
	if !millis.IsInt() {
		return 0, fmt.Errorf("the finest unit is 1m (a thousandth of a CPU)")
	}
	n := millis.Num()
	if n.Sign() <= 0 {
		return 0, fmt.Errorf("must be positive")
	}
	if !n.IsInt64() || n.Int64() > 1024*1000 {
		return 0, fmt.Errorf("more than 1024 CPUs")
	}
	return n.Int64(), nil
}

// memoryUnits maps a lower-cased suffix to its multiplier. Decimal suffixes
// follow Kubernetes (k, M, G...) and Docker (lower-case m and g mean mega
// and giga): a milli-byte is never what anyone means.
func memoryUnit(suffix string) (int64, bool) {
	switch strings.ToLower(suffix) {
	case "", "b":
		return 1, true
	case "k", "kb":
		return 1e3, true
	case "m", "mb":
		return 1e6, true
	case "g", "gb":
		return 1e9, true
	case "t", "tb":
		return 1e12, true
	case "ki", "kib":
		return 1 << 10, true
	case "mi", "mib":
		return 1 << 20, true
	case "gi", "gib":
		return 1 << 30, true
	case "ti", "tib":
		return 1 << 40, true
	}
	return 0, false
}

// ParseBytes reads a size as resource limits write one: 8Gi, 512Mi, 1G
// or a number of bytes.
func ParseBytes(v string) (int64, error) { return parseMemory(v) }

func parseMemory(v string) (int64, error) {
	i := 0
	for i < len(v) && (v[i] >= '0' && v[i] <= '9' || v[i] == '.') {
		i++
	}
	num, suffix := v[:i], v[i:]
	mult, ok := memoryUnit(suffix)
	if num == "" || !ok || !isDecimal(num) {
		return 0, fmt.Errorf("want a size such as 512Mi, 2Gi or 1G")
	}
	r, _ := new(big.Rat).SetString(num)
	r.Mul(r, new(big.Rat).SetInt64(mult))
	f, _ := r.Float64()
	if f > math.MaxInt64/2 {
		return 0, fmt.Errorf("too large")
	}
	bytes := int64(f)
	if bytes < MinMemoryBytes {
		return 0, fmt.Errorf("at least %d MiB is needed", MinMemoryBytes>>20)
	}
	return bytes, nil
}

func parsePids(v string) (int64, error) {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 1 || n > MaxPids {
		return 0, fmt.Errorf("want a whole number from 1 to %d", MaxPids)
	}
	return n, nil
}

// isDecimal accepts digits with at most one dot and at least one digit.
func isDecimal(s string) bool {
	dots, digits := 0, 0
	for _, c := range s {
		switch {
		case c == '.':
			dots++
		case c >= '0' && c <= '9':
			digits++
		default:
			return false
		}
	}
	return dots <= 1 && digits > 0
}

// Limits are a server's defaults and maxima of the resources a sandbox
// gets: a create that asks for nothing gets the default (or, without one,
// the maximum: no sandbox is unbounded where the operator set a bound;
// pids excepted, which every runtime bounds by itself), and one that asks
// for more than the maximum is refused.
type Limits struct {
	Default, Max Resources
}

// Apply returns r with the defaults filled in, or an error naming the
// maximum r passes and the flag that sets it.
func (l Limits) Apply(r Resources) (Resources, error) {
	type field struct {
		key, flag string
		v         *int64
		def, max  int64
		show      func(int64) string
	}
	bytes := func(n int64) string { return formatBytes(n) }
	for _, f := range []field{
		{"cpu", "--max-cpu", &r.CPUMillis, l.Default.CPUMillis, l.Max.CPUMillis, func(n int64) string { return strconv.FormatInt(n, 10) + "m" }},
		{"memory", "--max-memory", &r.MemoryBytes, l.Default.MemoryBytes, l.Max.MemoryBytes, bytes},
		{"pids", "--max-pids", &r.Pids, l.Default.Pids, l.Max.Pids, func(n int64) string { return strconv.FormatInt(n, 10) }},
		{"disk", "--max-disk", &r.DiskBytes, l.Default.DiskBytes, l.Max.DiskBytes, bytes},
	} {
		if f.max > 0 && *f.v > f.max {
			return Resources{}, errdefs.Newf(errdefs.ErrInvalidArgument, codeInvalidResourceLimit,
				"resourceLimits.%s=%s is more than this server allows a sandbox (%s, set by %s)", f.key, f.show(*f.v), f.show(f.max), f.flag)
		}
		if *f.v == 0 {
			*f.v = f.def
		}
		if *f.v == 0 && f.key != "pids" {
			*f.v = f.max
		}
	}
	return r, nil
}

// Check refuses limits whose defaults pass their maxima.
func (l Limits) Check() error {
	for _, f := range []struct {
		name     string
		def, max int64
	}{{"cpu", l.Default.CPUMillis, l.Max.CPUMillis}, {"memory", l.Default.MemoryBytes, l.Max.MemoryBytes},
		{"pids", l.Default.Pids, l.Max.Pids}, {"disk", l.Default.DiskBytes, l.Max.DiskBytes}} {
		if f.max > 0 && f.def > f.max {
			return fmt.Errorf("--default-%s is more than --max-%s", f.name, f.name)
		}
	}
	return nil
}

// FormatBytes writes n bytes in the largest binary unit that divides it
// (8Gi, 512Mi), as resource limits are written.
func FormatBytes(n int64) string { return formatBytes(n) }

func formatBytes(n int64) string {
	for _, u := range []struct {
		s string
		m int64
	}{{"Ti", 1 << 40}, {"Gi", 1 << 30}, {"Mi", 1 << 20}, {"Ki", 1 << 10}} {
		if n%u.m == 0 {
			return strconv.FormatInt(n/u.m, 10) + u.s
		}
	}
	return strconv.FormatInt(n, 10)
}
