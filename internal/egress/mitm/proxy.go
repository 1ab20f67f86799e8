// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

// Package mitm is the credential-injecting proxy of an egress enforcer.
// The sandbox's connections to the addresses of bound hosts are
// redirected to it (nftables, in the sandbox's namespace); it reads the
// original destination, terminates TLS with a certificate its per-sandbox
// CA signs for the requested name, injects the credential of the one
// binding that matches the request, and sends the request on to the
// original destination — re-originating TLS and verifying the real
// host's certificate. The credential never enters the sandbox.
package mitm

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/corral-dev/corral/internal/egress/audit"
	"github.com/corral-dev/corral/internal/egress/vault"
)

// Config configures a Proxy.
type Config struct {
	CA *CA
	// Roots verify the upstream servers (nil: the system's).
	Roots *x509.CertPool
	// Vault returns the vault in force (the zero Vault when none).
	Vault func() vault.Vault
	// Allowed reports whether the policy lets the sandbox reach host.
	Allowed func(host string) bool
	// ResolvedFor reports whether addr was resolved for host. Plain HTTP
	// cannot prove who answers, so a credential goes over it only to an
	// address the sandbox's resolver handed out for that very name.
	ResolvedFor func(addr netip.Addr, host string) bool
	// Dial connects to the original destination (default: net.Dialer).
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Audit receives a credential event per request.
	Audit  func(audit.Event)
	Logger *slog.Logger
}

// Proxy serves redirected connections.
type Proxy struct {
	cfg   Config
	tlsLn *chanListener
	rawLn *chanListener
	rp    *httputil.ReverseProxy
}

type origKey struct{}

// New returns a Proxy.
func New(cfg Config) *Proxy {
	if cfg.Dial == nil {
		var d net.Dialer
		cfg.Dial = d.DialContext
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Audit == nil {
		cfg.Audit = func(audit.Event) {}
	}
	p := &Proxy{cfg: cfg, tlsLn: newChanListener(), rawLn: newChanListener()}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			orig, _ := ctx.Value(origKey{}).(netip.AddrPort)
			return p.cfg.Dial(ctx, network, orig.String())
		},
		// The connection pool is keyed by the request's host, but every
		// dial goes to the original destination: disable reuse across
		// sandboxes' connections by keeping one transport per proxy and
		// the destination in the dial.
		TLSClientConfig:       &tls.Config{RootCAs: cfg.Roots, MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: 5 * time.Minute,
		MaxIdleConnsPerHost:   16,
		IdleConnTimeout:       90 * time.Second,
	}
	p.rp = &httputil.ReverseProxy{
		Rewrite:       func(pr *httputil.ProxyRequest) {},
		Transport:     tr,
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			p.cfg.Logger.Warn("credential proxy: upstream failed", "host", r.Host, "err", err)
			http.Error(w, "corral credential proxy: the upstream request failed: "+upstreamReason(err), http.StatusBadGateway)
		},
	}
	return p
}

func upstreamReason(err error) string {
	var ce *tls.CertificateVerificationError
	if errors.As(err, &ce) {
		return "the server's certificate is not trusted"
	}
	var he x509.HostnameError
	if errors.As(err, &he) {
		return "the server's certificate is for another name"
	}
	return "could not reach the server"
}

// Serve accepts redirected connections from ln until it closes.
func (p *Proxy) Serve(ln net.Listener) error {
	handler := http.HandlerFunc(p.serveHTTP)
	connCtx := func(ctx context.Context, c net.Conn) context.Context {
		if tc, ok := c.(*tls.Conn); ok {
			c = tc.NetConn()
		}
		if ic, ok := c.(*interceptedConn); ok {
			ctx = context.WithValue(ctx, origKey{}, ic.orig)
		}
		return ctx
	}
	servers := []*http.Server{
		{Handler: handler, ConnContext: connCtx, ReadHeaderTimeout: 30 * time.Second,
			TLSConfig: &tls.Config{GetCertificate: p.certificate, NextProtos: []string{"http/1.1"}}},
		{Handler: handler, ConnContext: connCtx, ReadHeaderTimeout: 30 * time.Second},
	}
	var wg sync.WaitGroup
	wg.Go(func() { _ = servers[0].Serve(tls.NewListener(p.tlsLn, servers[0].TLSConfig)) })
	wg.Go(func() { _ = servers[1].Serve(p.rawLn) })
	defer func() {
		for _, s := range servers {
			_ = s.Close()
		}
		wg.Wait()
	}()
	for {
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		go p.classify(c)
	}
}

// certificate signs one for the name the client asked for.
func (p *Proxy) certificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	if hello.ServerName == "" {
		return nil, errors.New("no server name (SNI): nothing to sign for")
	}
	return p.cfg.CA.Leaf(strings.ToLower(hello.ServerName))
}

