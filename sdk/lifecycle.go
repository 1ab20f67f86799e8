// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package sdk

import (
	"context"
	"fmt"
	"iter"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/corral-dev/corral/api"
)

// CreateOptions tune CreateSandbox.
type CreateOptions struct {
	// IdempotencyKey makes retries safe: the server answers a repeated key
	// with the sandbox the first request made. CreateSandbox generates one
	// when empty, so its own retries never make a second sandbox.
	IdempotencyKey string
	// Wait returns only once the sandbox is Running and its execd answers
	// (servers that answer Pending are polled).
	Wait bool
}

// CreateSandbox creates a sandbox; it returns once the server answers
// (corral answers when the sandbox is Running).
func (c *Client) CreateSandbox(ctx context.Context, req api.CreateSandboxRequest, opts CreateOptions) (*api.CreateSandboxResponse, error) {
	key := opts.IdempotencyKey
	if key == "" {
		key = NewIdempotencyKey()
	}
	var out api.CreateSandboxResponse
	_, err := c.do(ctx, call{method: http.MethodPost, path: "/v1/sandboxes", body: req,
		header: http.Header{api.HeaderIdempotencyKey: {key}}, retry: true, want: []int{http.StatusAccepted, http.StatusOK, http.StatusCreated}}, &out)
	if err != nil {
		return nil, err
	}
	if opts.Wait {
		if err := c.WaitRunning(ctx, out.ID); err != nil {
			return &out, err
		}
		out.Status.State = api.StateRunning
	}
	return &out, nil
}

// WaitRunning waits until a sandbox is Running and its execd answers. A
// sandbox that becomes Failed or Terminated is an error that says why.
func (c *Client) WaitRunning(ctx context.Context, id string) error {
	delay := 50 * time.Millisecond
	for {
		sb, err := c.GetSandbox(ctx, id)
		if err != nil {
			return err
		}
		switch sb.Status.State {
		case api.StateRunning:
			s, err := c.Sandbox(ctx, id, SandboxOptions{})
			if err != nil {
				return err
			}
			return s.WaitReady(ctx)
		case api.StateFailed, api.StateTerminated:
			return &APIError{Status: http.StatusConflict, Code: api.CodeSandboxNotRunning, kind: ErrFailedPrecondition,
				Message: "sandbox " + id + " is " + sb.Status.State + ": " + sb.Status.Message}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
		}
		delay = min(delay*2, time.Second)
	}
}

// Sandboxes iterates over every sandbox matching opts, page by page.
func (c *Client) Sandboxes(ctx context.Context, opts ListOptions) iter.Seq2[api.Sandbox, error] {
	return func(yield func(api.Sandbox, error) bool) {
		if opts.PageSize == 0 {
			opts.PageSize = 100
		}
		for page := 1; ; page++ {
			opts.Page = page
			res, err := c.ListSandboxes(ctx, opts)
			if err != nil {
				yield(api.Sandbox{}, err)
				return
			}
			for _, sb := range res.Items {
				if !yield(sb, nil) {
					return
				}
			}
			if !res.Pagination.HasNextPage {
				return
			}
		}
	}
}

