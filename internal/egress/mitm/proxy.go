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
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unsafe"

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
	// Reachable reports whether the policy lets the sandbox reach addr at
	// all: an address in the always-deny set or a denied range is not
	// dialled, whatever name led to it.
	Reachable func(addr netip.Addr) bool
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

// Proxy serves redirected connections. Each client connection is paired
// with one connection to its original destination, opened at the first
// request; requests and responses are relayed in order, so nothing is
// pooled across connections and nothing waits on another goroutine.
type Proxy struct {
	cfg   Config
	slots chan struct{}
}

// Limits of relayed connections.
const (
	handshakeTimeout = 15 * time.Second
	idleTimeout      = 5 * time.Minute
	// responseTimeout bounds the wait for an upstream's answer header.
	responseTimeout = 5 * time.Minute
	// maxHeaderBytes bounds a request's line and header.
	maxHeaderBytes = 1 << 20
	// MaxConns bounds the connections relayed at once; more are closed.
	MaxConns = 512
)

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
	if cfg.Reachable == nil {
		cfg.Reachable = func(netip.Addr) bool { return true }
	}
	return &Proxy{cfg: cfg, slots: make(chan struct{}, MaxConns)}
}

// Serve accepts redirected connections from ln until it closes.
// A failing Accept (out of descriptors, say) is retried with a backoff;
// only a closed listener ends Serve.
func (p *Proxy) Serve(ln net.Listener) error {
	var delay time.Duration
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return err
			}
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			p.cfg.Logger.Warn("credential proxy: accept failed; retrying", "err", err, "in", delay)
			time.Sleep(delay)
			continue
		}
		delay = 0
		select {
		case p.slots <- struct{}{}:
			go func() {
				defer func() { <-p.slots }()
				p.serveConn(c)
			}()
		default:
			c.Close() // too many at once
		}
	}
}

// serveConn relays one redirected connection.
func (p *Proxy) serveConn(raw net.Conn) {
	defer raw.Close()
	orig, err := OriginalDst(raw)
	local, _ := netip.ParseAddrPort(raw.LocalAddr().String())
	if err != nil || orig == local || !orig.IsValid() {
		return // not redirected: someone connected to the proxy directly
	}
	p.relay(raw, orig)
}

// relay serves a connection that was going to orig.
func (p *Proxy) relay(raw net.Conn, orig netip.AddrPort) {
	_ = raw.SetDeadline(time.Now().Add(handshakeTimeout))
	peek := bufio.NewReader(raw)
	first, err := peek.Peek(1)
	if err != nil {
		return
	}
	var client net.Conn = &peekedConn{Conn: raw, r: peek}
	scheme, sni := "http", ""
	if first[0] == 0x16 { // a TLS handshake record
		tc := tls.Server(client, &tls.Config{GetCertificate: p.certificate, NextProtos: []string{"http/1.1"}})
		if err := tc.Handshake(); err != nil {
			return
		}
		client, scheme, sni = tc, "https", strings.ToLower(tc.ConnectionState().ServerName)
	}
	_ = raw.SetDeadline(time.Time{})
	lim := &limitedReader{r: client}
	c := &relay{p: p, client: client, lim: lim, br: bufio.NewReader(lim), bw: bufio.NewWriter(client), orig: orig, scheme: scheme, sni: sni}
	defer c.close()
	c.run()
}

// certificate signs one for the name the client asked for.
func (p *Proxy) certificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	if hello.ServerName == "" {
		return nil, errors.New("no server name (SNI): nothing to sign for")
	}
	name := strings.ToLower(hello.ServerName)
	if !p.cfg.Allowed(name) {
		return nil, errors.New("the egress policy does not allow " + name)
	}
	return p.cfg.CA.Leaf(name)
}

// relay is one client connection and its upstream.
type relay struct {
	p      *Proxy
	client net.Conn
	lim    *limitedReader
	br     *bufio.Reader
	bw     *bufio.Writer
	orig   netip.AddrPort
	scheme string
	sni    string

	up   net.Conn
	upBR *bufio.Reader
	upBW *bufio.Writer
	// audited is the last decision recorded: a new event is recorded when
	// it changes, not for every request of a connection.
	audited string
	buf     []byte
}

