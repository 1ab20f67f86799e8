// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

// Package dnsproxy is the sandbox's resolver under an egress policy: it
// answers only for names the policy allows (NXDOMAIN for the others,
// without asking anyone), forwards allowed queries to the upstream
// resolvers, drops from answers any address in the policy's always-deny
// set, and hands every address it returns to the enforcer — synchronously,
// before replying — so the sandbox can connect to exactly what it was told.
package dnsproxy

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/time/rate"

	"github.com/corral-dev/corral/internal/egress/policy"
)

// TTL bounds for the addresses handed to the enforcer: short enough that a
// name's old addresses expire, long enough not to churn the kernel sets.
const (
	MinTTL = 60 * time.Second
	MaxTTL = 360 * time.Second
)

// Event is one decision, for the audit stream.
type Event struct {
	Name   string
	Type   string
	Allow  bool
	Reason string
	Addrs  []netip.Addr
	// Err is set when an allowed query could not be answered.
	Err string
}

// Config configures a Proxy.
type Config struct {
	// Upstreams are resolver addresses (ip:port) tried in order.
	Upstreams []string
	// Policy returns the policy in force (it may change at any time).
	Policy func() *policy.Compiled
	// Allow receives the addresses of an allowed name's answer with their
	// TTL before the answer is sent; an error turns it into SERVFAIL.
	Allow func(ctx context.Context, name string, addrs []netip.Addr, ttl time.Duration) error
	// Audit receives every decision (optional).
	Audit func(Event)
	// Timeout bounds each upstream exchange (default 5 s).
	Timeout time.Duration
	// Mark, when not 0, is set on upstream sockets (SO_MARK), so that an
	// enforcer inside the namespace it confines lets them out.
	Mark uint32
	// MaxInFlight bounds the queries being answered at once (default 64);
	// past it a query is refused at once. The sandbox decides how many
	// arrive, and every one holds a goroutine of the host's enforcer while
	// it waits for an upstream.
	MaxInFlight int
	// UpstreamRate bounds the allowed queries sent upstream per second
	// (default 100, in bursts of up to 4 times that); past it a query is
	// answered SERVFAIL without asking anyone, so a sandbox cannot flood
	// the operator's resolvers from the host's address.
	UpstreamRate float64
}

// Proxy answers DNS queries under a policy.
type Proxy struct {
	cfg      Config
	slots    chan struct{}
	upstream *rate.Limiter
	mu       sync.Mutex
	servers  []*dns.Server
}

// New returns a Proxy.
func New(cfg Config) *Proxy {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 5 * time.Second
	}
	if cfg.MaxInFlight <= 0 {
		cfg.MaxInFlight = 64
	}
	if cfg.UpstreamRate <= 0 {
		cfg.UpstreamRate = 100
	}
	return &Proxy{cfg: cfg, slots: make(chan struct{}, cfg.MaxInFlight),
		upstream: rate.NewLimiter(rate.Limit(cfg.UpstreamRate), int(4*cfg.UpstreamRate))}
}

// Serve answers on pc (UDP) and ln (TCP) until ctx ends; either may be nil.
func (p *Proxy) Serve(ctx context.Context, pc net.PacketConn, ln net.Listener) error {
	errc := make(chan error, 2)
	n := 0
	start := func(s *dns.Server) {
		n++
		p.mu.Lock()
		p.servers = append(p.servers, s)
		p.mu.Unlock()
		go func() { errc <- s.ActivateAndServe() }()
	}
	if pc != nil {
		start(&dns.Server{PacketConn: pc, Handler: p})
	}
	if ln != nil {
		start(&dns.Server{Listener: ln, Handler: p})
	}
	if n == 0 {
		return errors.New("dnsproxy: nothing to serve on")
	}
	select {
	case <-ctx.Done():
	case err := <-errc:
		p.shutdown()
		return err
	}
	p.shutdown()
	return nil
}

func (p *Proxy) shutdown() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range p.servers {
		_ = s.Shutdown()
	}
	p.servers = nil
}

func (p *Proxy) audit(e Event) {
	if p.cfg.Audit != nil {
		p.cfg.Audit(e)
	}
}

// ServeDNS implements dns.Handler.
func (p *Proxy) ServeDNS(w dns.ResponseWriter, req *dns.Msg) {
	select {
	case p.slots <- struct{}{}:
		defer func() { <-p.slots }()
	default:
		m := new(dns.Msg)
		m.SetRcode(req, dns.RcodeRefused)
		_ = w.WriteMsg(m)
		return
	}
	reply := p.Answer(context.Background(), req, w.RemoteAddr().Network())
	_ = w.WriteMsg(reply)
}

