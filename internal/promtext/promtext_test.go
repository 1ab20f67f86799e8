// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package promtext

import (
	"strings"
	"testing"
)

func TestExposition(t *testing.T) {
	r := NewRegistry()
	c := r.NewCounterVec("x_total", "Things.\nCounted.", "route", "code")
	c.With("GET /a", "200").Inc()
	c.With("GET /a", "200").Inc()
	c.With(`we"ird\`+"\n", "500").Inc()
	h := r.NewHistogramVec("lat_seconds", "Latency.", []float64{0.5, 0.1, 1}, "route")
	for _, v := range []float64{0.05, 0.1, 0.7, 3} {
		h.With("GET /a").Observe(v)
	}
	r.NewGaugeFunc("g", "Gauge.", "state", func() map[string]float64 { return map[string]float64{"b": 2, "a": 1.5} })
	var b strings.Builder
	if _, err := r.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	want := `# HELP g Gauge.
# TYPE g gauge
g{state="a"} 1.5
g{state="b"} 2
# HELP lat_seconds Latency.
# TYPE lat_seconds histogram
lat_seconds_bucket{le="0.1",route="GET /a"} 2
lat_seconds_bucket{le="0.5",route="GET /a"} 2
lat_seconds_bucket{le="1",route="GET /a"} 3
lat_seconds_bucket{le="+Inf",route="GET /a"} 4
lat_seconds_sum{route="GET /a"} 3.85
lat_seconds_count{route="GET /a"} 4
# HELP x_total Things.\nCounted.
# TYPE x_total counter
x_total{code="200",route="GET /a"} 2
x_total{code="500",route="we\"ird\\\n"} 1
`
	if b.String() != want {
		t.Errorf("exposition:\n%s\nwant:\n%s", b.String(), want)
	}
}

func TestProcessGauges(t *testing.T) {
	r := NewRegistry()
	r.RegisterProcess()
	var b strings.Builder
	_, _ = r.WriteTo(&b)
	for _, name := range []string{"go_goroutines ", "process_resident_memory_bytes ", "process_cpu_seconds_total ", "process_open_fds ", "process_start_time_seconds "} {
		i := strings.Index(b.String(), "\n"+name)
		if i < 0 {
			t.Errorf("no %s in\n%s", name, b.String())
			continue
		}
		line := strings.SplitN(b.String()[i+1:], "\n", 2)[0]
		if strings.HasSuffix(line, " 0") && name != "process_cpu_seconds_total " {
			t.Errorf("%s is zero", line)
		}
	}
}
