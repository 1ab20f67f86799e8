// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/corral-dev/corral/internal/lifecycle"
	"github.com/corral-dev/corral/internal/sandbox"
)

type metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	creates  *prometheus.HistogramVec
	driver   string
	handler  http.Handler

	// mu guards bound, a cache of label-bound series: looking a series up
	// by label values on every request is a large part of a request's cost.
	mu    sync.RWMutex
	bound map[requestLabels]boundSeries
}

type boundSeries struct {
	count    prometheus.Counter
	duration prometheus.Observer
}

type requestLabels struct {
	route string
	code  int
}

func newMetrics(reg *prometheus.Registry, mgr *lifecycle.Manager) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "corral_http_requests_total", Help: "HTTP requests by route pattern and status code.",
		}, []string{"route", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "corral_http_request_duration_seconds", Help: "HTTP request latency by route pattern.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"route"}),
		creates: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "corral_sandbox_create_duration_seconds", Help: "Time to create a sandbox, by driver and outcome.",
			Buckets: []float64{.01, .025, .05, .075, .1, .15, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"driver", "outcome"}),
		bound: map[requestLabels]boundSeries{},
	}
	if mgr != nil {
		m.driver = mgr.DriverName()
		reg.MustRegister(&stateCollector{mgr: mgr, desc: prometheus.NewDesc("corral_sandboxes",
			"Sandboxes by lifecycle state.", []string{"state"}, nil)})
	}
	reg.MustRegister(m.requests, m.duration, m.creates,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.handler = promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	return m
}

func (m *metrics) observeRequest(route string, code int, d time.Duration) {
	key := requestLabels{route, code}
	m.mu.RLock()
	b, ok := m.bound[key]
	m.mu.RUnlock()
	if !ok {
		b = boundSeries{m.requests.WithLabelValues(route, strconv.Itoa(code)), m.duration.WithLabelValues(route)}
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
	m.creates.WithLabelValues(m.driver, outcome).Observe(d.Seconds())
}

// stateCollector reports the number of sandboxes per state at scrape time.
type stateCollector struct {
	mgr  *lifecycle.Manager
	desc *prometheus.Desc
}

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	counts := c.mgr.Counts()
	for _, st := range sandbox.States() {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(counts[st]), st.String())
	}
}