func (c *relay) close() {
	if c.up != nil {
		c.up.Close()
	}
}

func (c *relay) run() {
	for {
		_ = c.client.SetReadDeadline(time.Now().Add(idleTimeout))
		c.lim.n = maxHeaderBytes
		req, err := http.ReadRequest(c.br)
		if err != nil {
			if c.lim.n <= 0 {
				c.fail(nil, http.StatusRequestHeaderFieldsTooLarge, "the request header is larger than 1 MiB")
			}
			return
		}
		c.lim.n = -1 // the body: no bound but the upstream's
		_ = c.client.SetReadDeadline(time.Time{})
		if !c.forward(req) {
			return
		}
	}
}

// forward relays one request and its response; false ends the
// connection.
func (c *relay) forward(req *http.Request) bool {
	host := req.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = vault.NormalizeHost(host)
	if c.scheme == "https" && host != c.sni {
		return c.fail(req, http.StatusMisdirectedRequest, "the Host header does not match the TLS server name")
	}
	ev := audit.Event{Kind: audit.KindCredential, Target: host + ":" + strconv.Itoa(int(c.orig.Port())), Protocol: c.scheme}
	if !c.p.cfg.Allowed(host) {
		ev.Decision, ev.Rule = "deny", "the policy does not allow "+host
		c.audit(ev)
		return c.fail(req, http.StatusForbidden, "the egress policy does not allow "+host)
	}
	if !c.p.cfg.Reachable(c.orig.Addr()) {
		ev.Decision, ev.Rule = "deny", "the policy denies "+c.orig.Addr().String()
		c.audit(ev)
		return c.fail(req, http.StatusForbidden, "the egress policy denies "+c.orig.Addr().String())
	}
	inj := c.p.cfg.Vault().Match(vault.Request{Scheme: c.scheme, Host: host, Port: int(c.orig.Port()), Method: req.Method, Path: req.URL.Path})
	switch {
	case inj.Binding != "" && !canonicalPath(req.URL):
		// A binding scoped to a path must not match a path that the
		// server would read as another one (dot segments, escaped '/').
		ev.Decision, ev.Rule = "pass", "binding "+inj.Binding+" not applied: the path is not in canonical form"
		inj = vault.Injection{}
	case inj.Binding != "" && c.scheme == "http" && !c.p.cfg.ResolvedFor(c.orig.Addr(), host):
		ev.Decision, ev.Rule = "pass", "binding "+inj.Binding+" not applied: "+c.orig.Addr().String()+" was not resolved for "+host
		inj = vault.Injection{}
	case inj.Binding != "":
		ev.Decision, ev.Rule = "inject", "binding "+inj.Binding
	case len(inj.Ambiguous) > 0:
		ev.Decision, ev.Rule = "pass", "ambiguous: bindings "+strings.Join(inj.Ambiguous, ", ")+" all match; nothing injected"
	default:
		ev.Decision, ev.Rule = "pass", "no binding matches"
	}
	c.audit(ev)
	for k, v := range inj.Headers {
		req.Header[k] = v
	}
	if strings.EqualFold(req.Header.Get("Expect"), "100-continue") {
		// Answer for the server, so the client sends its body now and
		// it is relayed with the request.
		req.Header.Del("Expect")
		if _, err := c.bw.WriteString("HTTP/1.1 100 Continue\r\n\r\n"); err != nil || c.bw.Flush() != nil {
			return false
		}
	}
	if _, ok := req.Header["User-Agent"]; !ok {
		// Request.Write would add Go's; the client sent none.
		req.Header["User-Agent"] = []string{""}
	}
	res, err := c.roundTrip(req, host)
	if err != nil {
		c.p.cfg.Logger.WarnContext(req.Context(), "credential proxy: upstream failed", "host", host, "err", err)
		return c.fail(req, http.StatusBadGateway, "the upstream request failed: "+upstreamReason(err))
	}
	// Interim answers (103 Early Hints) go through first.
	for res.StatusCode >= 100 && res.StatusCode < 200 && res.StatusCode != http.StatusSwitchingProtocols {
		if err := writeResponse(c.bw, res, nil); err != nil {
			return false
		}
		if res, err = c.readResponse(req); err != nil {
			return c.fail(req, http.StatusBadGateway, "the upstream answer was unreadable")
		}
	}
	defer res.Body.Close()
	if req.ProtoMajor == 1 && req.ProtoMinor == 0 && len(res.TransferEncoding) > 0 {
		// An HTTP/1.0 client cannot read chunks: the body ends with the
		// connection instead.
		res.TransferEncoding, res.Close = nil, true
	}
	if c.buf == nil {
		c.buf = make([]byte, 32<<10)
	}
	if err := writeResponse(c.bw, res, c.buf); err != nil {
		return false
	}
	if res.StatusCode == http.StatusSwitchingProtocols {
		c.splice()
		return false
	}
	return !res.Close && !req.Close
}

