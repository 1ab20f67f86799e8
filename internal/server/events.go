// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/errdefs"
	"github.com/corral-dev/corral/internal/sandbox"
)

// How the event stream paces itself: it reads the log again at least
// this often (another replica's events wake no one here), and writes a
// comment when it has been silent this long, so that proxies keep the
// connection.
var (
	eventPoll      = time.Second
	eventKeepalive = 15 * time.Second
)

// eventPage is how many events one read of the log takes.
const eventPage = 500

// maxStreams bounds a tenant's open event streams: each holds a
// connection and a reader of the log.
const maxStreams = 64

// openStream counts a tenant's stream, or refuses one past maxStreams;
// the caller calls the release it returns.
func (s *Server) openStream(tenant string) (func(), error) {
	s.streamsMu.Lock()
	defer s.streamsMu.Unlock()
	if s.streams[tenant] >= maxStreams {
		return nil, errdefs.Newf(errdefs.ErrResourceExhausted, api.CodeEventTooManyStreams,
			"tenant %s has %d event streams open, the most a tenant may; close one (or resume it by Last-Event-ID later)", tenant, maxStreams)
	}
	s.streams[tenant]++
	return func() {
		s.streamsMu.Lock()
		defer s.streamsMu.Unlock()
		if s.streams[tenant]--; s.streams[tenant] <= 0 {
			delete(s.streams, tenant)
		}
	}, nil
}

// eventStream is a parsed GET /v1/events.
type eventStream struct {
	q        sandbox.EventQuery
	metadata map[string]string
	follow   bool
	// limit bounds the events written when not following (0: no bound).
	limit int
}

// parseEventStream reads the query and Last-Event-ID of r. Without a
// position, a followed stream starts at the newest event (new events
// only) and an unfollowed one at the oldest kept.
func (s *Server) parseEventStream(r *http.Request) (*eventStream, error) {
	q := r.URL.Query()
	for k := range q {
		switch k {
		case "sandboxId", "type", "metadata", "after", "follow", "limit":
		default:
			return nil, invalid("unknown query parameter %q (sandboxId, type, metadata, after, follow, limit)", k)
		}
	}
	es := &eventStream{q: sandbox.EventQuery{Tenant: tenant(r), Limit: eventPage, SandboxID: q.Get("sandboxId")}, follow: true}
	if id := es.q.SandboxID; id != "" && !sandbox.PlausibleID(id) {
		return nil, invalid("sandboxId %q is not a sandbox ID", id)
	}
	kinds, err := eventTypes(q["type"])
	if err != nil {
		return nil, err
	}
	es.q.Kinds = kinds
	if es.metadata, err = sandbox.ParseMetadataQuery(q.Get("metadata")); err != nil {
		return nil, err
	}
	if v := q.Get("follow"); v != "" {
		if es.follow, err = strconv.ParseBool(v); err != nil {
			return nil, invalid("follow %q: must be true or false", v)
		}
	}
	if es.limit, err = queryInt(r, "limit", 0, 1, 100_000); err != nil {
		return nil, err
	}
	pos, header := q.Get("after"), r.Header.Get("Last-Event-ID")
	if pos != "" && header != "" && pos != header {
		return nil, invalid("after=%s and Last-Event-ID %s disagree; send one", pos, header)
	}
	if pos == "" {
		pos = header
	}
	switch {
	case pos != "":
		n, err := strconv.ParseInt(pos, 10, 64)
		if err != nil || n < 0 {
			return nil, invalid("event position %q: must be a non-negative event id", pos)
		}
		es.q.After = n
	case es.follow:
		if es.q.After, err = s.mgr.LastEventSeq(r.Context()); err != nil {
			return nil, err
		}
	}
	return es, nil
}

// eventTypes reads the type filter: repeated, or comma-separated.
func eventTypes(vals []string) ([]string, error) {
	var out []string
	for _, v := range vals {
		for t := range strings.SplitSeq(v, ",") {
			t = strings.TrimSpace(t)
			if t == "" {
				continue
			}
			if !slices.Contains(api.EventTypes, t) {
				return nil, errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeEventInvalidType,
					"unknown event type %q; the types are %s", t, strings.Join(api.EventTypes, ", "))
			}
			if !slices.Contains(out, t) {
				out = append(out, t)
			}
		}
	}
	return out, nil
}

// streamEvents serves GET /v1/events: the caller's tenant's events as
// Server-Sent Events ("id", "event" and "data" lines), from after its
// position (the query's after= or Last-Event-ID), then, when following,
// each new one as it is written. A client that reconnects with the last
// id it read misses nothing and reads nothing twice.
func (s *Server) streamEvents(w http.ResponseWriter, r *http.Request) {
	es, err := s.parseEventStream(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	release, err := s.openStream(es.q.Tenant)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	defer release()
	// The first read answers errors (a runtime with no stream) as errors,
	// before the stream's headers.
	ctx := r.Context()
	changed := s.mgr.EventsChanged()
	evs, err := s.mgr.TenantEvents(ctx, es.q)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	var buf bytes.Buffer
	buf.WriteString("retry: 1000\n\n")
	written := 0
	lastWrite := time.Now()
	for {
		for i := range evs {
			ev := &evs[i]
			es.q.After = ev.Seq
			if !sandbox.MatchesMetadata(ev.Metadata, es.metadata) {
				continue
			}
			appendSSE(&buf, ev.Public())
			if written++; es.limit > 0 && written >= es.limit {
				break
			}
		}
		if buf.Len() > 0 {
			if _, err := w.Write(buf.Bytes()); err != nil {
				return
			}
			buf.Reset()
			if err := rc.Flush(); err != nil {
				return
			}
			lastWrite = time.Now()
		}
		full := len(evs) == es.q.Limit
		if es.limit > 0 && written >= es.limit || !es.follow && !full {
			return
		}
		if !full {
			t := time.NewTimer(eventPoll)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-s.closing:
				t.Stop()
				return
			case <-changed:
			case <-t.C:
			}
			t.Stop()
			changed = s.mgr.EventsChanged()
			if time.Since(lastWrite) >= eventKeepalive {
				buf.WriteString(": keepalive\n\n")
			}
		}
		if evs, err = s.mgr.TenantEvents(ctx, es.q); err != nil {
			if ctx.Err() == nil {
				s.log.WarnContext(ctx, "read the event log", "err", err)
			}
			return
		}
	}
}

// appendSSE frames one event.
func appendSSE(buf *bytes.Buffer, ev api.Event) {
	b, _ := json.Marshal(ev)
	buf.WriteString("id: ")
	buf.WriteString(ev.ID)
	buf.WriteString("\nevent: ")
	buf.WriteString(ev.Type)
	buf.WriteString("\ndata: ")
	buf.Write(b)
	buf.WriteString("\n\n")
}