// classify reads where the connection was going and whether it speaks
// TLS, and hands it to the matching server.
func (p *Proxy) classify(c net.Conn) {
	orig, err := originalDst(c)
	local, _ := netip.ParseAddrPort(c.LocalAddr().String())
	if err != nil || orig == local || !orig.IsValid() {
		// Not redirected: someone connected to the proxy directly.
		c.Close()
		return
	}
	br := bufio.NewReader(c)
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	first, err := br.Peek(1)
	_ = c.SetReadDeadline(time.Time{})
	if err != nil {
		c.Close()
		return
	}
	ic := &interceptedConn{Conn: c, br: br, orig: orig}
	if first[0] == 0x16 { // a TLS handshake record
		p.tlsLn.push(ic)
	} else {
		p.rawLn.push(ic)
	}
}

func (p *Proxy) serveHTTP(w http.ResponseWriter, r *http.Request) {
	orig, _ := r.Context().Value(origKey{}).(netip.AddrPort)
	scheme, host := "http", r.Host
	if h, _, err := net.SplitHostPort(r.Host); err == nil {
		host = h
	}
	host = vault.NormalizeHost(host)
	if r.TLS != nil {
		scheme = "https"
		if sni := strings.ToLower(r.TLS.ServerName); sni != host {
			http.Error(w, "corral credential proxy: the Host header does not match the TLS server name", http.StatusMisdirectedRequest)
			return
		}
	}
	ev := audit.Event{Kind: audit.KindCredential, Target: host + ":" + strconv.Itoa(int(orig.Port())), Protocol: scheme}
	if !p.cfg.Allowed(host) {
		ev.Decision, ev.Rule = "deny", "the policy does not allow "+host
		p.cfg.Audit(ev)
		http.Error(w, "corral credential proxy: the egress policy does not allow "+host, http.StatusForbidden)
		return
	}
	inj := p.cfg.Vault().Match(vault.Request{Scheme: scheme, Host: host, Port: int(orig.Port()), Method: r.Method, Path: r.URL.Path})
	switch {
	case inj.Binding != "" && scheme == "http" && !p.cfg.ResolvedFor(orig.Addr(), host):
		ev.Decision, ev.Rule = "pass", "binding "+inj.Binding+" not applied: "+orig.Addr().String()+" was not resolved for "+host
		inj = vault.Injection{}
	case inj.Binding != "":
		ev.Decision, ev.Rule = "inject", "binding "+inj.Binding
	case len(inj.Ambiguous) > 0:
		ev.Decision, ev.Rule = "pass", "ambiguous: bindings "+strings.Join(inj.Ambiguous, ", ")+" all match; nothing injected"
	default:
		ev.Decision, ev.Rule = "pass", "no binding matches"
	}
	p.cfg.Audit(ev)
	out := r.Clone(context.WithValue(r.Context(), origKey{}, orig))
	out.URL.Scheme, out.URL.Host = scheme, r.Host
	for k, v := range inj.Headers {
		out.Header[k] = v
	}
	p.rp.ServeHTTP(w, out)
}

// originalDst reads where a redirected IPv4 connection was going.
func originalDst(c net.Conn) (netip.AddrPort, error) {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return netip.AddrPort{}, errors.New("not TCP")
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return netip.AddrPort{}, err
	}
	var out netip.AddrPort
	var serr error
	err = rc.Control(func(fd uintptr) {
		// struct sockaddr_in through the 16-byte IPv6 mreq getter.
		m, err := unix.GetsockoptIPv6Mreq(int(fd), unix.IPPROTO_IP, unix.SO_ORIGINAL_DST)
		if err != nil {
			serr = err
			return
		}
		port := binary.BigEndian.Uint16(m.Multiaddr[2:4])
		out = netip.AddrPortFrom(netip.AddrFrom4([4]byte(m.Multiaddr[4:8])), port)
	})
	if err == nil {
		err = serr
	}
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("original destination: %w", err)
	}
	return out, nil
}

// interceptedConn is a redirected connection with what was peeked.
type interceptedConn struct {
	net.Conn
	br   *bufio.Reader
	orig netip.AddrPort
}

func (c *interceptedConn) Read(b []byte) (int, error) { return c.br.Read(b) }

// chanListener hands classified connections to an http.Server.
type chanListener struct {
	ch   chan net.Conn
	done chan struct{}
	once sync.Once
}

func newChanListener() *chanListener {
	return &chanListener{ch: make(chan net.Conn), done: make(chan struct{})}
}

func (l *chanListener) push(c net.Conn) {
	select {
	case l.ch <- c:
	case <-l.done:
		c.Close()
	}
}

func (l *chanListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *chanListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *chanListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }
