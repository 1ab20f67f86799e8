// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package sdk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/sse"
)

// EventStreamOptions choose what Events follows. Zero: every new event
// of the tenant, followed until the context ends.
type EventStreamOptions struct {
	// SandboxID keeps one sandbox's events.
	SandboxID string
	// Types keeps events of these types (api.Event*).
	Types []string
	// Metadata keeps events of sandboxes whose metadata has every pair.
	Metadata map[string]string
	// After is the ID of the last event already seen: the stream starts
	// after it. Empty: a followed stream starts with the next new event,
	// an unfollowed one with the oldest the server keeps.
	After string
	// NoFollow ends the stream once the events already recorded are read.
	NoFollow bool
	// Limit ends the stream after this many events (0: no bound).
	Limit int
}

// EventStream is a tenant's event stream (GET /v1/events). It
// reconnects by itself when the connection breaks, resuming after the
// last event it returned: no event is lost or repeated.
type EventStream struct {
	c    *Client
	ctx  context.Context
	opts EventStreamOptions
	body io.ReadCloser
	rd   *sse.Reader
	read int
	// last is the ID of the last event returned.
	last string
}

// Events opens the caller's tenant's event stream (a corral extension).
// An error of the first request (a bad filter, a runtime whose records
// keep no stream) is returned here; later breaks are retried by Next.
func (c *Client) Events(ctx context.Context, opts EventStreamOptions) (*EventStream, error) {
	s := &EventStream{c: c, ctx: ctx, opts: opts, last: opts.After}
	if err := s.connect(); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *EventStream) connect() error {
	q := url.Values{}
	o := s.opts
	if o.SandboxID != "" {
		q.Set("sandboxId", o.SandboxID)
	}
	if len(o.Types) > 0 {
		q.Set("type", strings.Join(o.Types, ","))
	}
	if len(o.Metadata) > 0 {
		md := url.Values{}
		for k, v := range o.Metadata {
			md.Set(k, v)
		}
		q.Set("metadata", md.Encode())
	}
	if s.last != "" {
		q.Set("after", s.last)
	}
	if o.NoFollow {
		q.Set("follow", "false")
	}
	if o.Limit > 0 {
		q.Set("limit", strconv.Itoa(o.Limit-s.read))
	}
	cl := call{method: http.MethodGet, path: "/v1/events", query: q}
	resp, err := s.c.once(s.ctx, cl, nil)
	if err != nil {
		if s.ctx.Err() != nil {
			return s.ctx.Err()
		}
		return fmt.Errorf("sdk: GET /v1/events: %w: %w", ErrUnavailable, err)
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		return decodeError(resp)
	}
	s.body, s.rd = resp.Body, sse.NewReader(resp.Body)
	return nil
}

// Next returns the next event, waiting for it when following. It
// returns io.EOF at the end of an unfollowed or limited stream, and the
// context's error once it ends.
func (s *EventStream) Next() (api.Event, error) {
	backoff := s.c.retry.Initial
	for {
		if s.opts.Limit > 0 && s.read >= s.opts.Limit {
			return api.Event{}, io.EOF
		}
		if s.rd == nil {
			if err := s.connect(); err != nil {
				var apiErr *APIError
				if s.ctx.Err() != nil || errors.As(err, &apiErr) && !retryableStatus(apiErr.Status) {
					return api.Event{}, err
				}
				if werr := sleepCtx(s.ctx, jitter(backoff)); werr != nil {
					return api.Event{}, werr
				}
				backoff = min(backoff*2, s.c.retry.Max)
				continue
			}
		}
		data, err := s.rd.Next()
		if err == nil {
			var ev api.Event
			if err := json.Unmarshal(data, &ev); err != nil {
				return api.Event{}, fmt.Errorf("sdk: event stream: %w", err)
			}
			s.last = ev.ID
			s.read++
			return ev, nil
		}
		s.body.Close()
		s.body, s.rd = nil, nil
		switch {
		case s.ctx.Err() != nil:
			return api.Event{}, s.ctx.Err()
		case errors.Is(err, io.EOF) && (s.opts.NoFollow || s.opts.Limit > 0):
			// The server ends such a stream only when it is done.
			return api.Event{}, io.EOF
		}
		// A broken followed stream: reconnect after the last event read.
	}
}

// LastID is the ID of the last event Next returned (or the After the
// stream started with): where a new stream resumes.
func (s *EventStream) LastID() string { return s.last }

