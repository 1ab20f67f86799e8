// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

// Package namegate checks that a connection to an address the sandbox may
// reach only because an allowed name resolved to it names that name: the
// server name of its TLS ClientHello, or the Host of its HTTP request.
// Addresses are shared (a CDN's edge, a hosting provider's), so without it
// an allow rule for one name would open every site served from its
// addresses. The enforcer redirects new TCP connections to ports 80 and 443
// of such addresses here (nftables); the gate peeks at the first bytes,
// decides, and splices what passes to the original destination, replaying
// what it read. It reads no further than the ClientHello or the request
// head, so TLS stays end to end. It is hand-written because no library
// peeks without terminating: the ClientHello is read by crypto/tls itself,
// stopped as soon as it has the server name.
package namegate

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/corral-dev/corral/internal/egress/audit"
	"github.com/corral-dev/corral/internal/egress/policy"
)

// Config configures a Gate.
type Config struct {
	// OriginalDst is where a redirected connection was going.
	OriginalDst func(net.Conn) (netip.AddrPort, error)
	// Policy is the policy in force.
	Policy func() *policy.Compiled
	// ResolvedFor reports whether the DNS proxy handed out addr for name.
	ResolvedFor func(addr netip.Addr, name string) bool
	// Dial reaches the original destination (default: a plain dialer).
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Audit receives every refusal (optional).
	Audit  func(audit.Event)
	Logger *slog.Logger
}

// Gate serves redirected connections.
type Gate struct {
	cfg   Config
	wg    sync.WaitGroup
	slots chan struct{}
}

// Bounds: what is read before deciding, and the connections served at
// once (the sandbox decides how many it opens, and the gate is a process
// of the host's).
const (
	maxPeek     = 64 << 10
	peekTimeout = 10 * time.Second
	MaxConns    = 1024
)

// New returns a Gate.
func New(cfg Config) *Gate {
	if cfg.Dial == nil {
		cfg.Dial = (&net.Dialer{Timeout: 10 * time.Second}).DialContext
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Gate{cfg: cfg, slots: make(chan struct{}, MaxConns)}
}

// Serve accepts until ln closes, then waits for its connections.
func (g *Gate) Serve(ln net.Listener) error {
	defer g.wg.Wait()
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		select {
		case g.slots <- struct{}{}:
		default:
			c.Close() // past the bound: refused at once
			continue
		}
		g.wg.Go(func() {
			defer func() { <-g.slots }()
			g.handle(c)
		})
	}
}

// Decide says whether a connection to orig that names name (empty: it
// named none) may pass, and why, in the words of the audit trail.
func (g *Gate) Decide(orig netip.AddrPort, name string) (bool, string) {
	addr := orig.Addr().Unmap()
	pol := g.cfg.Policy()
	if d := pol.DecideIP(addr); d.Allow {
		return true, d.Reason // reachable by address: the name is not what allows it
	} else if d.Rule == policy.ByAlwaysDeny {
		return false, d.Reason
	}
	if name == "" {
		return false, "it names no server (TLS SNI or HTTP Host), and its address is allowed only for names"
	}
	name = policy.NormalizeTarget(name)
	d := pol.DecideName(name)
	if !d.Allow {
		return false, fmt.Sprintf("it names %s, which the policy does not allow (%s)", name, d.Reason)
	}
	if !g.cfg.ResolvedFor(addr, name) {
		return false, fmt.Sprintf("it names %s, which was not resolved to this address", name)
	}
	return true, d.Reason + " (resolved " + name + ", named by the connection)"
}

func (g *Gate) handle(c net.Conn) {
	defer c.Close()
	orig, err := g.cfg.OriginalDst(c)
	if err != nil || orig.Addr().IsLoopback() || orig.Addr().IsUnspecified() {
		return // not a redirected connection: someone dialled the gate itself
	}
	_ = c.SetReadDeadline(time.Now().Add(peekTimeout))
	head, name, isHTTP := peek(c)
	_ = c.SetReadDeadline(time.Time{})
	ok, why := g.Decide(orig, name)
	// The kernel logged nothing of this connection (it was redirected
	// here): the gate's decision is its audit event.
	if g.cfg.Audit != nil {
		ev := audit.Event{Kind: audit.KindConnection, Target: orig.String(), Protocol: "tcp", Name: name, Decision: "allow", Rule: why}
		if !ok {
			ev.Decision, ev.Rule = "deny", "the connection was refused: "+why
		}
		g.cfg.Audit(ev)
	}
	if !ok {
		if isHTTP {
			_, _ = io.WriteString(c, "HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nConnection: close\r\nContent-Length: "+
				fmt.Sprint(len(why)+1)+"\r\n\r\n"+why+"\n")
		}
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	up, err := g.cfg.Dial(ctx, "tcp", orig.String())
	cancel()
	if err != nil {
		return
	}
	defer up.Close()
	if _, err := up.Write(head); err != nil {
		return
	}
	var wg sync.WaitGroup
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
	}
	wg.Go(func() { pipe(up, c) })
	pipe(c, up)
	wg.Wait()
}

// peek reads the start of a connection and returns what it read, the
// name it names, and whether it is HTTP (to answer a refusal in kind).
func peek(c net.Conn) (head []byte, name string, isHTTP bool) {
	rec := &recorder{r: c, max: maxPeek}
	br := bufio.NewReaderSize(rec, 4096)
	first, err := br.Peek(1)
	if err != nil {
		return rec.buf.Bytes(), "", false
	}
	if first[0] == 0x16 { // a TLS handshake record
		return rec.buf.Bytes(), serverName(br), false
	}
	req, err := http.ReadRequest(br)
	if err != nil {
		return rec.buf.Bytes(), "", true
	}
	host := req.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	return rec.buf.Bytes(), strings.Trim(host, "[]"), true
}

// errPeeked stops a handshake once the ClientHello is read.
var errPeeked = errors.New("peeked")

// serverName lets crypto/tls read the ClientHello from r and returns its
// server name; the handshake goes no further and nothing is written.
func serverName(r io.Reader) string {
	var name string
	conn := tls.Server(readOnly{r}, &tls.Config{GetConfigForClient: func(hi *tls.ClientHelloInfo) (*tls.Config, error) {
		name = hi.ServerName
		return nil, errPeeked
	}})
	_ = conn.Handshake()
	return name
}

// recorder keeps what is read through it, up to max bytes; past that a
// read fails.
type recorder struct {
	r   io.Reader
	buf bytes.Buffer
	max int
}

func (r *recorder) Read(p []byte) (int, error) {
	if r.buf.Len() >= r.max {
		return 0, errors.New("the connection's first bytes are too long to check")
	}
	if len(p) > r.max-r.buf.Len() {
		p = p[:r.max-r.buf.Len()]
	}
	n, err := r.r.Read(p)
	r.buf.Write(p[:n])
	return n, err
}

// readOnly is a net.Conn that reads r and writes nowhere.
type readOnly struct{ r io.Reader }

func (c readOnly) Read(p []byte) (int, error)       { return c.r.Read(p) }
func (c readOnly) Write(p []byte) (int, error)      { return 0, errors.New("read only") }
func (c readOnly) Close() error                     { return nil }
func (c readOnly) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (c readOnly) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (c readOnly) SetDeadline(time.Time) error      { return nil }
func (c readOnly) SetReadDeadline(time.Time) error  { return nil }
func (c readOnly) SetWriteDeadline(time.Time) error { return nil }
