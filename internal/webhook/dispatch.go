// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package webhook

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/internal/sandbox"
)

// Sign is the value of the signature header for body sent at t:
// "t=UNIX,v1=HEX", HEX being the HMAC-SHA256 under secret of "UNIX."
// followed by the body.
func Sign(secret string, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(ts))
	mac.Write([]byte{'.'})
	mac.Write(body)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac.Sum(nil))
}

// Verify checks a signature header against body and secret, refusing a
// timestamp further than tolerance from now (replays).
func Verify(secret, header string, body []byte, now time.Time, tolerance time.Duration) error {
	var ts, sig string
	for part := range strings.SplitSeq(header, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			sig = v
		}
	}
	n, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || sig == "" {
		return errors.New("webhook: malformed signature header")
	}
	at := time.Unix(n, 0)
	if d := now.Sub(at); d > tolerance || d < -tolerance {
		return errors.New("webhook: signature timestamp outside the tolerance")
	}
	want := Sign(secret, at, body)
	if !hmac.Equal([]byte(want[strings.Index(want, "v1=")+3:]), []byte(sig)) {
		return errors.New("webhook: signature mismatch")
	}
	return nil
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// enqueuePage is how many events one read of the log takes per
// subscription.
const enqueuePage = 500

// Run delivers until ctx ends: it turns new events into deliveries for
// every subscription, attempts the due ones, and sleeps until the next
// is due, an event is written, or a second has passed (another replica's
// writes wake no one here).
func (s *Service) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	sem := make(chan struct{}, s.cfg.Parallel)
	purged := time.Time{}
	for {
		changed := s.cfg.Events.EventsChanged()
		ws, err := s.cfg.Store.Webhooks(ctx, "")
		if err == nil {
			err = s.enqueue(ctx, ws)
		}
		if err != nil && ctx.Err() == nil {
			s.log.WarnContext(ctx, "make webhook deliveries", "err", err)
		}
		next, err := s.deliverDue(ctx, ws, &wg, sem)
		if err != nil && ctx.Err() == nil {
			s.log.WarnContext(ctx, "read due webhook deliveries", "err", err)
		}
		if time.Since(purged) > time.Hour {
			purged = time.Now()
			if err := s.cfg.Store.PurgeDeliveries(ctx, purged.Add(-s.cfg.Retain)); err != nil && ctx.Err() == nil {
				s.log.WarnContext(ctx, "purge webhook deliveries", "err", err)
			}
		}
		wait := time.Second
		if !next.IsZero() {
			wait = min(wait, max(time.Until(next), 0))
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-changed:
		case <-s.kick:
		case <-t.C:
		}
		t.Stop()
	}
}

// enqueue makes the deliveries of the events past each subscription's
// cursor.
func (s *Service) enqueue(ctx context.Context, ws []*Webhook) error {
	if len(ws) == 0 {
		return nil
	}
	// Every event up to last was written before the reads below: a page
	// that is not full moves the cursor there, past events of other
	// types.
	last, err := s.cfg.Events.LastEventSeq(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, w := range ws {
		for {
			evs, err := s.cfg.Events.TenantEvents(ctx, sandbox.EventQuery{Tenant: w.Tenant, After: w.Cursor, Limit: enqueuePage, Kinds: w.Types})
			if err != nil {
				errs = append(errs, err)
				break
			}
			cursor := last
			if len(evs) == enqueuePage {
				cursor = evs[len(evs)-1].Seq
			}
			if cursor <= w.Cursor {
				break
			}
			now := time.Now().UTC()
			ds := make([]*Delivery, 0, len(evs))
			for i := range evs {
				pub := evs[i].Public()
				ds = append(ds, &Delivery{WebhookID: w.ID, EventSeq: evs[i].Seq, EventID: pub.ID, EventType: pub.Type,
					Body: mustJSON(pub), State: api.DeliveryPending, NextAt: now, CreatedAt: now, UpdatedAt: now})
			}
			if err := s.cfg.Store.Enqueue(ctx, w.ID, ds, cursor); err != nil {
				errs = append(errs, err)
				break
			}
			w.Cursor = cursor
			if len(evs) < enqueuePage {
				break
			}
		}
	}
	return errors.Join(errs...)
}

// deliverDue claims the due deliveries (as many as sem lets run) and
// starts their attempts, and returns when the next later one is due. A
// claim moves a delivery's due time past the attempt's timeout: a
// server that dies mid-attempt leaves it due again soon after.
func (s *Service) deliverDue(ctx context.Context, ws []*Webhook, wg *sync.WaitGroup, sem chan struct{}) (time.Time, error) {
	free := cap(sem) - len(sem)
	if free == 0 {
		return time.Now().Add(100 * time.Millisecond), nil
	}
	ds, next, err := s.cfg.Store.ClaimDue(ctx, time.Now().UTC(), s.lease(), free)
	if err != nil || len(ds) == 0 {
		return next, err
	}
	for _, d := range ds {
		i := slices.IndexFunc(ws, func(w *Webhook) bool { return w.ID == d.WebhookID })
		if i < 0 {
			continue // deleted meanwhile; its deliveries went with it
		}
		sem <- struct{}{} // free slots were counted above; only Run takes them
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem; s.Kick() }()
			s.attempt(ctx, ws[i], d, false)
		}()
	}
	if len(ds) == free {
		return time.Now(), nil
	}
	return next, nil
}

