// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package dnsproxy

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/corral-dev/corral/internal/egress/policy"
)

// upstream is a real DNS server on loopback with a fixed zone.
type upstream struct {
	addr    string
	queries atomic.Int32
}

func startUpstream(t *testing.T) *upstream {
	t.Helper()
	u := &upstream{}
	zone := map[string][]dns.RR{}
	for _, rr := range []string{
		"api.example.com. 30 IN A 192.0.2.10",
		"api.example.com. 600 IN A 192.0.2.11",
		"v6.example.com. 120 IN AAAA 2001:db8::10",
		"sneaky.example.com. 300 IN A 169.254.169.254",
		"sneaky.example.com. 300 IN A 192.0.2.20",
		"alias.example.com. 300 IN CNAME api.example.com.",
		"other.net. 300 IN A 198.51.100.1",
	} {
		r, err := dns.NewRR(rr)
		if err != nil {
			t.Fatal(err)
		}
		zone[r.Header().Name] = append(zone[r.Header().Name], r)
	}
	h := dns.HandlerFunc(func(w dns.ResponseWriter, req *dns.Msg) {
		u.queries.Add(1)
		m := new(dns.Msg)
		m.SetReply(req)
		q := req.Question[0]
		// Like a recursive resolver, follow a CNAME to its addresses.
		for name := strings.ToLower(q.Name); name != ""; {
			next := ""
			for _, rr := range zone[name] {
				if rr.Header().Rrtype == q.Qtype {
					m.Answer = append(m.Answer, rr)
				} else if c, ok := rr.(*dns.CNAME); ok {
					m.Answer = append(m.Answer, rr)
					next = c.Target
				}
			}
			name = next
		}
		if len(m.Answer) == 0 {
			m.Rcode = dns.RcodeNameError
		}
		_ = w.WriteMsg(m)
	})
	pc, ln := listenPair(t)
	u.addr = pc.LocalAddr().String()
	for _, s := range []*dns.Server{{PacketConn: pc, Handler: h}, {Listener: ln, Handler: h}} {
		go func() { _ = s.ActivateAndServe() }()
		t.Cleanup(func() { _ = s.Shutdown() })
	}
	return u
}

// listenPair binds UDP and TCP on one loopback port, as a DNS server
// does. The UDP port is free by construction, the same TCP port may not
// be (another test's connection can hold it), so it tries again.
func listenPair(t *testing.T) (net.PacketConn, net.Listener) {
	t.Helper()
	for range 50 {
		pc, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ln, err := net.Listen("tcp", pc.LocalAddr().String())
		if err == nil {
			return pc, ln
		}
		pc.Close()
	}
	t.Fatal("no loopback port free for both UDP and TCP")
	return nil, nil
}

type rig struct {
	addr    string
	mu      sync.Mutex
	allowed map[netip.Addr]time.Duration
	events  []Event
	fail    atomic.Bool
}

func startProxy(t *testing.T, pol policy.Policy, upstreams ...string) *rig {
	t.Helper()
	c, err := policy.Compile(pol, policy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{allowed: map[netip.Addr]time.Duration{}}
	p := New(Config{
		Upstreams: upstreams, Policy: func() *policy.Compiled { return c }, Timeout: time.Second,
		Allow: func(_ context.Context, _ string, addrs []netip.Addr, ttl time.Duration) error {
			if r.fail.Load() {
				return errors.New("nft is broken")
			}
			r.mu.Lock()
			defer r.mu.Unlock()
			for _, a := range addrs {
				r.allowed[a] = ttl
			}
			return nil
		},
		Audit: func(e Event) { r.mu.Lock(); r.events = append(r.events, e); r.mu.Unlock() },
	})
	pc, ln := listenPair(t)
	r.addr = pc.LocalAddr().String()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = p.Serve(ctx, pc, ln); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return r
}

func (r *rig) ask(t *testing.T, network, name string, qtype uint16) *dns.Msg {
	t.Helper()
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), qtype)
	c := &dns.Client{Net: network, Timeout: 3 * time.Second}
	reply, _, err := c.Exchange(m, r.addr)
	if err != nil {
		t.Fatalf("%s %s: %v", network, name, err)
	}
	return reply
}

func addrsOf(m *dns.Msg) []string {
	var out []string
	for _, rr := range m.Answer {
		switch r := rr.(type) {
		case *dns.A:
			out = append(out, r.A.String())
		case *dns.AAAA:
			out = append(out, r.AAAA.String())
		}
	}
	return out
}

