// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package execd

import (
	"math"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// TestSamplerMeasuresBetweenRequests: the utilisation is the CPU time a
// cgroup used between two samples over the CPUs it may use; a request
// sooner than minSample after the last sample reads nothing and keeps the
// value; nothing is read unless asked.
func TestSamplerMeasuresBetweenRequests(t *testing.T) {
	dir := t.TempDir()
	usage := func(usec int64) {
		t.Helper()
		body := "usage_usec " + strconv.FormatInt(usec, 10) + "\nuser_usec 0\nsystem_usec 0\n"
		if err := os.WriteFile(filepath.Join(dir, "cpu.stat"), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "cpu.max"), []byte("100000 100000\n"), 0o644); err != nil {
		t.Fatal(err) // one CPU
	}
	usage(5_000_000)
	s := &sampler{cg: cgroupFS{v2: dir}}
	t0 := time.Unix(1000, 0)
	s.sample(t0)
	usage(6_000_000) // one CPU-second more over the next two seconds: 50%
	s.sample(t0.Add(2 * time.Second))
	if got := s.pct; math.Abs(got-50) > 0.01 {
		t.Fatalf("utilisation = %.2f%%, want 50%%", got)
	}
	// Sooner than minSample: not measured again (the file is not even read).
	usage(6_000_000 + 900_000)
	s.sample(t0.Add(2*time.Second + minSample/2))
	if got := s.pct; math.Abs(got-50) > 0.01 {
		t.Errorf("utilisation %v after half of minSample = %.2f%%, want the last value", minSample/2, got)
	}
	// A quiet spell of a minute: the average over it.
	usage(6_000_000 + 6_000_000)
	s.sample(t0.Add(62 * time.Second))
	if got := s.pct; math.Abs(got-10) > 0.01 {
		t.Errorf("utilisation after a quiet minute = %.2f%%, want 10%% (6 s of CPU over 60 s)", got)
	}
	// Never above 100%, whatever the counters say.
	usage(100_000_000)
	s.sample(t0.Add(64 * time.Second))
	if s.pct != 100 {
		t.Errorf("utilisation = %.2f%%, want it capped at 100%%", s.pct)
	}
}
