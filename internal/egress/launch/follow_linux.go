// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package launch

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/corral-dev/corral/internal/egress/audit"
	"github.com/corral-dev/corral/internal/safefile"
)

// position is how far the server has forwarded an enforcer's audit log.
type position struct {
	Epoch int64 `json:"epoch"`
	Seq   int64 `json:"seq"`
}

// follow forwards the enforcer's audit events to Config.Audit until ctx
// ends, reconnecting when the enforcer restarts. The forwarded position
// is kept in dir, so a server restart neither loses nor repeats events
// the enforcer still holds.
func (e *Enforcers) follow(ctx context.Context, id, dir string, hc *http.Client) {
	var pos position
	if b, _, err := safefile.ReadFile(dir, "audit.pos", 4096); err == nil {
		_ = json.Unmarshal(b, &pos)
	}
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := e.followOnce(ctx, hc, id, dir, &pos)
		if ctx.Err() != nil {
			return
		}
		e.log.DebugContext(ctx, "the audit stream ended; reconnecting", "sandbox_id", id, "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

// followOnce reads one connection's worth of events, handing them on in
// batches of what has arrived (at most 256, or every 100 ms).
func (e *Enforcers) followOnce(ctx context.Context, hc *http.Client, id, dir string, pos *position) error {
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	body, err := openEvents(rctx, hc, dir, *pos)
	if err != nil {
		return err
	}
	defer body.Close()
	evc := make(chan audit.Event, 256)
	errc := make(chan error, 1)
	go readEvents(rctx, body, evc, errc)
	var batch []audit.Event
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		if err := e.cfg.Audit(ctx, id, batch); err != nil {
			return err
		}
		last := batch[len(batch)-1]
		*pos = position{Epoch: last.Epoch, Seq: last.Seq}
		b, _ := json.Marshal(pos)
		_ = safefile.WriteFileAtomic(dir, "audit.pos", b, 0o600)
		batch = batch[:0]
		return nil
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case ev, ok := <-evc:
			if !ok {
				if err := flush(); err != nil {
					return err
				}
				return <-errc
			}
			batch = append(batch, ev)
			if len(batch) >= 256 {
				if err := flush(); err != nil {
					return err
				}
			}
		case <-tick.C:
			if err := flush(); err != nil {
				return err
			}
		}
	}
}

// openEvents asks the enforcer for its audit events after pos, and to
// keep the stream open for new ones.
func openEvents(ctx context.Context, hc *http.Client, dir string, pos position) (io.ReadCloser, error) {
	token, _, err := safefile.ReadFile(dir, "token", 4096)
	if err != nil {
		return nil, err
	}
	u := fmt.Sprintf("http://egress/events?follow=true&since=%d&epoch=%d", pos.Seq, pos.Epoch)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	req.Header.Set("OPENSANDBOX-EGRESS-AUTH", strings.TrimSpace(string(token)))
	res, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	if res.StatusCode != http.StatusOK {
		res.Body.Close()
		return nil, fmt.Errorf("GET /events: %s", res.Status)
	}
	return res.Body, nil
}

// readEvents decodes one event a line from r onto evc until r ends,
// then sends why it ended to errc and closes evc; it stops early when
// ctx ends. Each line is bounded: the enforcer's words are read as a
// sandbox's would be.
func readEvents(ctx context.Context, r io.Reader, evc chan<- audit.Event, errc chan<- error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for {
		var ev audit.Event
		err := io.EOF
		if sc.Scan() {
			err = json.Unmarshal(sc.Bytes(), &ev)
		} else if sc.Err() != nil {
			err = sc.Err()
		}
		if err != nil {
			errc <- err
			close(evc)
			return
		}
		select {
		case evc <- ev:
		case <-ctx.Done():
			return
		}
	}
}

// Follow forwards the audit events of an enforcer it did not
// start (a Docker sidecar on a remote engine), reached through dial, to
// Config.Audit until Stop; dir is the sandbox's directory (Prepare's).
// Following again replaces the earlier follower.
func (e *Enforcers) Follow(id, dir string, dial func(ctx context.Context) (net.Conn, error)) {
	if e.cfg.Audit == nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &proc{cancel: cancel, done: make(chan struct{})}
	e.mu.Lock()
	old := e.procs[id]
	e.procs[id] = p
	e.mu.Unlock()
	if old != nil {
		old.cancel()
		<-old.done
	}
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return dial(ctx) }}}
	go func() {
		defer close(p.done)
		e.follow(ctx, id, dir, hc)
	}()
}
