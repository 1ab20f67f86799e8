// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

// Package egress is a sandbox's egress enforcer, `corral egress`: it
// programs the sandbox's network namespace (internal/egress/nft), answers
// its DNS (internal/egress/dnsproxy, listening inside the namespace) and
// serves the egress contract's policy API, authenticated by
// OPENSANDBOX-EGRESS-AUTH. For the local runtimes (native, local Docker)
// it is a process on the host, outside the sandbox's pid and mount
// namespaces, started by internal/egress/launch: it asks the upstream
// resolvers from the host's namespace and serves the API on a host Unix
// socket only (Config.APISocket, launch.APISocket), which nothing in the
// sandbox can reach. As a sidecar (remote Docker engines, Kubernetes pods)
// it runs inside the namespace it confines and serves the API there on
// port 18080 (a Docker sidecar over TLS its clients pin, as the sandbox
// could take the port while it restarts). A policy change is persisted,
// programmed into the kernel, then swapped into the DNS proxy — never
// half-applied.
package egress

import (
	"bytes"
	"context"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/netutil"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/internal/egress/audit"
	"github.com/corral-dev/corral/internal/egress/dnsproxy"
	"github.com/corral-dev/corral/internal/egress/mitm"
	"github.com/corral-dev/corral/internal/egress/namegate"
	"github.com/corral-dev/corral/internal/egress/nflog"
	"github.com/corral-dev/corral/internal/egress/nft"
	"github.com/corral-dev/corral/internal/egress/policy"
	"github.com/corral-dev/corral/internal/egress/vault"
	"github.com/corral-dev/corral/internal/hostnet/netns"
	"github.com/corral-dev/corral/internal/insandbox"
	"github.com/corral-dev/corral/internal/unixsock"
)

// HeaderAuth carries the egress API's token.
const HeaderAuth = "OPENSANDBOX-EGRESS-AUTH"

// Config configures a Service.
type Config struct {
	// Netns is the sandbox's network namespace; empty means the process's
	// own (an enforcer running inside it, as a pod's sidecar: no setns,
	// so no CAP_SYS_ADMIN).
	Netns string
	// Token is required in OPENSANDBOX-EGRESS-AUTH ("" disables auth).
	Token string
	// TokenStateFile, when set, keeps a token replaced through the API
	// (PUT /corral/token) across restarts of the enforcer: it overrides
	// Token when present.
	TokenStateFile string
	// PolicyFile persists the policy across restarts of the enforcer.
	PolicyFile string
	// Initial is the policy when PolicyFile holds none.
	Initial policy.Policy
	// Upstreams are the resolvers DNS is forwarded to (ip:port).
	Upstreams []string
	// DenyPrefixes join the always-deny set: the host's addresses, the
	// server, other sandboxes.
	DenyPrefixes []netip.Prefix
	// AllowPrivate are parts of the private ranges the operator lets
	// sandboxes reach (policy.Options.AllowPrivate).
	AllowPrivate []netip.Prefix
	// DNSListen and APIListen are addresses inside the namespace
	// (defaults 127.0.0.1:53 and 0.0.0.0:18080; APIListen "none" serves
	// the API on APISocket only).
	DNSListen string
	APIListen string
	// APISocket, when set, also serves the API on this Unix socket on
	// the host: what the sandbox cannot reach, let alone take over.
	APISocket string
	// SandboxID labels the audit events.
	SandboxID string
	// DropPrivileges keeps only CAP_NET_ADMIN once the sockets are bound
	// (the whole process: tests running the service in-process leave it
	// off).
	DropPrivileges bool
	// VaultDir enables the credential vault and its injecting proxy: it
	// holds the sandbox's CA (mitm.CreateCA) and the persisted vault.
	VaultDir string
	// APITLS, when set, serves the API's TCP listener over TLS: an
	// enforcer whose port the sandbox could take while it restarts (a
	// sidecar in the sandbox's namespace) proves itself with a
	// certificate its clients pin before they send the token.
	APITLS *tls.Config
	// GateListen is the name gate's IPv4 address inside the namespace
	// (default 127.0.0.1:18082; it also listens on [::1] at that port):
	// connections to ports 80 and 443 of addresses allowed for names are
	// redirected there and checked for the name (internal/egress/namegate).
	// "none" turns the gate off.
	GateListen string
	// VaultListen is the proxy's address inside the namespace (default
	// 127.0.0.1:18081).
	VaultListen string
	// UpstreamRoots verify the servers the proxy forwards to (nil: the
	// system's roots).
	UpstreamRoots *x509.CertPool
	// ExemptMark, when not 0, is the socket mark of the enforcer's own
	// upstream DNS queries, which the policy then lets through: for an
	// enforcer that runs inside the namespace it confines (a pod's
	// sidecar) rather than outside it.
	ExemptMark uint32
	// Inbound, for an enforcer inside the namespace it confines (Netns
	// ""), accepts new inbound TCP connections only on these ports,
	// besides loopback and answers; New programs it.
	Inbound []uint16
	Logger  *slog.Logger
}