// Close ends the stream.
func (s *EventStream) Close() error {
	if s.body == nil {
		return nil
	}
	err := s.body.Close()
	s.body, s.rd = nil, nil
	return err
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// CreateWebhook subscribes the tenant's events to a URL (a corral
// extension). The answer carries the signing secret, shown this once.
func (c *Client) CreateWebhook(ctx context.Context, req api.WebhookRequest) (*api.Webhook, error) {
	var out api.Webhook
	if _, err := c.do(ctx, call{method: http.MethodPost, path: "/v1/webhooks", body: req, want: []int{http.StatusCreated}}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListWebhooks lists the tenant's subscriptions.
func (c *Client) ListWebhooks(ctx context.Context) ([]api.Webhook, error) {
	var out api.WebhookList
	if _, err := c.do(ctx, call{method: http.MethodGet, path: "/v1/webhooks", retry: true, want: []int{http.StatusOK}}, &out); err != nil {
		return nil, err
	}
	return out.Items, nil
}

// DeleteWebhook removes a subscription and its delivery log.
func (c *Client) DeleteWebhook(ctx context.Context, id string) error {
	_, err := c.do(ctx, call{method: http.MethodDelete, path: "/v1/webhooks/" + url.PathEscape(id), retry: true,
		want: []int{http.StatusNoContent}}, nil)
	return err
}

// WebhookDeliveries returns a subscription's newest deliveries (limit 0:
// the server's default).
func (c *Client) WebhookDeliveries(ctx context.Context, id string, limit int) ([]api.WebhookDelivery, error) {
	q := url.Values{}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var out api.WebhookDeliveryList
	if _, err := c.do(ctx, call{method: http.MethodGet, path: "/v1/webhooks/" + url.PathEscape(id) + "/deliveries", query: q,
		retry: true, want: []int{http.StatusOK}}, &out); err != nil {
		return nil, err
	}
	return out.Items, nil
}

// PingWebhook sends a webhook.ping to a subscription once and returns
// the delivery with its outcome.
func (c *Client) PingWebhook(ctx context.Context, id string) (*api.WebhookDelivery, error) {
	var out api.WebhookDelivery
	if _, err := c.do(ctx, call{method: http.MethodPost, path: "/v1/webhooks/" + url.PathEscape(id) + "/ping",
		want: []int{http.StatusOK}}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Quota returns the caller's tenant's quotas and use (a corral
// extension).
func (c *Client) Quota(ctx context.Context) (*api.QuotaStatus, error) {
	var out api.QuotaStatus
	if _, err := c.do(ctx, call{method: http.MethodGet, path: "/v1/quota", retry: true, want: []int{http.StatusOK}}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// TenantQuota returns a tenant's quotas and use (admin key).
func (c *Client) TenantQuota(ctx context.Context, tenant string) (*api.QuotaStatus, error) {
	var out api.QuotaStatus
	if _, err := c.do(ctx, call{method: http.MethodGet, path: "/v1/admin/quotas/" + url.PathEscape(tenant), retry: true,
		want: []int{http.StatusOK}}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListQuotas returns every tenant with quotas of its own or sandboxes
// (admin key).
func (c *Client) ListQuotas(ctx context.Context) ([]api.QuotaStatus, error) {
	var out api.QuotaStatusList
	if _, err := c.do(ctx, call{method: http.MethodGet, path: "/v1/admin/quotas", retry: true, want: []int{http.StatusOK}}, &out); err != nil {
		return nil, err
	}
	return out.Items, nil
}

// SetQuota replaces a tenant's own quotas (admin key): fields given
// replace the server's defaults, fields left out take them.
func (c *Client) SetQuota(ctx context.Context, tenant string, q api.QuotaRequest) (*api.QuotaStatus, error) {
	var out api.QuotaStatus
	if _, err := c.do(ctx, call{method: http.MethodPut, path: "/v1/admin/quotas/" + url.PathEscape(tenant), body: q, retry: true,
		want: []int{http.StatusOK}}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ClearQuota puts a tenant back on the server's default quotas (admin
// key).
func (c *Client) ClearQuota(ctx context.Context, tenant string) error {
	_, err := c.do(ctx, call{method: http.MethodDelete, path: "/v1/admin/quotas/" + url.PathEscape(tenant), retry: true,
		want: []int{http.StatusNoContent}}, nil)
	return err
}

// CreateTemplate stores a template (a corral extension); an existing
// name is ErrAlreadyExists (PutTemplate replaces).
func (c *Client) CreateTemplate(ctx context.Context, t api.Template) (*api.Template, error) {
	var out api.Template
	if _, err := c.do(ctx, call{method: http.MethodPost, path: "/v1/templates", body: t, want: []int{http.StatusCreated}}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// PutTemplate creates or replaces a template.
func (c *Client) PutTemplate(ctx context.Context, t api.Template) (*api.Template, error) {
	var out api.Template
	if _, err := c.do(ctx, call{method: http.MethodPut, path: "/v1/templates/" + url.PathEscape(t.Name), body: t, retry: true,
		want: []int{http.StatusOK, http.StatusCreated}}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListTemplates lists the tenant's templates and the public ones.
func (c *Client) ListTemplates(ctx context.Context) ([]api.Template, error) {
	var out api.TemplateList
	if _, err := c.do(ctx, call{method: http.MethodGet, path: "/v1/templates", retry: true, want: []int{http.StatusOK}}, &out); err != nil {
		return nil, err
	}
	return out.Items, nil
}

// GetTemplate returns a template: the tenant's own of that name, else
// the public one.
func (c *Client) GetTemplate(ctx context.Context, name string) (*api.Template, error) {
	var out api.Template
	if _, err := c.do(ctx, call{method: http.MethodGet, path: "/v1/templates/" + url.PathEscape(name), retry: true,
		want: []int{http.StatusOK}}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteTemplate removes the tenant's template, or with public (an admin
// key) the public one.
func (c *Client) DeleteTemplate(ctx context.Context, name string, public bool) error {
	q := url.Values{}
	if public {
		q.Set("public", "true")
	}
	_, err := c.do(ctx, call{method: http.MethodDelete, path: "/v1/templates/" + url.PathEscape(name), query: q, retry: true,
		want: []int{http.StatusNoContent}}, nil)
	return err
}