// lease is how long a claimed delivery is not due again: longer than an
// attempt may take.
func (s *Service) lease() time.Duration { return 2*s.cfg.Timeout + 5*time.Second }

// attempt sends d once and records the outcome: delivered on a 2xx,
// else pending with the next attempt's time, or dead after the last
// attempt (or after the only one of a ping).
func (s *Service) attempt(ctx context.Context, w *Webhook, d *Delivery, once bool) {
	d.Attempts++
	status, err := s.send(ctx, w, d)
	if err != nil && ctx.Err() != nil {
		return // cut short by a shutdown: the delivery stays due, and is retried at the next start
	}
	now := time.Now().UTC()
	d.UpdatedAt, d.LastStatus, d.LastError = now, status, ""
	switch {
	case err == nil && status >= 200 && status < 300:
		d.State, d.DeliveredAt, d.NextAt = api.DeliveryDelivered, now, time.Time{}
	default:
		if err != nil {
			d.LastError = truncate(err.Error(), 512)
		} else {
			d.LastError = "the receiver answered " + strconv.Itoa(status)
		}
		if once || d.Attempts >= s.cfg.MaxAttempts {
			d.State, d.NextAt = api.DeliveryDead, time.Time{}
			s.log.WarnContext(ctx, "webhook delivery dead-lettered", "webhook_id", w.ID, "event_id", d.EventID,
				"attempts", d.Attempts, "last_error", d.LastError)
		} else {
			d.NextAt = now.Add(s.backoff(d.Attempts))
		}
	}
	if err := s.cfg.Store.UpdateDelivery(context.WithoutCancel(ctx), d); err != nil {
		s.log.WarnContext(ctx, "record a webhook delivery", "webhook_id", w.ID, "event_id", d.EventID, "err", err)
	}
}

// backoff is the delay after the n-th failed attempt: RetryBase doubled
// n-1 times, at most RetryMax, with full jitter (between half and all of
// it, so that no retry comes at once).
func (s *Service) backoff(n int) time.Duration {
	d := s.cfg.RetryBase
	for i := 1; i < n && d < s.cfg.RetryMax; i++ {
		d *= 2
	}
	d = min(d, s.cfg.RetryMax)
	return d/2 + time.Duration(rand.Int64N(int64(d/2)+1))
}

// send makes one attempt and returns the status (0 if none came).
func (s *Service) send(ctx context.Context, w *Webhook, d *Delivery) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.URL, bytes.NewReader(d.Body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", s.cfg.UserAgent)
	req.Header.Set(api.HeaderWebhookEventID, d.EventID)
	req.Header.Set(api.HeaderWebhookEventType, d.EventType)
	req.Header.Set(api.HeaderWebhookAttempt, strconv.Itoa(d.Attempts))
	req.Header.Set(api.HeaderWebhookSignature, Sign(w.Secret, time.Now(), d.Body))
	resp, err := s.hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// Kick wakes the dispatcher.
func (s *Service) Kick() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}