// GetSandbox returns a sandbox.
func (c *Client) GetSandbox(ctx context.Context, id string) (*api.Sandbox, error) {
	var out api.Sandbox
	if _, err := c.do(ctx, call{method: http.MethodGet, path: "/v1/sandboxes/" + url.PathEscape(id), retry: true, want: []int{http.StatusOK}}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListOptions filter ListSandboxes.
type ListOptions struct {
	States   []string
	Metadata map[string]string
	Page     int
	PageSize int
}

// ListSandboxes returns one page of sandboxes.
func (c *Client) ListSandboxes(ctx context.Context, opts ListOptions) (*api.ListSandboxesResponse, error) {
	q := url.Values{}
	for _, s := range opts.States {
		q.Add("state", s)
	}
	if len(opts.Metadata) > 0 {
		md := url.Values{}
		for k, v := range opts.Metadata {
			md.Set(k, v)
		}
		q.Set("metadata", md.Encode())
	}
	if opts.Page > 0 {
		q.Set("page", strconv.Itoa(opts.Page))
	}
	if opts.PageSize > 0 {
		q.Set("pageSize", strconv.Itoa(opts.PageSize))
	}
	var out api.ListSandboxesResponse
	if _, err := c.do(ctx, call{method: http.MethodGet, path: "/v1/sandboxes", query: q, retry: true, want: []int{http.StatusOK}}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteSandbox destroys a sandbox.
func (c *Client) DeleteSandbox(ctx context.Context, id string) error {
	_, err := c.do(ctx, call{method: http.MethodDelete, path: "/v1/sandboxes/" + url.PathEscape(id), retry: true, want: []int{http.StatusNoContent}}, nil)
	return err
}

// PatchMetadata applies a merge patch; a nil value deletes the key.
func (c *Client) PatchMetadata(ctx context.Context, id string, patch map[string]*string) (*api.Sandbox, error) {
	var out api.Sandbox
	if _, err := c.do(ctx, call{method: http.MethodPatch, path: "/v1/sandboxes/" + url.PathEscape(id) + "/metadata", body: patch,
		retry: true, want: []int{http.StatusOK}}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// PauseSandbox freezes a sandbox; it returns once it is Paused.
func (c *Client) PauseSandbox(ctx context.Context, id string) error {
	_, err := c.do(ctx, call{method: http.MethodPost, path: "/v1/sandboxes/" + url.PathEscape(id) + "/pause", want: []int{http.StatusAccepted}}, nil)
	return err
}

// ResumeSandbox thaws a sandbox; it returns once it is Running.
func (c *Client) ResumeSandbox(ctx context.Context, id string) error {
	_, err := c.do(ctx, call{method: http.MethodPost, path: "/v1/sandboxes/" + url.PathEscape(id) + "/resume", want: []int{http.StatusAccepted}}, nil)
	return err
}

// RenewSandbox sets a new expiry and returns it.
func (c *Client) RenewSandbox(ctx context.Context, id string, at time.Time) (time.Time, error) {
	var out api.RenewSandboxExpirationResponse
	if _, err := c.do(ctx, call{method: http.MethodPost, path: "/v1/sandboxes/" + url.PathEscape(id) + "/renew-expiration",
		body: api.RenewSandboxExpirationRequest{ExpiresAt: at.UTC()}, retry: true, want: []int{http.StatusOK}}, &out); err != nil {
		return time.Time{}, err
	}
	return out.ExpiresAt, nil
}

// GetEndpoint resolves how to reach a port of a sandbox.
func (c *Client) GetEndpoint(ctx context.Context, id string, port int, useServerProxy bool) (*api.Endpoint, error) {
	q := url.Values{}
	if useServerProxy {
		q.Set("use_server_proxy", "true")
	}
	var out api.Endpoint
	if _, err := c.do(ctx, call{method: http.MethodGet, path: "/v1/sandboxes/" + url.PathEscape(id) + "/endpoints/" + strconv.Itoa(port),
		query: q, retry: true, want: []int{http.StatusOK}}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// CreateSnapshot starts a snapshot of a Running sandbox.
func (c *Client) CreateSnapshot(ctx context.Context, sandboxID, name string) (*api.Snapshot, error) {
	var out api.Snapshot
	if _, err := c.do(ctx, call{method: http.MethodPost, path: "/v1/sandboxes/" + url.PathEscape(sandboxID) + "/snapshots",
		body: api.CreateSnapshotRequest{Name: name}, want: []int{http.StatusAccepted}}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Fork makes sandboxes from the file system a Running sandbox has now
// (corral's own route; memory is not carried). It returns once every
// fork runs; when one cannot be made, none is left and the error says
// why.
func (c *Client) Fork(ctx context.Context, sandboxID string, req api.ForkRequest) (*api.ForkResponse, error) {
	var out api.ForkResponse
	if _, err := c.do(ctx, call{method: http.MethodPost, path: "/v1/sandboxes/" + url.PathEscape(sandboxID) + "/fork",
		body: req, want: []int{http.StatusCreated}}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListVolumes returns the tenant's named volumes (corral's own route).
func (c *Client) ListVolumes(ctx context.Context) ([]api.VolumeInfo, error) {
	var out api.ListVolumesResponse
	if _, err := c.do(ctx, call{method: http.MethodGet, path: "/v1/volumes", retry: true, want: []int{http.StatusOK}}, &out); err != nil {
		return nil, err
	}
	return out.Items, nil
}

// DeleteVolume deletes a named volume and its files; a volume a sandbox
// mounts is refused (ErrFailedPrecondition).
func (c *Client) DeleteVolume(ctx context.Context, name string) error {
	_, err := c.do(ctx, call{method: http.MethodDelete, path: "/v1/volumes/" + url.PathEscape(name), retry: true, want: []int{http.StatusNoContent}}, nil)
	return err
}

// GetSnapshot returns a snapshot.
func (c *Client) GetSnapshot(ctx context.Context, id string) (*api.Snapshot, error) {
	var out api.Snapshot
	if _, err := c.do(ctx, call{method: http.MethodGet, path: "/v1/snapshots/" + url.PathEscape(id), retry: true, want: []int{http.StatusOK}}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListSnapshotsOptions filter ListSnapshots.
type ListSnapshotsOptions struct {
	SandboxID string
	States    []string
	Page      int
	PageSize  int
}

// ListSnapshots returns one page of snapshots.
func (c *Client) ListSnapshots(ctx context.Context, opts ListSnapshotsOptions) (*api.ListSnapshotsResponse, error) {
	q := url.Values{}
	if opts.SandboxID != "" {
		q.Set("sandboxId", opts.SandboxID)
	}
	for _, s := range opts.States {
		q.Add("state", s)
	}
	if opts.Page > 0 {
		q.Set("page", strconv.Itoa(opts.Page))
	}
	if opts.PageSize > 0 {
		q.Set("pageSize", strconv.Itoa(opts.PageSize))
	}
	var out api.ListSnapshotsResponse
	if _, err := c.do(ctx, call{method: http.MethodGet, path: "/v1/snapshots", query: q, retry: true, want: []int{http.StatusOK}}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteSnapshot deletes a snapshot.
func (c *Client) DeleteSnapshot(ctx context.Context, id string) error {
	_, err := c.do(ctx, call{method: http.MethodDelete, path: "/v1/snapshots/" + url.PathEscape(id), retry: true, want: []int{http.StatusNoContent}}, nil)
	return err
}

// Health checks that the server answers.
func (c *Client) Health(ctx context.Context) error {
	var out api.Health
	_, err := c.do(ctx, call{method: http.MethodGet, path: "/health", retry: true, want: []int{http.StatusOK}}, &out)
	return err
}

// CreateAPIKey mints a key (admin only). The key is in the answer's Key.
func (c *Client) CreateAPIKey(ctx context.Context, req api.CreateAPIKeyRequest) (*api.APIKey, error) {
	var out api.APIKey
	if _, err := c.do(ctx, call{method: http.MethodPost, path: "/v1/admin/keys", body: req, want: []int{http.StatusCreated}}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListAPIKeys lists keys (admin only).
func (c *Client) ListAPIKeys(ctx context.Context) ([]api.APIKey, error) {
	var out api.ListAPIKeysResponse
	if _, err := c.do(ctx, call{method: http.MethodGet, path: "/v1/admin/keys", retry: true, want: []int{http.StatusOK}}, &out); err != nil {
		return nil, err
	}
	return out.Items, nil
}

// RevokeAPIKey revokes a key (admin only).
func (c *Client) RevokeAPIKey(ctx context.Context, id string) error {
	_, err := c.do(ctx, call{method: http.MethodDelete, path: "/v1/admin/keys/" + url.PathEscape(id), retry: true, want: []int{http.StatusNoContent}}, nil)
	return err
}

// SandboxEventOptions page through SandboxEvents.
type SandboxEventOptions struct {
	// After is the Seq to continue from (the previous page's Next).
	After int64
	// Limit is the page size (default 100, at most 1000).
	Limit int
	// Type keeps only events of this type or its subtypes ("egress").
	Type string
}

// SandboxEvents returns a page of a sandbox's event log (a corral
// extension): lifecycle transitions and, for a sandbox with a network
// policy, every egress decision with the rule that made it. Events
// follows every sandbox of the tenant.
func (c *Client) SandboxEvents(ctx context.Context, id string, opts SandboxEventOptions) (*api.SandboxEventList, error) {
	q := url.Values{}
	if opts.After > 0 {
		q.Set("after", strconv.FormatInt(opts.After, 10))
	}
	if opts.Limit > 0 {
		q.Set("limit", strconv.Itoa(opts.Limit))
	}
	if opts.Type != "" {
		q.Set("type", opts.Type)
	}
	var out api.SandboxEventList
	if _, err := c.do(ctx, call{method: http.MethodGet, path: "/v1/sandboxes/" + url.PathEscape(id) + "/events", query: q,
		retry: true, want: []int{http.StatusOK}}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DiagnosticOptions choose what Diagnostics returns.
type DiagnosticOptions struct {
	// Scope is one of api.DiagnosticScope* (default all).
	Scope string
	// Limit bounds the events returned (default 500, at most 1000).
	Limit int
}

// Diagnostics returns a sandbox's diagnostics of kind "logs" (what its
// entrypoint printed) or "events" (its event log as text), as
// OpenSandbox's diagnostics API describes them, delivered inline.
func (c *Client) Diagnostics(ctx context.Context, id, kind string, opts DiagnosticOptions) (*api.DiagnosticContent, error) {
	if kind != "logs" && kind != "events" {
		return nil, fmt.Errorf("sdk: diagnostics of kind %q: want logs or events", kind)
	}
	q := url.Values{}
	q.Set("scope", api.DiagnosticScopeAll)
	if opts.Scope != "" {
		q.Set("scope", opts.Scope)
	}
	if opts.Limit > 0 {
		q.Set("limit", strconv.Itoa(opts.Limit))
	}
	var out api.DiagnosticContent
	if _, err := c.do(ctx, call{method: http.MethodGet, path: "/v1/sandboxes/" + url.PathEscape(id) + "/diagnostics/" + kind, query: q,
		retry: true, want: []int{http.StatusOK}}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
