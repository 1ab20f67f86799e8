// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package sdk

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/corral-dev/corral/api"
)

// Sandbox is a handle to one sandbox's in-sandbox API (execd): commands,
// sessions, files, metrics and terminals.
type Sandbox struct {
	ID string
	c  *Client
	// base is execd's URL; headers are the endpoint's (its access token).
	base    string
	headers map[string]string
}

// SandboxOptions tune Client.Sandbox.
type SandboxOptions struct {
	// UseServerProxy reaches execd through the server's proxy route instead
	// of the endpoint the server hands out (for clients on other machines).
	UseServerProxy bool
}

// Sandbox resolves the in-sandbox API of sandbox id.
func (c *Client) Sandbox(ctx context.Context, id string, opts SandboxOptions) (*Sandbox, error) {
	return c.portClient(ctx, id, api.ExecdPort, opts)
}

// portClient resolves a sandbox port's endpoint, with its headers.
func (c *Client) portClient(ctx context.Context, id string, port int, opts SandboxOptions) (*Sandbox, error) {
	ep, err := c.GetEndpoint(ctx, id, port, opts.UseServerProxy)
	if err != nil {
		return nil, err
	}
	scheme := c.base.Scheme
	if scheme == "" {
		scheme = "http"
	}
	s := &Sandbox{ID: id, c: c, base: scheme + "://" + strings.TrimSuffix(ep.Endpoint, "/"), headers: ep.Headers}
	if opts.UseServerProxy && c.apiKey != "" {
		if s.headers == nil {
			s.headers = map[string]string{}
		}
		s.headers[api.HeaderAPIKey] = c.apiKey
	}
	return s, nil
}

// WaitReady polls execd's /ping until it answers or ctx ends.
func (s *Sandbox) WaitReady(ctx context.Context) error {
	delay := 5 * time.Millisecond
	for {
		res, err := s.do(ctx, http.MethodGet, "/ping", nil, nil, "")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("sandbox %s: execd did not answer: %w", s.ID, ctx.Err())
		case <-time.After(delay):
		}
		delay = min(delay*2, 200*time.Millisecond)
	}
}

// do sends one request to execd. It does not retry: most execd calls are
// not idempotent.
func (s *Sandbox) do(ctx context.Context, method, path string, q url.Values, body io.Reader, ctype string, hdr ...string) (*http.Response, error) {
	u := s.base + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, err
	}
	for k, v := range s.headers {
		req.Header.Set(k, v)
	}
	for k, vs := range s.c.headers {
		req.Header[k] = vs
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	setRequestID(ctx, req)
	res, err := s.c.hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("sandbox %s: %s %s: %w: %w", s.ID, method, path, ErrUnavailable, err)
	}
	return res, nil
}

// call sends a JSON request and decodes a JSON answer into out.
func (s *Sandbox) call(ctx context.Context, method, path string, q url.Values, in, out any) error {
	var body io.Reader
	ctype := ""
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body, ctype = bytes.NewReader(b), "application/json"
	}
	res, err := s.do(ctx, method, path, q, body, ctype)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode >= 300 {
		return decodeError(res)
	}
	if out == nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 1<<20))
		return nil
	}
	return json.NewDecoder(res.Body).Decode(out)
}

// Metrics returns the sandbox's CPU and memory figures.
func (s *Sandbox) Metrics(ctx context.Context) (*api.Metrics, error) {
	var m api.Metrics
	if err := s.call(ctx, http.MethodGet, "/metrics", nil, nil, &m); err != nil {
		return nil, err
	}
	return &m, nil
}
