// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

// Package sdk is the Go client of corral (and of any server speaking the
// OpenSandbox lifecycle contract). It is configured from options or from
// the OPEN_SANDBOX_DOMAIN, OPEN_SANDBOX_API_KEY and OPEN_SANDBOX_PROTOCOL
// variables OpenSandbox clients use; every method takes a context; errors
// carry the server's error kind, so errors.Is(err, sdk.ErrNotFound) works
// across the wire; idempotent calls, and creates with an Idempotency-Key,
// are retried with jitter and Retry-After. It imports only api, errdefs and
// the standard library.
package sdk

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/errdefs"
	"github.com/corral-dev/corral/errdefs/errhttp"
)

// The error kinds, re-exported so callers need not import errdefs.
var (
	ErrNotFound           = errdefs.ErrNotFound
	ErrAlreadyExists      = errdefs.ErrAlreadyExists
	ErrInvalidArgument    = errdefs.ErrInvalidArgument
	ErrFailedPrecondition = errdefs.ErrFailedPrecondition
	ErrUnavailable        = errdefs.ErrUnavailable
	ErrNotImplemented     = errdefs.ErrNotImplemented
	ErrPermissionDenied   = errdefs.ErrPermissionDenied
	ErrUnauthenticated    = errdefs.ErrUnauthenticated
	ErrResourceExhausted  = errdefs.ErrResourceExhausted
)

// Environment variables read by New, the ones OpenSandbox clients use.
const (
	EnvDomain   = "OPEN_SANDBOX_DOMAIN"
	EnvAPIKey   = "OPEN_SANDBOX_API_KEY"
	EnvProtocol = "OPEN_SANDBOX_PROTOCOL"
)

// DefaultDomain is the server address when nothing else is configured.
const DefaultDomain = "localhost:8080"

// Client talks to a corral server.
type Client struct {
	base    *url.URL
	apiKey  string
	hc      *http.Client
	headers http.Header
	retry   RetryPolicy
}

// RetryPolicy says how retryable calls are retried.
type RetryPolicy struct {
	// Attempts is the total number of tries, at least 1.
	Attempts int
	// Initial is the first backoff; it doubles up to Max, with ±25% jitter.
	Initial time.Duration
	Max     time.Duration
}

// DefaultRetry tries 4 times with backoff from 250 ms to 5 s.
func DefaultRetry() RetryPolicy {
	return RetryPolicy{Attempts: 4, Initial: 250 * time.Millisecond, Max: 5 * time.Second}
}

// Option configures a Client.
type Option func(*Client) error

// WithBaseURL sets the server's address, such as http://localhost:8080. A
// trailing /v1 is optional.
func WithBaseURL(raw string) Option {
	return func(c *Client) error {
		u, err := parseBase(raw)
		if err != nil {
			return err
		}
		c.base = u
		return nil
	}
}

// WithAPIKey sets the API key.
func WithAPIKey(key string) Option {
	return func(c *Client) error { c.apiKey = key; return nil }
}

// WithHTTPClient sets the HTTP client; its Timeout should be zero, as
// streams and creates can be long (use contexts for deadlines).
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) error { c.hc = hc; return nil }
}

// WithHeader adds a header to every request.
func WithHeader(name, value string) Option {
	return func(c *Client) error { c.headers.Add(name, value); return nil }
}

// WithRetry sets the retry policy; RetryPolicy{Attempts: 1} disables retries.
func WithRetry(p RetryPolicy) Option {
	return func(c *Client) error {
		if p.Attempts < 1 {
			return fmt.Errorf("sdk: retry attempts must be at least 1")
		}
		c.retry = p
		return nil
	}
}

func parseBase(raw string) (*url.URL, error) {
	if !strings.Contains(raw, "://") {
		raw = "http://" + raw
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("sdk: bad server address %q", raw)
	}
	u.Path = strings.TrimSuffix(strings.TrimSuffix(u.Path, "/"), "/v1")
	return u, nil
}

