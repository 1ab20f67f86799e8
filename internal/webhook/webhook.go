// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package webhook

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/errdefs"
	"github.com/corral-dev/corral/internal/logctx"
	"github.com/corral-dev/corral/internal/sandbox"
)

// Webhook is a tenant's subscription. Cursor is the position in the
// event log up to which its deliveries have been made.
type Webhook struct {
	ID          string
	Tenant      string
	URL         string
	Types       []string
	Secret      string
	Description string
	CreatedAt   time.Time
	Cursor      int64
}

// Delivery is one event's delivery to one subscription. EventSeq is 0
// for a test ping. Body is what is sent, fixed when the delivery is
// made, so every attempt sends the same bytes.
type Delivery struct {
	ID          int64
	WebhookID   string
	EventSeq    int64
	EventID     string
	EventType   string
	Body        []byte
	State       string
	Attempts    int
	LastStatus  int
	LastError   string
	NextAt      time.Time
	CreatedAt   time.Time
	UpdatedAt   time.Time
	DeliveredAt time.Time
}

// Store keeps subscriptions and deliveries (internal/store implements
// it).
type Store interface {
	InsertWebhook(ctx context.Context, w *Webhook) error
	// Webhooks lists a tenant's subscriptions, or every tenant's for "".
	Webhooks(ctx context.Context, tenant string) ([]*Webhook, error)
	// DeleteWebhook removes a tenant's subscription and its deliveries;
	// errdefs.ErrNotFound if it has none of that ID.
	DeleteWebhook(ctx context.Context, tenant, id string) error
	// Enqueue adds deliveries of a subscription and moves its cursor to
	// cursor, atomically; a delivery of an event already delivered to it
	// is not added twice.
	Enqueue(ctx context.Context, webhookID string, ds []*Delivery, cursor int64) error
	// ClaimDue returns up to limit pending deliveries due at now, the
	// earliest first, having moved their due time to now+lease in the
	// same transaction (so that no other reader claims them while they
	// are attempted), and when the next pending one is due after that
	// (zero: none).
	ClaimDue(ctx context.Context, now time.Time, lease time.Duration, limit int) ([]*Delivery, time.Time, error)
	// UpdateDelivery records an attempt's outcome (State, Attempts,
	// LastStatus, LastError, NextAt, DeliveredAt, UpdatedAt); d.ID names it.
	UpdateDelivery(ctx context.Context, d *Delivery) error
	// InsertDelivery records a delivery outside the outbox (a test
	// ping) and sets d.ID.
	InsertDelivery(ctx context.Context, d *Delivery) error
	// Deliveries returns a subscription's newest deliveries first.
	Deliveries(ctx context.Context, webhookID string, limit int) ([]*Delivery, error)
	// PurgeDeliveries removes finished deliveries updated before before.
	PurgeDeliveries(ctx context.Context, before time.Time) error
}

// Events is the event log deliveries are made from (the lifecycle
// Manager).
type Events interface {
	TenantEvents(ctx context.Context, q sandbox.EventQuery) ([]sandbox.Event, error)
	LastEventSeq(ctx context.Context) (int64, error)
	EventsChanged() <-chan struct{}
}

// Config configures a Service. Zero values take the defaults named.
type Config struct {
	Store  Store
	Events Events
	Guard  *Guard
	Logger *slog.Logger
	// Resolver resolves receivers' names (default: the system's).
	Resolver *net.Resolver
	// MaxAttempts is how many attempts a delivery gets before it is
	// dead-lettered (default 12).
	MaxAttempts int
	// RetryBase is the first retry's delay; each next one doubles, up to
	// RetryMax, with full jitter (defaults 5s and 1h).
	RetryBase, RetryMax time.Duration
	// Timeout bounds one attempt (default 10s).
	Timeout time.Duration
	// Parallel bounds the attempts in flight (default 16).
	Parallel int
	// MaxPerTenant bounds a tenant's subscriptions (default 20).
	MaxPerTenant int
	// Retain is how long finished deliveries stay listed (default 7 days).
	Retain time.Duration
	// UserAgent is sent with every delivery.
	UserAgent string
}

func (c *Config) setDefaults() {
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = 12
	}
	if c.RetryBase <= 0 {
		c.RetryBase = 5 * time.Second
	}
	if c.RetryMax <= 0 {
		c.RetryMax = time.Hour
	}
	if c.Timeout <= 0 {
		c.Timeout = 10 * time.Second
	}
	if c.Parallel <= 0 {
		c.Parallel = 16
	}
	if c.MaxPerTenant <= 0 {
		c.MaxPerTenant = 20
	}
	if c.Retain <= 0 {
		c.Retain = 7 * 24 * time.Hour
	}
	if c.Resolver == nil {
		c.Resolver = net.DefaultResolver
	}
	if c.Logger == nil {
		c.Logger = logctx.Discard()
	}
	if c.UserAgent == "" {
		c.UserAgent = "corral-webhook"
	}
}