// roundTrip sends req upstream and reads the answer's header. An
// upstream connection kept from an earlier request may have been closed
// by the server meanwhile: a request without a body is then sent once
// more on a new connection.
func (c *relay) roundTrip(req *http.Request, host string) (*http.Response, error) {
	reused := c.up != nil
	res, err := c.send(req, host)
	if err != nil && reused && (req.Body == nil || req.Body == http.NoBody || req.ContentLength == 0) {
		c.up.Close()
		c.up = nil
		res, err = c.send(req, host)
	}
	return res, err
}

func (c *relay) send(req *http.Request, host string) (*http.Response, error) {
	if err := c.dial(req.Context(), host); err != nil {
		return nil, err
	}
	err := req.Write(c.upBW)
	if err == nil {
		err = c.upBW.Flush()
	}
	if err != nil {
		return nil, err
	}
	return c.readResponse(req)
}

func (c *relay) readResponse(req *http.Request) (*http.Response, error) {
	_ = c.up.SetReadDeadline(time.Now().Add(responseTimeout))
	res, err := http.ReadResponse(c.upBR, req)
	_ = c.up.SetReadDeadline(time.Time{})
	return res, err
}

// audit records ev if the connection's decision changed.
func (c *relay) audit(ev audit.Event) {
	key := ev.Target + "\x00" + ev.Decision + "\x00" + ev.Rule
	if key != c.audited {
		c.audited = key
		c.p.cfg.Audit(ev)
	}
}

// dial opens the upstream connection at the first request: to the
// original destination, over TLS verified for host when the client
// spoke TLS.
func (c *relay) dial(ctx context.Context, host string) error {
	if c.up != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, handshakeTimeout)
	defer cancel()
	conn, err := c.p.cfg.Dial(ctx, "tcp", c.orig.String())
	if err != nil {
		return err
	}
	if c.scheme == "https" {
		tc := tls.Client(conn, &tls.Config{ServerName: host, RootCAs: c.p.cfg.Roots, MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}})
		if err := tc.HandshakeContext(ctx); err != nil {
			conn.Close()
			return err
		}
		conn = tc
	}
	c.up, c.upBR, c.upBW = conn, bufio.NewReader(conn), bufio.NewWriter(conn)
	return nil
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

// fail answers the client with an error and ends the connection.
func (c *relay) fail(req *http.Request, code int, msg string) bool {
	body := "corral credential proxy: " + msg + "\n"
	res := &http.Response{StatusCode: code, ProtoMajor: 1, ProtoMinor: 1, Request: req, Close: true,
		Header: http.Header{"Content-Type": {"text/plain; charset=utf-8"}}, ContentLength: int64(len(body)),
		Body: io.NopCloser(strings.NewReader(body))}
	if err := res.Write(c.bw); err == nil {
		_ = c.bw.Flush()
	}
	return false
}

// splice joins client and upstream after a protocol switch.
func (c *relay) splice() {
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(c.up, c.br); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c.client, c.upBR); done <- struct{}{} }()
	<-done
	c.client.Close()
	c.up.Close()
	<-done
}

