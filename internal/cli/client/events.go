// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package client

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/sdk"
)

func runEvents(ctx context.Context, e *env, args []string) int {
	fs := newFlagSet(e, "events", "events [-f] [--sandbox ID] [--type TYPE]... [-l KEY=VALUE]... [--after ID] [--limit N] [-q] [-o table|json]")
	var cf clientFlags
	cf.register(fs)
	follow := fs.Bool("f", false, "follow: wait for new events (Ctrl-C ends); without it, print the events kept and exit")
	fs.BoolVar(follow, "follow", false, "same as -f")
	sandboxID := fs.String("sandbox", "", "only this sandbox's events")
	var types listFlag
	fs.Var(&types, "type", "only events of this type (repeatable): "+strings.Join(api.EventTypes, ", "))
	meta := newKV("-l")
	fs.Var(meta, "l", "only events of sandboxes with this metadata KEY=VALUE (repeatable)")
	after := fs.String("after", "", "start after this event id (default: the oldest kept; with -f, the next new event)")
	limit := fs.Int("limit", 0, "stop after this many events (default: 1000 without -f, no bound with -f)")
	quiet := fs.Bool("q", false, "print event ids only")
	if ok, code := parseNoArgs(fs, e, args, "events"); !ok {
		return code
	}
	if *limit < 0 {
		return fail(e, "events: --limit %d: want a positive number", *limit)
	}
	if *after != "" {
		if n, err := strconv.ParseInt(*after, 10, 64); err != nil || n < 0 {
			return fail(e, "events: --after %q: want an event id (a number)", *after)
		}
	}
	c, err := cf.client(e)
	if err != nil {
		return cf.fail(e, err, 1)
	}
	opts := sdk.EventStreamOptions{SandboxID: *sandboxID, Types: types, Metadata: meta.m, After: *after, NoFollow: !*follow, Limit: *limit}
	if !*follow && opts.Limit == 0 {
		opts.Limit = 1000
	}
	st, err := c.Events(ctx, opts)
	if err != nil {
		return cf.apiFail(e, err)
	}
	defer st.Close()
	var t *table
	if cf.output == "table" && !*quiet {
		t = newTable(e.Stdout, "ID", "TIME", "TYPE", "SANDBOX", "STATE", "DETAIL")
	}
	for {
		ev, err := st.Next()
		switch {
		case errors.Is(err, io.EOF):
			if t != nil {
				t.flush()
			}
			return 0
		case err != nil && ctx.Err() != nil:
			if t != nil {
				t.flush()
			}
			return 130
		case err != nil:
			return cf.apiFail(e, err)
		}
		if *quiet {
			fmt.Fprintln(e.Stdout, ev.ID)
			continue
		}
		if t == nil {
			b, _ := json.Marshal(ev)
			fmt.Fprintln(e.Stdout, string(b))
			continue
		}
		t.row(ev.ID, ev.Time.Local().Format(time.DateTime), ev.Type, ev.SandboxID, ev.State, eventDetail(ev))
		if *follow {
			t.flush() // a followed stream shows each event as it comes
		}
	}
}

// eventDetail is the last column of an event's row: its reason and
// message, or its data.
func eventDetail(ev api.Event) string {
	var parts []string
	if ev.Reason != "" {
		parts = append(parts, ev.Reason)
	}
	if ev.Message != "" {
		parts = append(parts, ev.Message)
	}
	if len(ev.Data) > 0 {
		parts = append(parts, string(ev.Data))
	}
	return strings.Join(parts, ": ")
}

var webhookCommand = Command{
	Name: "webhook", Summary: "send your events to a URL (signed), and see what was delivered",
	Subs: []Subcommand{
		{Name: "create", Usage: "create URL [--type TYPE]... [--secret S] [--description TEXT]", Summary: "subscribe a URL (prints its id and signing secret, once)", Run: runWebhookCreate},
		{Name: "ls", Aliases: []string{"list"}, Usage: "ls", Summary: "list your webhooks", Run: runWebhookList},
		{Name: "deliveries", Usage: "deliveries ID [--limit N]", Summary: "a webhook's newest deliveries: state, attempts, last answer", Run: runWebhookDeliveries},
		{Name: "ping", Usage: "ping ID", Summary: "send a webhook.ping once and show the outcome", Run: runWebhookPing},
		{Name: "rm", Usage: "rm ID...", Summary: "delete webhooks and their delivery logs", Run: runWebhookRemove},
		{Name: "listen", Usage: "listen --secret S [--listen ADDR] [--count N]", Summary: "receive deliveries here: verify each signature, print the event (for trying webhooks out)", Run: runWebhookListen},
	},
	Note: "Deliveries are signed (header Corral-Signature); docs/events.md shows how to verify them.",
}

