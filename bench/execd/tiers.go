// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"net/http"
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
// server's endpoint forwarder, as a client of a sandbox reaches it.
func measureTiers(tiers []string, n int, streamBytes int64) ([]tierResult, error) {
	srv, err := benchsrv.Start("--runtime", "oci", "--isolation", strings.Join(tiers, ","))
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	ctx := context.Background()
	var out []tierResult
	for _, tier := range tiers {
		sb, err := srv.Admin.CreateSandbox(ctx, api.CreateSandboxRequest{Image: &api.ImageSpec{URI: "host"},
			Entrypoint: []string{"sleep", "infinity"}, ResourceLimits: map[string]string{"cpu": "2", "memory": "1Gi"},
			Extensions: map[string]string{api.ExtensionIsolation: tier}}, sdk.CreateOptions{Wait: true})
		if err != nil {
			return nil, fmt.Errorf("%s sandbox: %w", tier, err)
		}
		ep, err := srv.Admin.GetEndpoint(ctx, sb.ID, 44772, false)
		if err != nil {
			return nil, err
		}
		hc := &http.Client{Transport: headerTransport{h: ep.Headers, base: http.DefaultTransport}}
		base := "http://" + ep.Endpoint
		r := tierResult{tier: tier}
		for range n {
			t := time.Now()
			if err := runCommand(hc, base, "true", nil); err != nil {
				return nil, fmt.Errorf("%s: %w", tier, err)
			}
			r.rt = append(r.rt, time.Since(t))
		}
		gen := fmt.Sprintf("yes %s | head -c %d", strings.Repeat("x", 1023), streamBytes)
		t := time.Now()
		wire, err := streamRaw(hc, base, gen)
		if err != nil {
			return nil, fmt.Errorf("%s stream: %w", tier, err)
		}
		if wire < streamBytes {
			return nil, fmt.Errorf("%s: the stream carried %d bytes for %d", tier, wire, streamBytes)
		}
		r.stream = float64(streamBytes) / time.Since(t).Seconds() / 1e6
		out = append(out, r)
		if err := srv.Admin.DeleteSandbox(ctx, sb.ID); err != nil {
			return nil, err
		}
	}
	return out, nil
}
