// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"time"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/bench/internal/benchsrv"
	"github.com/corral-dev/corral/sdk"
)

// headerTransport adds a sandbox endpoint's headers (execd's token) to
// every request.
type headerTransport struct {
	h    map[string]string
	base http.RoundTripper
}

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range t.h {
		r.Header.Set(k, v)
	}
	return t.base.RoundTrip(r)
}

// tierResult is execd measured inside a sandbox of one isolation tier.
type tierResult struct {
	tier   string
	rt     []time.Duration
	stream float64 // MB/s
}

// measureTiers runs the round trip and streaming measurements against
// execd inside a native sandbox ("host" image) of each tier, through the
// server's endpoint forwarder, as a client of a sandbox reaches it; the
// runsc tier once with each of runscs (--oci-runsc), each on a server of
// its own.
func measureTiers(tiers, runscs []string, n int, streamBytes int64) ([]tierResult, error) {
	type tierCase struct{ label, tier, runsc string }
	var cases []tierCase
	for _, tier := range tiers {
		if tier != api.IsolationRunsc {
			cases = append(cases, tierCase{label: tier, tier: tier})
			continue
		}
		for _, bin := range runscs {
			label := tier
			if len(runscs) > 1 {
				v, _ := exec.Command(bin, "--version").Output()
				first, _, _ := strings.Cut(string(v), "\n")
				label = fmt.Sprintf("runsc, %s (%s)", bin, strings.TrimPrefix(first, "runsc version "))
			}
			cases = append(cases, tierCase{label: label, tier: tier, runsc: bin})
		}
	}
	var out []tierResult
	for _, c := range cases {
		r, err := measureTier(c.label, c.tier, c.runsc, n, streamBytes)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// measureTier measures execd in a sandbox of tier on a server of its own
// (runsc: its --oci-runsc, "" for runsc on PATH).
func measureTier(label, tier, runsc string, n int, streamBytes int64) (tierResult, error) {
	args := []string{"--runtime", "oci", "--isolation", tier}
	if runsc != "" {
		args = append(args, "--oci-runsc", runsc)
	}
	srv, err := benchsrv.Start(args...)
	if err != nil {
		return tierResult{}, err
	}
	defer srv.Close()
	ctx := context.Background()
	sb, err := srv.Admin.CreateSandbox(ctx, api.CreateSandboxRequest{Image: &api.ImageSpec{URI: "host"},
		Entrypoint: []string{"sleep", "infinity"}, ResourceLimits: map[string]string{"cpu": "2", "memory": "1Gi"},
		Extensions: map[string]string{api.ExtensionIsolation: tier}}, sdk.CreateOptions{Wait: true})
	if err != nil {
		return tierResult{}, fmt.Errorf("%s sandbox: %w", label, err)
	}
	ep, err := srv.Admin.GetEndpoint(ctx, sb.ID, 44772, false)
	if err != nil {
		return tierResult{}, err
	}
	hc := &http.Client{Transport: headerTransport{h: ep.Headers, base: http.DefaultTransport}}
	base := "http://" + ep.Endpoint
	r := tierResult{tier: label}
	for range n {
		t := time.Now()
		if err := runCommand(hc, base, "true", nil); err != nil {
			return tierResult{}, fmt.Errorf("%s: %w", label, err)
		}
		r.rt = append(r.rt, time.Since(t))
	}
	gen := fmt.Sprintf("yes %s | head -c %d", strings.Repeat("x", 1023), streamBytes)
	t := time.Now()
	wire, err := streamRaw(hc, base, gen)
	if err != nil {
		return tierResult{}, fmt.Errorf("%s stream: %w", label, err)
	}
	if wire < streamBytes {
		return tierResult{}, fmt.Errorf("%s: the stream carried %d bytes for %d", label, wire, streamBytes)
	}
	r.stream = float64(streamBytes) / time.Since(t).Seconds() / 1e6
	if err := srv.Admin.DeleteSandbox(ctx, sb.ID); err != nil {
		return tierResult{}, err
	}
	return r, nil
}