func runWebhookCreate(ctx context.Context, e *env, args []string) int {
	var cf clientFlags
	fs := newFlagSet(e, "webhook create", "webhook create URL [--type TYPE]... [--secret S] [--description TEXT]")
	cf.register(fs)
	var types listFlag
	fs.Var(&types, "type", "only events of this type (repeatable; default: every type)")
	secret := fs.String("secret", "", "the signing secret (16 to 256 printable characters; default: the server makes one)")
	desc := fs.String("description", "", "a note to recognise the webhook by")
	inv, ok, code := cf.setup(ctx, e, fs, args, -1, false, 1, nArgs(1, "webhook create: give the URL to deliver to"))
	if !ok {
		return code
	}
	wh, err := inv.c.CreateWebhook(ctx, api.WebhookRequest{URL: inv.pos[0], Types: types, Secret: *secret, Description: *desc})
	if err != nil {
		return cf.apiFail(e, err)
	}
	if cf.output != "table" {
		_ = printValue(e.Stdout, cf.output, wh)
		return 0
	}
	t := newTable(e.Stdout, "ID", "SECRET")
	t.row(wh.ID, wh.Secret)
	t.flush()
	fmt.Fprintf(e.Stderr, "the signing secret is shown only this once\n")
	return 0
}

func runWebhookList(ctx context.Context, e *env, args []string) int {
	var cf clientFlags
	fs := newFlagSet(e, "webhook ls", "webhook ls")
	cf.register(fs)
	if ok, code := parseNoArgs(fs, e, args, "webhook ls"); !ok {
		return code
	}
	c, err := cf.client(e)
	if err != nil {
		return cf.fail(e, err, 1)
	}
	items, err := c.ListWebhooks(ctx)
	if err != nil {
		return cf.apiFail(e, err)
	}
	if cf.output != "table" {
		_ = printValue(e.Stdout, cf.output, items)
		return 0
	}
	now := time.Now()
	t := newTable(e.Stdout, "ID", "URL", "TYPES", "AGE", "DESCRIPTION")
	for _, w := range items {
		types := strings.Join(w.Types, ",")
		if types == "" {
			types = "(all)"
		}
		t.row(w.ID, w.URL, types, age(w.CreatedAt, now), w.Description)
	}
	t.flush()
	return 0
}

func runWebhookDeliveries(ctx context.Context, e *env, args []string) int {
	var cf clientFlags
	fs := newFlagSet(e, "webhook deliveries", "webhook deliveries ID [--limit N]")
	cf.register(fs)
	limit := fs.Int("limit", 20, "how many of the newest to show (at most 1000)")
	inv, ok, code := cf.setup(ctx, e, fs, args, -1, false, 1, nArgs(1, "webhook deliveries: give a webhook id"))
	if !ok {
		return code
	}
	ds, err := inv.c.WebhookDeliveries(ctx, inv.pos[0], *limit)
	if err != nil {
		return cf.apiFail(e, err)
	}
	if cf.output != "table" {
		_ = printValue(e.Stdout, cf.output, ds)
		return 0
	}
	t := newTable(e.Stdout, "EVENT", "TYPE", "STATE", "ATTEMPTS", "LAST", "UPDATED", "ERROR")
	for _, d := range ds {
		t.row(d.EventID, d.EventType, d.State, strconv.Itoa(d.Attempts), statusText(d.LastStatus), d.UpdatedAt.Local().Format(time.DateTime), d.LastError)
	}
	t.flush()
	return 0
}

func statusText(code int) string {
	if code == 0 {
		return "-"
	}
	return strconv.Itoa(code)
}