// Service manages subscriptions and delivers events.
type Service struct {
	cfg Config
	log *slog.Logger
	hc  *http.Client
	// kick wakes the dispatcher (a new subscription, a ping).
	kick chan struct{}
	// mu serializes a tenant's count check with its insert.
	mu sync.Mutex
}

// New returns a Service; Run delivers.
func New(cfg Config) (*Service, error) {
	if cfg.Store == nil || cfg.Events == nil || cfg.Guard == nil {
		return nil, fmt.Errorf("webhook: Store, Events and Guard are required")
	}
	cfg.setDefaults()
	s := &Service{cfg: cfg, log: cfg.Logger, kick: make(chan struct{}, 1)}
	dialer := &net.Dialer{Timeout: cfg.Timeout, Resolver: cfg.Resolver, Control: cfg.Guard.control}
	s.hc = &http.Client{
		Transport: &http.Transport{
			// No proxy from the environment: a proxy would make the
			// connection, and the address check, somewhere else.
			Proxy:                 nil,
			DialContext:           dialer.DialContext,
			TLSHandshakeTimeout:   cfg.Timeout,
			ResponseHeaderTimeout: cfg.Timeout,
			MaxIdleConnsPerHost:   4,
			IdleConnTimeout:       time.Minute,
		},
		Timeout: cfg.Timeout,
		// A redirect is an answer, not a new receiver: it counts as a
		// failure, and its target is never dialed.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return s, nil
}

// Close releases idle connections.
func (s *Service) Close() { s.hc.CloseIdleConnections() }

func invalid(code, format string, args ...any) error {
	return errdefs.Newf(errdefs.ErrInvalidArgument, code, format, args...)
}

func notFound(id string) error {
	return errdefs.Newf(errdefs.ErrNotFound, api.CodeWebhookNotFound, "webhook %s not found", id)
}

// ValidID reports whether id looks like a subscription's ID.
func ValidID(id string) bool {
	if !strings.HasPrefix(id, "wh-") || len(id) != 3+24 {
		return false
	}
	_, err := hex.DecodeString(id[3:])
	return err == nil
}

// Limits of a subscription's fields.
const (
	maxURL         = 2048
	maxDescription = 256
	minSecret      = 16
	maxSecret      = 256
)

// validate checks a subscription request and returns its URL's host.
func validate(req *api.WebhookRequest) (string, error) {
	if req.URL == "" {
		return "", invalid(api.CodeWebhookInvalidURL, "url is required")
	}
	if len(req.URL) > maxURL {
		return "", invalid(api.CodeWebhookInvalidURL, "url is longer than %d bytes", maxURL)
	}
	u, err := url.Parse(req.URL)
	switch {
	case err != nil:
		return "", invalid(api.CodeWebhookInvalidURL, "url %q: %v", req.URL, err)
	case u.Scheme != "http" && u.Scheme != "https":
		return "", invalid(api.CodeWebhookInvalidURL, "url %q: the scheme must be http or https", req.URL)
	case u.Hostname() == "":
		return "", invalid(api.CodeWebhookInvalidURL, "url %q has no host", req.URL)
	case u.User != nil:
		return "", invalid(api.CodeWebhookInvalidURL, "url %q carries credentials; receivers check the signature instead", req.URL)
	case u.Fragment != "" || strings.Contains(req.URL, "#"):
		return "", invalid(api.CodeWebhookInvalidURL, "url %q has a fragment", req.URL)
	}
	for _, t := range req.Types {
		if !slices.Contains(api.EventTypes, t) {
			return "", invalid(api.CodeEventInvalidType, "unknown event type %q; the types are %s", t, strings.Join(api.EventTypes, ", "))
		}
	}
	if n := len(req.Secret); n > 0 && (n < minSecret || n > maxSecret) {
		return "", invalid(api.CodeInvalidParameter, "secret: %d to %d characters (or none, and the server makes one)", minSecret, maxSecret)
	}
	for _, r := range req.Secret {
		if r > unicode.MaxASCII || !unicode.IsPrint(r) || r == ' ' {
			return "", invalid(api.CodeInvalidParameter, "secret: printable ASCII without spaces only")
		}
	}
	if len(req.Description) > maxDescription {
		return "", invalid(api.CodeInvalidParameter, "description is longer than %d bytes", maxDescription)
	}
	return u.Hostname(), nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Create subscribes a tenant. Its deliveries start with the next event.
func (s *Service) Create(ctx context.Context, tenant string, req api.WebhookRequest) (*Webhook, error) {
	host, err := validate(&req)
	if err != nil {
		return nil, err
	}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	err = s.cfg.Guard.CheckName(rctx, s.cfg.Resolver, host)
	cancel()
	if err != nil {
		return nil, invalid(api.CodeWebhookAddressRefused, "url %q: %v", req.URL, err)
	}
	types := slices.Clone(req.Types)
	slices.Sort(types)
	types = slices.Compact(types)
	w := &Webhook{
		ID: "wh-" + randomHex(12), Tenant: tenant, URL: req.URL, Types: types, Secret: req.Secret,
		Description: req.Description, CreatedAt: time.Now().UTC(),
	}
	if w.Secret == "" {
		w.Secret = "whsec_" + randomHex(24)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	have, err := s.cfg.Store.Webhooks(ctx, tenant)
	if err != nil {
		return nil, err
	}
	if len(have) >= s.cfg.MaxPerTenant {
		return nil, errdefs.Newf(errdefs.ErrFailedPrecondition, api.CodeWebhookLimit,
			"a tenant may keep %d webhooks and this one has %d; delete one first", s.cfg.MaxPerTenant, len(have))
	}
	if w.Cursor, err = s.cfg.Events.LastEventSeq(ctx); err != nil {
		return nil, err
	}
	if err := s.cfg.Store.InsertWebhook(ctx, w); err != nil {
		return nil, err
	}
	return w, nil
}

// List returns a tenant's subscriptions.
func (s *Service) List(ctx context.Context, tenant string) ([]*Webhook, error) {
	return s.cfg.Store.Webhooks(ctx, tenant)
}

// Get returns a tenant's subscription.
func (s *Service) Get(ctx context.Context, tenant, id string) (*Webhook, error) {
	ws, err := s.cfg.Store.Webhooks(ctx, tenant)
	if err != nil {
		return nil, err
	}
	for _, w := range ws {
		if w.ID == id {
			return w, nil
		}
	}
	return nil, notFound(id)
}

// Delete removes a tenant's subscription and its deliveries.
func (s *Service) Delete(ctx context.Context, tenant, id string) error {
	if !ValidID(id) {
		return notFound(id)
	}
	if err := s.cfg.Store.DeleteWebhook(ctx, tenant, id); err != nil {
		if errors.Is(err, errdefs.ErrNotFound) {
			return notFound(id)
		}
		return err
	}
	return nil
}

// Deliveries returns a subscription's newest deliveries.
func (s *Service) Deliveries(ctx context.Context, tenant, id string, limit int) ([]*Delivery, error) {
	if !ValidID(id) {
		return nil, notFound(id)
	}
	if _, err := s.Get(ctx, tenant, id); err != nil {
		return nil, err
	}
	return s.cfg.Store.Deliveries(ctx, id, limit)
}

// Ping sends a webhook.ping event to a subscription once, now, and
// returns the delivery with its outcome. A failed ping is not retried.
func (s *Service) Ping(ctx context.Context, tenant, id string) (*Delivery, error) {
	if !ValidID(id) {
		return nil, notFound(id)
	}
	w, err := s.Get(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	now := time.Now().UTC()
	ev := api.Event{ID: "ping-" + randomHex(8), Type: api.EventWebhookPing, Time: now, Source: api.EventSourceServer,
		Message: "a test delivery of webhook " + w.ID}
	d := &Delivery{WebhookID: w.ID, EventID: ev.ID, EventType: ev.Type, Body: mustJSON(ev), State: api.DeliveryPending,
		CreatedAt: now, UpdatedAt: now, NextAt: now.Add(s.lease())}
	if err := s.cfg.Store.InsertDelivery(ctx, d); err != nil {
		return nil, err
	}
	s.attempt(ctx, w, d, true)
	return d, nil
}

// Public is a subscription as the API shows it (without its secret).
func (w *Webhook) Public() api.Webhook {
	types := w.Types
	if types == nil {
		types = []string{}
	}
	return api.Webhook{ID: w.ID, URL: w.URL, Types: types, Description: w.Description, CreatedAt: w.CreatedAt}
}

// Public is a delivery as the API shows it.
func (d *Delivery) Public() api.WebhookDelivery {
	out := api.WebhookDelivery{ID: d.ID, EventID: d.EventID, EventType: d.EventType, State: d.State, Attempts: d.Attempts,
		LastStatus: d.LastStatus, LastError: d.LastError, CreatedAt: d.CreatedAt, UpdatedAt: d.UpdatedAt}
	if d.State == api.DeliveryPending && !d.NextAt.IsZero() {
		t := d.NextAt
		out.NextAt = &t
	}
	if !d.DeliveredAt.IsZero() {
		t := d.DeliveredAt
		out.DeliveredAt = &t
	}
	return out
}
