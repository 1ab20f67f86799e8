// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/corral-dev/corral/internal/lifecycle"
	"github.com/corral-dev/corral/internal/promtext"
	"github.com/corral-dev/corral/internal/sandbox"
)

type metrics struct {
	requests *promtext.CounterVec
	duration *promtext.HistogramVec
	creates  *promtext.HistogramVec
	driver   string
	handler  http.Handler

	// mu guards bound, a cache of label-bound series: looking a series up
	// by label values on every request is a large part of a request's cost.
	mu    sync.RWMutex
	bound map[requestLabels]boundSeries
}

type boundSeries struct {
	count    *promtext.Counter
	duration *promtext.Histogram
}

type requestLabels struct {
	route string
	code  int
}

func newMetrics(reg *promtext.Registry, mgr *lifecycle.Manager) *metrics {
	m := &metrics{
		requests: reg.NewCounterVec("corral_http_requests_total", "HTTP requests by route pattern and status code.", "route", "code"),
		duration: reg.NewHistogramVec("corral_http_request_duration_seconds", "HTTP request latency by route pattern.",
			[]float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}, "route"),
		creates: reg.NewHistogramVec("corral_sandbox_create_duration_seconds", "Time to create a sandbox, by driver and outcome.",
			[]float64{.01, .025, .05, .075, .1, .15, .25, .5, 1, 2.5, 5, 10, 30, 60}, "driver", "outcome"),
		bound: map[requestLabels]boundSeries{},
	}
	if mgr != nil {
		m.driver = mgr.DriverName()
		reg.NewGaugeFunc("corral_sandboxes", "Sandboxes by lifecycle state.", "state", func() map[string]float64 {
			counts := mgr.Counts()
			out := map[string]float64{}
			for _, st := range sandbox.States() {
				out[st.String()] = float64(counts[st])
			}
			return out
		})
		reg.NewGaugeFunc("corral_sandboxes_by_isolation", "Sandboxes not yet ended, by isolation tier (docs/isolation.md).", "isolation", func() map[string]float64 {
			out := map[string]float64{}
			for iso, n := range mgr.IsolationCounts() {
				out[iso] = float64(n)
			}
			return out
		})
	}
	reg.RegisterProcess()
	m.handler = reg.Handler()
	return m
}

func (m *metrics) observeRequest(route string, code int, d time.Duration) {
	key := requestLabels{route, code}
	m.mu.RLock()
	b, ok := m.bound[key]
	m.mu.RUnlock()
	if !ok {
		b = boundSeries{m.requests.With(route, strconv.Itoa(code)), m.duration.With(route)}
		m.mu.Lock()
		m.bound[key] = b
		m.mu.Unlock()
	}
	b.count.Inc()
	b.duration.Observe(d.Seconds())
}

func (m *metrics) observeCreate(d time.Duration, err error) {
	outcome := "ok"
	if err != nil {
		outcome = "error"
	}
	m.creates.With(m.driver, outcome).Observe(d.Seconds())
}