// Service is a running enforcer.
type Service struct {
	cfg   Config
	log   *slog.Logger
	enf   *nft.Enforcer
	dns   *dnsproxy.Proxy
	cur   atomic.Pointer[policy.Compiled]
	mu    sync.Mutex // serialises changes
	ready atomic.Bool
	audit *audit.Log
	// token is the API's token in force.
	token atomic.Pointer[string]

	ca      *mitm.CA
	vault   atomic.Pointer[vault.Vault]
	vaultMu sync.Mutex // serialises vault changes
}

// New loads the policy and programs the namespace; Run then serves.
func New(cfg Config) (*Service, error) {
	if len(cfg.Inbound) > 0 {
		if cfg.Netns != "" {
			return nil, errors.New("inbound ports need an enforcer inside its namespace")
		}
		if err := nft.RestrictInbound(cfg.Inbound); err != nil {
			return nil, err
		}
	}
	if cfg.DNSListen == "" {
		cfg.DNSListen = "127.0.0.1:53"
	}
	if cfg.APIListen == "" {
		cfg.APIListen = insandbox.EgressListen
	}
	if cfg.GateListen == "" {
		cfg.GateListen = DefaultGateListen
	}
	if cfg.VaultListen == "" {
		cfg.VaultListen = DefaultVaultListen
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Service{cfg: cfg, log: cfg.Logger, audit: audit.New(cfg.SandboxID)}
	token := cfg.Token
	if cfg.TokenStateFile != "" {
		if b, err := os.ReadFile(cfg.TokenStateFile); err == nil && len(bytes.TrimSpace(b)) > 0 {
			token = string(bytes.TrimSpace(b))
		}
	}
	s.token.Store(&token)
	pol := cfg.Initial
	if cfg.PolicyFile != "" {
		if b, err := os.ReadFile(cfg.PolicyFile); err == nil {
			if p, err := policy.Decode(b); err == nil {
				pol = p
			} else {
				s.log.Warn("the persisted policy is unreadable; using the initial one", "err", err)
			}
		}
	}
	c, err := policy.Compile(pol, s.policyOptions())
	if err != nil {
		return nil, err
	}
	if s.enf, err = nft.New(cfg.Netns); err != nil {
		return nil, err
	}
	s.enf.Exempt(cfg.ExemptMark)
	if cfg.VaultDir != "" {
		if err := s.loadVault(); err != nil {
			s.enf.Close()
			return nil, err
		}
	}
	if err := s.enf.SetIntercept(s.intercept(s.vault.Load())); err != nil {
		s.enf.Close()
		return nil, err
	}
	if err := s.enf.Apply(c); err != nil {
		s.enf.Close()
		return nil, err
	}
	s.cur.Store(c)
	s.dns = dnsproxy.New(dnsproxy.Config{
		Upstreams: cfg.Upstreams,
		Mark:      cfg.ExemptMark,
		Policy:    func() *policy.Compiled { return s.cur.Load() },
		Allow: func(_ context.Context, name string, addrs []netip.Addr, ttl time.Duration) error {
			return s.enf.AllowResolved(name, addrs, ttl)
		},
		Audit: func(e dnsproxy.Event) {
			ev := audit.Event{Kind: audit.KindDNS, Target: e.Name, Protocol: e.Type, Decision: decision(e.Allow), Rule: e.Reason, Error: e.Err}
			for _, a := range e.Addrs {
				ev.Addrs = append(ev.Addrs, a.String())
			}
			s.record(ev)
		},
	})
	return s, nil
}

// Connections served at once on the API's TCP listener and DNS over
// TCP; more wait to be accepted.
const (
	maxAPIConns = 128
	maxDNSConns = 64
)

// Run serves DNS and the API inside the namespace until ctx ends.
func (s *Service) Run(ctx context.Context) error {
	defer s.enf.Close()
	ls, err := s.listen()
	if err != nil {
		return err
	}
	defer ls.close()
	s.serveProxies(ls)
	hs := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	if rd, err := nflog.Listen(s.cfg.Netns, nft.AuditGroup); err != nil {
		s.log.WarnContext(ctx, "connections will not be audited (DNS answers still are)", "err", err)
	} else {
		actx, stop := context.WithCancel(ctx)
		defer func() { stop(); rd.Close() }()
		go s.auditConnections(actx, rd)
	}
	errc := make(chan error, 3)
	go func() { errc <- s.dns.Serve(ctx, ls.dnsUDP, ls.dns) }()
	for _, ln := range []net.Listener{ls.api, ls.sock} {
		if ln != nil {
			go func() { errc <- hs.Serve(ln) }()
		}
	}
	if s.cfg.DropPrivileges {
		if boundingKept, err := dropPrivileges(); err != nil {
			s.log.WarnContext(ctx, "the enforcer keeps its privileges", "err", err)
		} else if boundingKept {
			s.log.InfoContext(ctx, "kept only CAP_NET_ADMIN; the capability bounding set stays its container's (no CAP_SETPCAP to narrow it)")
		}
	}
	s.ready.Store(true)
	s.log.InfoContext(ctx, "egress enforcing", "netns", s.cfg.Netns, "mode", s.cur.Load().Mode())
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = hs.Shutdown(sctx)
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// listeners are the enforcer's sockets: DNS, the policy API, the
// credential proxy and the name gate in the sandbox's namespace (those
// not configured are nil), and the API's unix socket on the host.
type listeners struct {
	dnsUDP                       net.PacketConn
	dns, api, vault, gate, gate6 net.Listener
	sock                         net.Listener
}

func (ls *listeners) close() {
	if ls.dnsUDP != nil {
		ls.dnsUDP.Close()
	}
	for _, ln := range []net.Listener{ls.dns, ls.api, ls.vault, ls.gate, ls.gate6, ls.sock} {
		if ln != nil {
			ln.Close()
		}
	}
}

// listen opens the listeners, or none.
func (s *Service) listen() (*listeners, error) {
	ls := &listeners{}
	inNetns := func(fn func() error) error { return fn() }
	if s.cfg.Netns != "" {
		inNetns = func(fn func() error) error { return netns.Do(s.cfg.Netns, fn) }
	}
	if err := inNetns(func() error { return s.listenInNetns(ls) }); err != nil {
		ls.close()
		return nil, fmt.Errorf("egress: listen in the sandbox's namespace: %w", err)
	}
	if s.cfg.APISocket != "" {
		_ = os.Remove(s.cfg.APISocket)
		var err error
		if ls.sock, err = unixsock.Listen(s.cfg.APISocket); err == nil {
			err = os.Chmod(s.cfg.APISocket, 0o600)
		}
		if err != nil {
			ls.close()
			return nil, fmt.Errorf("egress: API socket: %w", err)
		}
	}
	return ls, nil
}

// listenInNetns opens what listens in the sandbox's namespace; the caller
// is in it.
func (s *Service) listenInNetns(ls *listeners) (err error) {
	if ls.dnsUDP, err = net.ListenPacket("udp", s.cfg.DNSListen); err != nil {
		return err
	}
	if ls.dns, err = net.Listen("tcp", s.cfg.DNSListen); err != nil {
		return err
	}
	ls.dns = netutil.LimitListener(ls.dns, maxDNSConns)
	if s.ca != nil {
		if ls.vault, err = net.Listen("tcp", s.cfg.VaultListen); err != nil {
			return err
		}
	}
	if s.cfg.GateListen != "none" {
		if ls.gate, err = net.Listen("tcp", s.cfg.GateListen); err != nil {
			return err
		}
		_, port, _ := net.SplitHostPort(s.cfg.GateListen)
		// Without IPv6 in the namespace there is nothing to redirect.
		ls.gate6, _ = net.Listen("tcp6", net.JoinHostPort("::1", port))
	}
	if s.cfg.APIListen != "none" {
		if ls.api, err = net.Listen("tcp", s.cfg.APIListen); err != nil {
			return err
		}
		// Bounded, so connections from the sandbox cannot exhaust the
		// enforcer's memory; TLS when asked.
		ls.api = netutil.LimitListener(ls.api, maxAPIConns)
		if s.cfg.APITLS != nil {
			ls.api = tls.NewListener(ls.api, s.cfg.APITLS)
		}
	}
	return nil
}

// serveProxies serves the name gate and the credential proxy on their
// listeners (when they have them); ls.close ends them.
func (s *Service) serveProxies(ls *listeners) {
	var dial func(ctx context.Context, network, addr string) (net.Conn, error)
	if s.cfg.ExemptMark != 0 {
		// Inside the namespace it confines, the proxies' connections to
		// the real hosts leave by the exempt mark.
		d := &net.Dialer{Control: dnsproxy.MarkSocket(s.cfg.ExemptMark)}
		dial = d.DialContext
	}
	resolvedFor := func(addr netip.Addr, host string) bool {
		return slices.Contains(s.enf.ResolvedNames(addr), policy.NormalizeTarget(host))
	}
	for _, ln := range []net.Listener{ls.gate, ls.gate6} {
		if ln == nil {
			continue
		}
		gate := namegate.New(namegate.Config{OriginalDst: mitm.OriginalDst, Policy: s.cur.Load, ResolvedFor: resolvedFor,
			Dial: dial, Audit: s.record, Logger: s.log})
		go func() { _ = gate.Serve(ln) }()
	}
	if ls.vault != nil {
		proxy := mitm.New(mitm.Config{CA: s.ca, Roots: s.cfg.UpstreamRoots, Vault: s.currentVault, Logger: s.log, Dial: dial,
			Allowed: func(host string) bool { return s.cur.Load().DecideName(host).Allow },
			Reachable: func(addr netip.Addr) bool {
				d := s.cur.Load().DecideIP(addr)
				return d.Rule != policy.ByAlwaysDeny && (d.Rule < 0 || d.Allow)
			},
			ResolvedFor: resolvedFor,
			Audit:       s.record,
		})
		go func() { _ = proxy.Serve(ls.vault) }()
	}
}

func decision(allow bool) string {
	if allow {
		return "allow"
	}
	return "deny"
}

// policyOptions are what every policy of this sandbox is compiled with.
func (s *Service) policyOptions() policy.Options {
	return policy.Options{DenyPrefixes: s.cfg.DenyPrefixes, AllowPrivate: s.cfg.AllowPrivate}
}

// record keeps an audit event for the events API; it is logged at debug
// only (the sandbox decides how many there are).
func (s *Service) record(ev audit.Event) {
	ev = s.audit.Append(ev)
	s.log.Debug("audit", "kind", ev.Kind, "target", ev.Target, "protocol", ev.Protocol, "name", ev.Name,
		"decision", ev.Decision, "rule", ev.Rule, "addrs", ev.Addrs, "error", ev.Error, "seq", ev.Seq)
}

// auditConnections turns the kernel's logged decisions on new
// connections into audit events, naming the rule that decided.
func (s *Service) auditConnections(ctx context.Context, rd *nflog.Reader) {
	for {
		pkts, err := rd.Read()
		if ctx.Err() != nil || errors.Is(err, net.ErrClosed) || errors.Is(err, os.ErrClosed) {
			return
		}
		if err != nil {
			// Overrun (ENOBUFS) or another hiccup: some events are lost,
			// the stream goes on.
			s.log.WarnContext(ctx, "reading the kernel's connection log", "err", err)
			time.Sleep(10 * time.Millisecond)
			continue
		}
		for _, p := range pkts {
			s.record(s.explain(p))
		}
	}
}

func (s *Service) explain(p nflog.Packet) audit.Event {
	c := s.cur.Load()
	ev := audit.Event{Kind: audit.KindConnection, Target: p.Dst.String(), Protocol: p.Proto}
	if p.Dst.Port() == 0 {
		ev.Target = p.Dst.Addr().String()
	}
	addr := p.Dst.Addr()
	switch p.Prefix {
	case nft.LogDenyDNS:
		ev.Decision, ev.Rule = "deny", "DNS goes only to the sandbox's own resolver"
	case nft.LogDenyRange, nft.LogAllowRule:
		d := c.DecideIP(addr)
		ev.Decision, ev.Rule = decision(p.Prefix == nft.LogAllowRule), d.Reason
	case nft.LogAllowDyn:
		ev.Decision = "allow"
		if names := s.enf.ResolvedNames(addr); len(names) > 0 {
			ev.Name, ev.Rule = names[0], c.DecideName(names[0]).Reason+" (resolved "+strings.Join(names, ", ")+")"
		} else {
			ev.Rule = "resolved for an allowed name"
		}
	default:
		ev.Decision, ev.Rule = decision(c.DefaultAllows()), "default "+c.Policy().DefaultAction
	}
	return ev
}

// status is the contract's PolicyStatusResponse.
type status struct {
	Status          string         `json:"status"`
	Mode            string         `json:"mode"`
	EnforcementMode string         `json:"enforcementMode"`
	Reason          string         `json:"reason,omitempty"`
	Policy          *policy.Policy `json:"policy,omitempty"`
}

// ServeHTTP serves the policy API.
func (s *Service) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/healthz" {
		if !s.ready.Load() {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ok")
		return
	}
	if tok := *s.token.Load(); tok != "" && subtle.ConstantTimeCompare([]byte(r.Header.Get(HeaderAuth)), []byte(tok)) != 1 {
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	if r.URL.Path == PathToken {
		s.serveToken(w, r)
		return
	}
	if r.URL.Path == "/events" {
		s.serveEvents(w, r)
		return
	}
	if r.URL.Path == "/credential-vault" || strings.HasPrefix(r.URL.Path, "/credential-vault/") {
		s.serveVault(w, r)
		return
	}
	if r.URL.Path != "/policy" {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20+1))
	if err != nil || len(body) > 1<<20 {
		http.Error(w, "the body is unreadable or larger than 1 MiB", http.StatusRequestEntityTooLarge)
		return
	}
	switch r.Method {
	case http.MethodGet:
		c := s.cur.Load()
		p := c.Policy()
		writeStatus(w, status{Status: "ok", Mode: c.Mode(), EnforcementMode: "dns+nft", Policy: &p})
	case http.MethodPatch:
		var rules []policy.Rule
		if err := strictJSON(body, &rules); err != nil || len(rules) == 0 {
			http.Error(w, "the body must be a non-empty JSON array of {action, target} rules", http.StatusBadRequest)
			return
		}
		s.change(w, func(cur policy.Policy) (policy.Policy, string) { return policy.Merge(cur, rules), "" })
	case http.MethodDelete:
		var targets []string
		if err := strictJSON(body, &targets); err != nil || len(targets) == 0 {
			http.Error(w, "the body must be a non-empty JSON array of targets", http.StatusBadRequest)
			return
		}
		s.change(w, func(cur policy.Policy) (policy.Policy, string) {
			next, n := policy.Remove(cur, targets)
			if n == 0 {
				return next, "no matching targets found"
			}
			return next, ""
		})
	case http.MethodPost, http.MethodPut:
		p, err := policy.Decode(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		reason := ""
		if p.DefaultAction == "" && len(p.Egress) == 0 {
			reason = "policy reset to default deny-all"
		}
		s.change(w, func(policy.Policy) (policy.Policy, string) { return p, reason })
	default:
		w.Header().Set("Allow", "GET, PATCH, DELETE, POST, PUT")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	}
}

// change computes, persists, programs and swaps a new policy.
func (s *Service) change(w http.ResponseWriter, next func(policy.Policy) (policy.Policy, string)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, reason := next(s.cur.Load().Policy())
	c, err := policy.Compile(p, s.policyOptions())
	if err != nil {
		code := http.StatusBadRequest
		if len(p.Egress) > policy.MaxRules {
			code = http.StatusRequestEntityTooLarge
		}
		http.Error(w, err.Error(), code)
		return
	}
	if err := s.persist(c.Policy()); err != nil {
		s.log.Error("persist the policy", "err", err)
		http.Error(w, "could not persist the policy", http.StatusInternalServerError)
		return
	}
	if err := s.enf.Apply(c); err != nil {
		s.log.Error("apply the policy", "err", err)
		http.Error(w, "could not apply the policy", http.StatusInternalServerError)
		return
	}
	s.cur.Store(c)
	s.log.Info("policy changed", "mode", c.Mode(), "rules", len(c.Policy().Egress))
	writeStatus(w, status{Status: "ok", Mode: c.Mode(), EnforcementMode: "dns+nft", Reason: reason})
}

// persist writes the policy atomically and durably.
func (s *Service) persist(p policy.Policy) error {
	if s.cfg.PolicyFile == "" {
		return nil
	}
	b, err := json.Marshal(p)
	if err != nil {
		return err
	}
	return writeFileSync(s.cfg.PolicyFile, b)
}

// serveEvents streams the audit log as JSON lines (a corral extension):
// ?since=SEQ skips what the reader has (ignored when ?epoch= names
// another run of the enforcer), ?follow=true keeps the stream open.
func (s *Service) serveEvents(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", "GET")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	q := r.URL.Query()
	var since int64
	if v := q.Get("since"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			http.Error(w, "since must be a non-negative event number", http.StatusBadRequest)
			return
		}
		since = n
	}
	if v := q.Get("epoch"); v != "" && v != strconv.FormatInt(s.audit.Epoch(), 10) {
		since = 0
	}
	follow := false
	if v := q.Get("follow"); v != "" {
		var err error
		if follow, err = strconv.ParseBool(v); err != nil {
			http.Error(w, "follow must be true or false", http.StatusBadRequest)
			return
		}
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Corral-Audit-Epoch", strconv.FormatInt(s.audit.Epoch(), 10))
	enc := json.NewEncoder(w)
	fl, _ := w.(http.Flusher)
	for {
		evs, wake := s.audit.Since(since)
		for _, ev := range evs {
			if err := enc.Encode(ev); err != nil {
				return
			}
			since = ev.Seq
		}
		if fl != nil {
			fl.Flush()
		}
		if !follow {
			return
		}
		select {
		case <-r.Context().Done():
			return
		case <-wake:
		}
	}
}

func strictJSON(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

func writeStatus(w http.ResponseWriter, st status) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(st)
}

// PathToken is corral's extension of the egress API that replaces its
// token (api.PathEgressToken): the Kubernetes controller hands a warm
// pod's enforcer over to the sandbox that adopts it this way.
const PathToken = api.PathEgressToken

// MinTokenLen is the shortest token PUT /corral/token accepts.
const MinTokenLen = api.EgressTokenMinLen

func (s *Service) serveToken(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPut {
		w.Header().Set("Allow", http.MethodPut)
		http.Error(w, "only PUT", http.StatusMethodNotAllowed)
		return
	}
	var req struct {
		Token string `json:"token"`
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 4097))
	if err != nil || len(body) > 4096 || strictJSON(body, &req) != nil {
		http.Error(w, `the body must be {"token": "..."}`, http.StatusBadRequest)
		return
	}
	if len(req.Token) < MinTokenLen || strings.ContainsAny(req.Token, " \t\r\n") {
		http.Error(w, fmt.Sprintf("the token must be at least %d characters without spaces", MinTokenLen), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cfg.TokenStateFile != "" {
		if err := writeFileSync(s.cfg.TokenStateFile, []byte(req.Token)); err != nil {
			s.log.ErrorContext(r.Context(), "keep the new token", "err", err)
			http.Error(w, "the token could not be kept", http.StatusInternalServerError)
			return
		}
	}
	s.token.Store(&req.Token)
	s.log.InfoContext(r.Context(), "the API token was replaced")
	w.WriteHeader(http.StatusNoContent)
}