// New returns a client configured from the environment, then opts.
func New(opts ...Option) (*Client, error) {
	c := &Client{hc: &http.Client{}, headers: http.Header{}, retry: DefaultRetry(), apiKey: os.Getenv(EnvAPIKey)}
	domain := os.Getenv(EnvDomain)
	if domain == "" {
		domain = DefaultDomain
	}
	proto := os.Getenv(EnvProtocol)
	if proto == "" {
		proto = "http"
	}
	if strings.Contains(domain, "://") {
		proto = ""
	}
	base := domain
	if proto != "" {
		base = proto + "://" + domain
	}
	u, err := parseBase(base)
	if err != nil {
		return nil, err
	}
	c.base = u
	for _, o := range opts {
		if err := o(c); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// BaseURL returns the server's address.
func (c *Client) BaseURL() string { return c.base.String() }

// APIError is an error answer from the server. It matches the error kind
// of its status and code with errors.Is.
type APIError struct {
	Status    int
	Code      string
	Message   string
	RequestID string
	kind      error
}

func (e *APIError) Error() string {
	s := e.Message
	if e.RequestID != "" {
		s += " (request id " + e.RequestID + ")"
	}
	return s
}

// Unwrap returns the error kind.
func (e *APIError) Unwrap() error { return e.kind }

func decodeError(resp *http.Response) error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var er api.ErrorResponse
	if json.Unmarshal(body, &er) != nil || er.Message == "" {
		er.Message = strings.TrimSpace(string(body))
		if er.Message == "" {
			er.Message = http.StatusText(resp.StatusCode)
		}
	}
	kind := errdefs.KindOf(errhttp.ToError(resp.StatusCode, er.Code, er.Message, resp.Header.Get(errhttp.HeaderKind)))
	return &APIError{Status: resp.StatusCode, Code: er.Code, Message: er.Message,
		RequestID: resp.Header.Get(api.HeaderRequestID), kind: kind}
}

// call describes one API call.
type call struct {
	method string
	path   string
	query  url.Values
	body   any
	header http.Header
	// retry allows retries: the call is idempotent.
	retry bool
	// want are the success statuses.
	want []int
}

// do runs a call and decodes a JSON answer into out (when not nil).
func (c *Client) do(ctx context.Context, cl call, out any) (*http.Response, error) {
	var payload []byte
	if cl.body != nil {
		var err error
		if payload, err = json.Marshal(cl.body); err != nil {
			return nil, fmt.Errorf("sdk: encode request: %w", err)
		}
	}
	attempts := 1
	if cl.retry {
		attempts = c.retry.Attempts
	}
	backoff := c.retry.Initial
	for attempt := 1; ; attempt++ {
		resp, err := c.once(ctx, cl, payload)
		var wait time.Duration
		switch {
		case err != nil && ctx.Err() != nil:
			return nil, ctx.Err()
		case err != nil:
			err = fmt.Errorf("sdk: %s %s: %w: %w", cl.method, cl.path, errdefs.ErrUnavailable, err)
		case !contains(cl.want, resp.StatusCode):
			err = decodeError(resp)
			resp.Body.Close()
			if !retryableStatus(resp.StatusCode) || quotaRefusal(err) {
				return nil, err
			}
			wait = retryAfter(resp)
		default:
			if out == nil {
				_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
				resp.Body.Close()
				return resp, nil
			}
			defer resp.Body.Close()
			if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
				return nil, fmt.Errorf("sdk: decode %s %s: %w", cl.method, cl.path, err)
			}
			return resp, nil
		}
		if attempt >= attempts {
			return nil, err
		}
		if wait == 0 {
			wait = jitter(backoff)
			backoff = min(backoff*2, c.retry.Max)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}

func (c *Client) once(ctx context.Context, cl call, payload []byte) (*http.Response, error) {
	u := *c.base
	u.Path += cl.path
	u.RawQuery = cl.query.Encode()
	var body io.Reader
	if payload != nil {
		body = bytes.NewReader(payload)
	}
	req, err := http.NewRequestWithContext(ctx, cl.method, u.String(), body)
	if err != nil {
		return nil, err
	}
	for k, vs := range c.headers {
		req.Header[k] = vs
	}
	for k, vs := range cl.header {
		req.Header[k] = vs
	}
	if payload != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if c.apiKey != "" {
		req.Header.Set(api.HeaderAPIKey, c.apiKey)
	}
	setRequestID(ctx, req)
	return c.hc.Do(req)
}

func contains(xs []int, x int) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// quotaRefusal reports whether err is a quota's 429: the server applied
// the tenant's policy already (queueing, if that is the policy), so
// trying again at once only repeats the refusal.
func quotaRefusal(err error) bool {
	var ae *APIError
	return errors.As(err, &ae) && strings.HasPrefix(ae.Code, "QUOTA::")
}

func retryableStatus(code int) bool {
	return code == http.StatusTooManyRequests || code == http.StatusBadGateway ||
		code == http.StatusServiceUnavailable || code == http.StatusGatewayTimeout
}

// retryAfter reads a Retry-After, in seconds or as a date, capped at a
// minute.
func retryAfter(resp *http.Response) time.Duration {
	v := resp.Header.Get("Retry-After")
	var d time.Duration
	if n, err := strconv.Atoi(v); err == nil {
		d = time.Duration(n) * time.Second
	} else if at, err := http.ParseTime(v); err == nil {
		d = time.Until(at)
	}
	return min(max(d, 0), time.Minute)
}

func jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	n, err := rand.Int(rand.Reader, big.NewInt(int64(d)/2+1))
	if err != nil {
		return d
	}
	return d*3/4 + time.Duration(n.Int64())
}

// requestIDKey carries a request id in a context.
type requestIDKey struct{}

// WithRequestID returns a context whose requests carry id as their
// X-Request-ID (api.HeaderRequestID), the id the server logs them under
// and answers with: a caller that makes several requests for one step of
// its own (a tool call, say) can find them all in the server's log. An id
// the server would not accept (empty, over 128 bytes, not printable
// ASCII) is not sent; the server then picks its own.
func WithRequestID(ctx context.Context, id string) context.Context {
	if !api.ValidRequestID(id) {
		return ctx
	}
	return context.WithValue(ctx, requestIDKey{}, id)
}

func setRequestID(ctx context.Context, req *http.Request) {
	if id, ok := ctx.Value(requestIDKey{}).(string); ok {
		req.Header.Set(api.HeaderRequestID, id)
	}
}

// NewIdempotencyKey returns a random key for CreateSandbox.
func NewIdempotencyKey() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// IsKind reports whether err is of the given kind; a shorthand for errors.Is.
func IsKind(err, kind error) bool { return errors.Is(err, kind) }