func TestAnswersOnlyWhatThePolicyAllows(t *testing.T) {
	up := startUpstream(t)
	r := startProxy(t, policy.Policy{DefaultAction: "deny", Egress: []policy.Rule{{Action: "allow", Target: "*.example.com"}}}, up.addr)

	m := r.ask(t, "udp", "API.Example.com", dns.TypeA)
	if m.Rcode != dns.RcodeSuccess || len(addrsOf(m)) != 2 {
		t.Fatalf("allowed name: rcode %s, %v", dns.RcodeToString[m.Rcode], addrsOf(m))
	}
	r.mu.Lock()
	ttl, ok := r.allowed[netip.MustParseAddr("192.0.2.10")]
	r.mu.Unlock()
	if !ok || ttl != MinTTL {
		t.Errorf("the enforcer got %v (ttl %v), want the address with the clamped minimum TTL", ok, ttl)
	}
	if m := r.ask(t, "tcp", "v6.example.com", dns.TypeAAAA); len(addrsOf(m)) != 1 {
		t.Errorf("AAAA over TCP = %v", m)
	}
	if m := r.ask(t, "udp", "alias.example.com", dns.TypeA); len(addrsOf(m)) != 2 {
		t.Errorf("through a CNAME = %v", addrsOf(m))
	}

	before := up.queries.Load()
	m = r.ask(t, "udp", "other.net", dns.TypeA)
	if m.Rcode != dns.RcodeNameError || len(m.Answer) != 0 {
		t.Errorf("denied name: rcode %s, answers %v", dns.RcodeToString[m.Rcode], m.Answer)
	}
	if up.queries.Load() != before {
		t.Error("a denied name was sent upstream")
	}
	if m := r.ask(t, "udp", "example.com", dns.TypeA); m.Rcode != dns.RcodeNameError {
		t.Error("the apex was answered under a *. rule")
	}

	// An allowed name that resolves into the always-deny set loses that
	// address, in the answer and in the enforcer.
	m = r.ask(t, "udp", "sneaky.example.com", dns.TypeA)
	if got := addrsOf(m); len(got) != 1 || got[0] != "192.0.2.20" {
		t.Errorf("sneaky answer = %v, want the metadata address stripped", got)
	}
	r.mu.Lock()
	_, leaked := r.allowed[netip.MustParseAddr("169.254.169.254")]
	var denials int
	for _, e := range r.events {
		if !e.Allow {
			denials++
		}
	}
	r.mu.Unlock()
	if leaked {
		t.Error("the metadata address reached the enforcer")
	}
	if denials != 2 {
		t.Errorf("audit recorded %d denials, want 2", denials)
	}
}

func TestFailures(t *testing.T) {
	up := startUpstream(t)
	dead, _ := net.ListenPacket("udp", "127.0.0.1:0")
	deadAddr := dead.LocalAddr().String()
	dead.Close()
	// A dead first upstream fails over to the next.
	r := startProxy(t, policy.Policy{DefaultAction: "allow"}, deadAddr, up.addr)
	if m := r.ask(t, "udp", "other.net", dns.TypeA); m.Rcode != dns.RcodeSuccess || len(m.Answer) != 1 {
		t.Errorf("failover = %v", m)
	}
	// No upstream answering: SERVFAIL, not a hang.
	r2 := startProxy(t, policy.Policy{DefaultAction: "allow"}, deadAddr)
	if m := r2.ask(t, "udp", "other.net", dns.TypeA); m.Rcode != dns.RcodeServerFailure {
		t.Errorf("no upstream = %s", dns.RcodeToString[m.Rcode])
	}
	// An enforcer that cannot record the addresses must not let the
	// answer through: the sandbox could not connect anyway.
	r.fail.Store(true)
	if m := r.ask(t, "udp", "other.net", dns.TypeA); m.Rcode != dns.RcodeServerFailure || len(m.Answer) != 0 {
		t.Errorf("enforcer failure = %v", m)
	}
	// Malformed: no question.
	c := &dns.Client{Net: "udp", Timeout: 3 * time.Second}
	empty := new(dns.Msg)
	empty.Id = 7
	reply, _, err := c.Exchange(empty, r.addr)
	if err != nil || reply.Rcode != dns.RcodeFormatError {
		t.Errorf("empty question = %v, %v", reply, err)
	}
}

// A sandbox that floods its resolver gets the host's enforcer to hold
// only so many queries at once, and the operator's resolvers asked only
// so often.
func TestFloodsAreBounded(t *testing.T) {
	pol, err := policy.Compile(policy.Policy{DefaultAction: "allow"}, policy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Run("UpstreamRate", func(t *testing.T) {
		up := startUpstream(t)
		p := New(Config{Upstreams: []string{up.addr}, Policy: func() *policy.Compiled { return pol }, UpstreamRate: 10})
		failed := 0
		for i := range 500 {
			m := new(dns.Msg)
			m.SetQuestion(dns.Fqdn("n"+strconv.Itoa(i)+".example.com"), dns.TypeA)
			if p.Answer(t.Context(), m, "udp").Rcode == dns.RcodeServerFailure {
				failed++
			}
		}
		if q := up.queries.Load(); q > 4*10+10 || failed < 500-4*10-10 {
			t.Fatalf("500 queries at a rate of 10/s: %d went upstream, %d failed", q, failed)
		}
	})
	t.Run("InFlight", func(t *testing.T) {
		// An upstream that never answers: every query waits its timeout.
		hole, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer hole.Close()
		p := New(Config{Upstreams: []string{hole.LocalAddr().String()}, Policy: func() *policy.Compiled { return pol },
			Timeout: 2 * time.Second, MaxInFlight: 4})
		pc, ln := listenPair(t)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { _ = p.Serve(ctx, pc, ln); close(done) }()
		defer func() { cancel(); <-done }()
		var refused atomic.Int32
		var wg sync.WaitGroup
		for i := range 40 {
			wg.Go(func() {
				m := new(dns.Msg)
				m.SetQuestion(dns.Fqdn("q"+strconv.Itoa(i)+".example.com"), dns.TypeA)
				c := &dns.Client{Net: "udp", Timeout: 5 * time.Second}
				if r, _, err := c.Exchange(m, pc.LocalAddr().String()); err == nil && r.Rcode == dns.RcodeRefused {
					refused.Add(1)
				}
			})
		}
		wg.Wait()
		if n := refused.Load(); n < 40-4-8 {
			t.Fatalf("%d of 40 queries were refused with 4 slots; the rest waited on the upstream", n)
		}
	})
}