func runWebhookPing(ctx context.Context, e *env, args []string) int {
	var cf clientFlags
	fs := newFlagSet(e, "webhook ping", "webhook ping ID")
	cf.register(fs)
	inv, ok, code := cf.setup(ctx, e, fs, args, -1, false, 1, nArgs(1, "webhook ping: give a webhook id"))
	if !ok {
		return code
	}
	d, err := inv.c.PingWebhook(ctx, inv.pos[0])
	if err != nil {
		return cf.apiFail(e, err)
	}
	if cf.output != "table" {
		_ = printValue(e.Stdout, cf.output, d)
	} else if d.State == api.DeliveryDelivered {
		fmt.Fprintf(e.Stdout, "delivered: the receiver answered %d\n", d.LastStatus)
	} else {
		fmt.Fprintf(e.Stdout, "not delivered: %s\n", d.LastError)
	}
	if d.State != api.DeliveryDelivered {
		return 1
	}
	return 0
}

func runWebhookRemove(ctx context.Context, e *env, args []string) int {
	var cf clientFlags
	fs := newFlagSet(e, "webhook rm", "webhook rm ID...")
	cf.register(fs)
	inv, ok, code := cf.setup(ctx, e, fs, args, -1, false, 1, someArgs("webhook rm: give at least one webhook id"))
	if !ok {
		return code
	}
	status := 0
	for _, id := range inv.pos {
		if err := inv.c.DeleteWebhook(ctx, id); err != nil {
			status = cf.apiFail(e, err)
			continue
		}
		fmt.Fprintln(e.Stdout, id)
	}
	return status
}

// runWebhookListen is a receiver for trying webhooks out: it checks
// each delivery's signature with the secret, prints the event as a JSON
// line (a bad signature is answered 401 and reported on stderr), and
// exits after --count events.
func runWebhookListen(ctx context.Context, e *env, args []string) int {
	fs := newFlagSet(e, "webhook listen", "webhook listen --secret S [--listen ADDR] [--count N]")
	secret := fs.String("secret", "", "the webhook's signing secret (required)")
	addr := fs.String("listen", "127.0.0.1:9321", "address to receive on")
	count := fs.Int("count", 0, "exit after this many verified events (0: run until Ctrl-C)")
	if ok, code := parseNoArgs(fs, e, args, "webhook listen"); !ok {
		return code
	}
	if *secret == "" {
		return fail(e, "webhook listen: --secret is required (webhook create prints it)")
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fail(e, "webhook listen: %v", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var mu sync.Mutex
	seen := 0
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		if err := verifySignature(*secret, r.Header.Get(api.HeaderWebhookSignature), body, time.Now()); err != nil {
			fmt.Fprintf(e.Stderr, "corral: refused a delivery: %v\n", err)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintln(e.Stdout, strings.TrimSpace(string(body)))
		w.WriteHeader(http.StatusNoContent)
		if seen++; *count > 0 && seen >= *count {
			cancel()
		}
	})}
	fmt.Fprintf(e.Stderr, "receiving on http://%s/\n", ln.Addr())
	go func() { _ = srv.Serve(ln) }()
	<-ctx.Done()
	sctx, stop := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer stop()
	_ = srv.Shutdown(sctx)
	return 0
}

// verifySignature checks a Corral-Signature header ("t=UNIX,v1=HEX",
// HEX the HMAC-SHA256 of "UNIX." and the body), refusing one more than
// five minutes from now: what docs/events.md shows receivers doing.
func verifySignature(secret, header string, body []byte, now time.Time) error {
	var ts, sig string
	for _, part := range strings.Split(header, ",") {
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
		return errors.New("no signature")
	}
	if d := now.Sub(time.Unix(n, 0)); d > 5*time.Minute || d < -5*time.Minute {
		return errors.New("the signature's time is more than five minutes off")
	}
	mac := hmac.New(sha256.New, []byte(secret))
	fmt.Fprintf(mac, "%s.", ts)
	mac.Write(body)
	if !hmac.Equal([]byte(hex.EncodeToString(mac.Sum(nil))), []byte(sig)) {
		return errors.New("the signature does not match the secret")
	}
	return nil
}