// Answer decides one query and returns the reply to send; network is
// "udp" or "tcp" (upstream queries use the same).
func (p *Proxy) Answer(ctx context.Context, req *dns.Msg, network string) *dns.Msg {
	if len(req.Question) != 1 || req.Opcode != dns.OpcodeQuery {
		m := new(dns.Msg)
		m.SetRcode(req, dns.RcodeFormatError)
		return m
	}
	q := req.Question[0]
	name := policy.NormalizeTarget(q.Name)
	qtype := dns.TypeToString[q.Qtype]
	pol := p.cfg.Policy()
	d := pol.DecideName(name)
	if !d.Allow {
		p.audit(Event{Name: name, Type: qtype, Reason: d.Reason})
		m := new(dns.Msg)
		m.SetRcode(req, dns.RcodeNameError)
		return m
	}
	if !p.upstream.Allow() {
		p.audit(Event{Name: name, Type: qtype, Allow: true, Reason: d.Reason, Err: "over the sandbox's upstream query rate"})
		m := new(dns.Msg)
		m.SetRcode(req, dns.RcodeServerFailure)
		return m
	}
	up, err := p.exchange(ctx, req, network)
	if err != nil {
		p.audit(Event{Name: name, Type: qtype, Allow: true, Reason: d.Reason, Err: err.Error()})
		m := new(dns.Msg)
		m.SetRcode(req, dns.RcodeServerFailure)
		return m
	}
	addrs, ttl := filterAnswers(up, pol)
	if len(addrs) > 0 && p.cfg.Allow != nil {
		if err := p.cfg.Allow(ctx, name, addrs, ttl); err != nil {
			p.audit(Event{Name: name, Type: qtype, Allow: true, Reason: d.Reason, Addrs: addrs, Err: "enforcer: " + err.Error()})
			m := new(dns.Msg)
			m.SetRcode(req, dns.RcodeServerFailure)
			return m
		}
	}
	p.audit(Event{Name: name, Type: qtype, Allow: true, Reason: d.Reason, Addrs: addrs})
	up.Id = req.Id
	return up
}

// exchange asks the upstreams in order, moving on when one fails or
// answers with anything but NOERROR or NXDOMAIN.
func (p *Proxy) exchange(ctx context.Context, req *dns.Msg, network string) (*dns.Msg, error) {
	if len(p.cfg.Upstreams) == 0 {
		return nil, errors.New("no upstream resolver")
	}
	c := &dns.Client{Net: network, Timeout: p.cfg.Timeout}
	if p.cfg.Mark != 0 {
		c.Dialer = &net.Dialer{Timeout: p.cfg.Timeout, Control: MarkSocket(p.cfg.Mark)}
	}
	var last error
	for _, up := range p.cfg.Upstreams {
		m, _, err := c.ExchangeContext(ctx, req.Copy(), up)
		if err != nil {
			last = err
			continue
		}
		if m.Rcode == dns.RcodeSuccess || m.Rcode == dns.RcodeNameError {
			return m, nil
		}
		last = errors.New("upstream " + up + " answered " + dns.RcodeToString[m.Rcode])
	}
	return nil, last
}

// filterAnswers removes always-denied addresses from a reply and returns
// the addresses left with their smallest TTL, clamped.
func filterAnswers(m *dns.Msg, pol *policy.Compiled) ([]netip.Addr, time.Duration) {
	var addrs []netip.Addr
	ttl := MaxTTL
	keep := m.Answer[:0]
	for _, rr := range m.Answer {
		var ip net.IP
		switch r := rr.(type) {
		case *dns.A:
			ip = r.A
		case *dns.AAAA:
			ip = r.AAAA
		default:
			keep = append(keep, rr)
			continue
		}
		a, ok := netip.AddrFromSlice(ip)
		if !ok {
			continue
		}
		a = a.Unmap()
		if _, denied := pol.AlwaysDenied(a); denied {
			continue // never handed out, never reachable
		}
		keep = append(keep, rr)
		addrs = append(addrs, a)
		ttl = min(ttl, time.Duration(rr.Header().Ttl)*time.Second)
	}
	m.Answer = keep
	// The extra section may carry glue addresses the client would use too.
	var extra []dns.RR
	for _, rr := range m.Extra {
		switch rr.(type) {
		case *dns.A, *dns.AAAA:
			continue
		}
		extra = append(extra, rr)
	}
	m.Extra = extra
	return addrs, max(ttl, MinTTL)
}