// writeResponse relays a response. A body of known length goes out with
// the header in as few writes as it takes; a streamed one (chunked, or
// delimited by the connection's end) has its header sent at once and
// every read flushed, so server-sent events are not held back. buf is
// the copy buffer.
func writeResponse(w *bufio.Writer, res *http.Response, buf []byte) error {
	fmt.Fprintf(w, "HTTP/%d.%d %03d %s\r\n", res.ProtoMajor, res.ProtoMinor, res.StatusCode, strings.TrimPrefix(res.Status, strconv.Itoa(res.StatusCode)+" "))
	chunked := len(res.TransferEncoding) > 0 && res.TransferEncoding[0] == "chunked"
	h := res.Header
	noBody := res.StatusCode < 200 || res.StatusCode == http.StatusNoContent || res.StatusCode == http.StatusNotModified ||
		(res.Request != nil && res.Request.Method == http.MethodHead)
	switch {
	case chunked:
		h.Set("Transfer-Encoding", "chunked")
		h.Del("Content-Length")
	case res.ContentLength >= 0 && !noBody:
		h.Set("Content-Length", strconv.FormatInt(res.ContentLength, 10))
	}
	if res.Close {
		h.Set("Connection", "close")
	}
	if err := h.Write(w); err != nil {
		return err
	}
	if _, err := w.WriteString("\r\n"); err != nil {
		return err
	}
	if noBody {
		return w.Flush()
	}
	var out io.Writer = w
	if streamed := chunked || res.ContentLength < 0; streamed {
		if err := w.Flush(); err != nil {
			return err
		}
		out = flushWriter{w}
	}
	var cw io.WriteCloser
	if chunked {
		cw = httputil.NewChunkedWriter(out)
		out = cw
	}
	if _, err := io.CopyBuffer(out, res.Body, buf); err != nil {
		return err
	}
	if cw != nil {
		if err := cw.Close(); err != nil {
			return err
		}
		if _, err := w.WriteString("\r\n"); err != nil {
			return err
		}
	}
	return w.Flush()
}

// flushWriter flushes after every write.
type flushWriter struct{ w *bufio.Writer }

func (f flushWriter) Write(b []byte) (int, error) {
	n, err := f.w.Write(b)
	if err == nil {
		err = f.w.Flush()
	}
	return n, err
}

// OriginalDst reads where a connection nftables redirected to a local
// listener was going (IPv4 or IPv6).
func OriginalDst(c net.Conn) (netip.AddrPort, error) {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return netip.AddrPort{}, errors.New("not TCP")
	}
	local, _ := netip.ParseAddrPort(tc.LocalAddr().String())
	rc, err := tc.SyscallConn()
	if err != nil {
		return netip.AddrPort{}, err
	}
	var out netip.AddrPort
	var serr error
	err = rc.Control(func(fd uintptr) {
		if local.Addr().Is6() && !local.Addr().Is4In6() {
			// struct sockaddr_in6 through the 32-byte MTU-info getter.
			m, err := unix.GetsockoptIPv6MTUInfo(int(fd), unix.IPPROTO_IPV6, unix.SO_ORIGINAL_DST) // IP6T_SO_ORIGINAL_DST is 80 too
			if err != nil {
				serr = err
				return
			}
			port := binary.BigEndian.Uint16((*[2]byte)(unsafe.Pointer(&m.Addr.Port))[:])
			out = netip.AddrPortFrom(netip.AddrFrom16(m.Addr.Addr), port)
			return
		}
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

// limitedReader stops reading after n bytes (n < 0: no limit).
type limitedReader struct {
	r io.Reader
	n int64
}

func (l *limitedReader) Read(b []byte) (int, error) {
	if l.n < 0 {
		return l.r.Read(b)
	}
	if l.n == 0 {
		return 0, errors.New("request header too large")
	}
	if int64(len(b)) > l.n {
		b = b[:l.n]
	}
	n, err := l.r.Read(b)
	l.n -= int64(n)
	return n, err
}

// canonicalPath reports whether a request's path reads the same to
// every server: no dot segments, no empty segments, no escaped '/' or
// '.' or '\\'.
func canonicalPath(u *url.URL) bool {
	raw := strings.ToLower(u.EscapedPath())
	if strings.Contains(raw, "%2f") || strings.Contains(raw, "%2e") || strings.Contains(raw, "%5c") || strings.Contains(u.Path, "\\") {
		return false
	}
	for _, seg := range strings.Split(u.Path, "/")[1:] {
		if seg == "." || seg == ".." {
			return false
		}
	}
	return !strings.Contains(u.Path, "//")
}

// peekedConn reads first what was peeked.
type peekedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *peekedConn) Read(b []byte) (int, error) { return c.r.Read(b) }
