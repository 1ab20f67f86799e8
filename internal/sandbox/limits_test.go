// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package sandbox

import (
	"errors"
	"strings"
	"testing"

	"github.com/corral-dev/corral/errdefs"
)

func TestLimitsApply(t *testing.T) {
	t.Parallel()
	l := Limits{Default: Resources{MemoryBytes: 2 << 30}, Max: Resources{CPUMillis: 2000, MemoryBytes: 4 << 30, Pids: 1000, DiskBytes: 10 << 30}}
	for _, tc := range []struct {
		name string
		in   Resources
		want Resources
		err  string
	}{
		{"nothing asked: defaults, else maxima (pids: the runtime's)", Resources{},
			Resources{CPUMillis: 2000, MemoryBytes: 2 << 30, DiskBytes: 10 << 30}, ""},
		{"within the maxima", Resources{CPUMillis: 500, MemoryBytes: 1 << 30, Pids: 100, DiskBytes: 1 << 30},
			Resources{CPUMillis: 500, MemoryBytes: 1 << 30, Pids: 100, DiskBytes: 1 << 30}, ""},
		{"too much memory", Resources{MemoryBytes: 8 << 30}, Resources{}, "resourceLimits.memory=8Gi is more than this server allows a sandbox (4Gi, set by --max-memory)"},
		{"too many cpus", Resources{CPUMillis: 2500}, Resources{}, "--max-cpu"},
		{"too many pids", Resources{Pids: 1001}, Resources{}, "--max-pids"},
		{"too much disk", Resources{DiskBytes: 11 << 30}, Resources{}, "--max-disk"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := l.Apply(tc.in)
			if tc.err != "" {
				if !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Apply(%+v) = %v, want an error with %q", tc.in, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("Apply(%+v) = %+v, %v; want %+v", tc.in, got, err, tc.want)
			}
		})
	}
	if err := (Limits{Default: Resources{MemoryBytes: 8 << 30}, Max: Resources{MemoryBytes: 4 << 30}}).Check(); err == nil {
		t.Error("a default above its maximum was accepted")
	}
	if r, err := ParseResources(map[string]string{"disk": "10Gi"}); err != nil || r.DiskBytes != 10<<30 {
		t.Errorf("disk = %+v, %v", r, err)
	}
	if _, err := ParseResources(map[string]string{"disk": "1Mi"}); err == nil {
		t.Error("a 1 MiB disk was accepted")
	}
}
