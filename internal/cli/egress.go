// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package cli

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"

	"github.com/corral-dev/corral/internal/caplog"
	"github.com/corral-dev/corral/internal/egress"
	"github.com/corral-dev/corral/internal/egress/launch"
	"github.com/corral-dev/corral/internal/egress/nft"
	"github.com/corral-dev/corral/internal/egress/policy"
	"github.com/corral-dev/corral/internal/insandbox"
)

// runEgress is a sandbox's egress enforcer, run on the host:
// `corral egress --netns PATH [flags]`.
func runEgress(ctx context.Context, e *env, args []string) int {
	fs := newFlagSet(e, "egress", "egress --netns PATH [flags]")
	ns := fs.String("netns", "", "the sandbox's network namespace (required); self: this process's own, for an enforcer inside it (a pod's sidecar)")
	token := fs.String("token", e.getenv("OPENSANDBOX_EGRESS_TOKEN"), "token required in OPENSANDBOX-EGRESS-AUTH (default $OPENSANDBOX_EGRESS_TOKEN)")
	tokenFile := fs.String("token-file", "", "read the token from this file instead")
	tokenState := fs.String("token-state", "", "where a token replaced through the API (PUT /corral/token) is kept; it overrides --token when present")
	sandboxID := fs.String("sandbox-id", e.getenv("OPENSANDBOX_EGRESS_SANDBOX_ID"), "the sandbox's ID, for the log and the audit stream")
	policyFile := fs.String("policy-file", "", "where the policy is kept across restarts")
	initial := fs.String("policy", e.getenv("OPENSANDBOX_EGRESS_RULES"), "the initial policy as JSON (default $OPENSANDBOX_EGRESS_RULES; none: deny everything)")
	upstreams := fs.String("upstream", "", "resolvers to forward DNS to, ip:port comma-separated (default: this machine's /etc/resolv.conf)")
	deny := fs.String("deny", "", "more prefixes nothing may reach, comma-separated CIDRs (the host, the server, other sandboxes)")
	allowPrivate := fs.String("allow-private", "", "parts of the private ranges (RFC 1918, 100.64.0.0/10, 198.18.0.0/15, fc00::/7) sandboxes may reach when their policy allows, comma-separated CIDRs")
	dnsListen := fs.String("dns-listen", "127.0.0.1:53", "DNS address inside the namespace")
	apiListen := fs.String("api-listen", insandbox.EgressListen, "policy API address inside the namespace (none: only --api-socket)")
	apiSocket := fs.String("api-socket", "", "also serve the API on this Unix socket on the host (0600)")
	vaultDir := fs.String("vault-dir", "", "enable the credential vault: the directory of the sandbox's CA (ca.pem, ca-key.pem) and the persisted vault")
	vaultListen := fs.String("vault-listen", insandbox.VaultProxyListen, "the credential proxy's address inside the namespace")
	apiCert := fs.String("api-tls-cert", "", "serve the API's TCP listener over TLS with this PEM certificate (with --api-tls-key)")
	apiKey := fs.String("api-tls-key", "", "the PEM key of --api-tls-cert")
	inbound := fs.String("inbound", "", "with --netns self: accept new inbound connections only on these TCP ports (comma-separated), besides loopback and answers")
	upstreamCA := fs.String("upstream-ca", "", "PEM file of extra CAs trusted when the credential proxy verifies servers (besides the system's)")
	exemptMark := fs.String("exempt-mark", "", "socket mark of the enforcer's own DNS queries, let through whatever the policy (decimal or 0x hex; for an enforcer inside the namespace it confines, as a pod's sidecar)")
	logFormat := fs.String("log-format", "json", "log format: json or text")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn, error")
	logLimit := fs.Int64("log-limit", 0, "when stderr is a file, keep it under this many bytes, dropping the oldest lines (0: no limit)")
	if ok, code := parseFlags(fs, e, args); !ok {
		return code
	}
	if *ns == "" {
		return fail(e, "egress: --netns is required")
	}
	if *logLimit < 0 {
		return fail(e, "egress: --log-limit %d: want a size in bytes, 0 for none", *logLimit)
	}
	logw := e.stderr
	if f, ok := logw.(*os.File); ok && *logLimit > 0 {
		// What the sandbox does decides how much the enforcer logs.
		if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() {
			logw = caplog.New(f, *logLimit)
		}
	}
	log, err := newLogger(logw, *logFormat, *logLevel)
	if err != nil {
		return fail(e, "%v", err)
	}
	if *sandboxID != "" {
		log = log.With("sandbox_id", *sandboxID)
	}
	if *tokenFile != "" {
		b, err := os.ReadFile(*tokenFile)
		if err != nil {
			return fail(e, "egress: --token-file: %v", err)
		}
		if *token = strings.TrimSpace(string(b)); *token == "" {
			return fail(e, "egress: --token-file %s is empty", *tokenFile)
		}
	}
	pol, err := policy.Decode([]byte(*initial))
	if err != nil {
		return fail(e, "egress: %v", err)
	}
	if *ns == "self" {
		*ns = ""
	}
	cfg := egress.Config{Netns: *ns, Token: *token, TokenStateFile: *tokenState, PolicyFile: *policyFile, Initial: pol,
		DNSListen: *dnsListen, APIListen: *apiListen, APISocket: *apiSocket, SandboxID: *sandboxID, DropPrivileges: true, Logger: log}
	for _, p := range splitList(*deny) {
		pfx, err := netip.ParsePrefix(p)
		if err != nil {
			return fail(e, "egress: --deny %q: want a CIDR", p)
		}
		cfg.DenyPrefixes = append(cfg.DenyPrefixes, pfx)
	}
	if cfg.AllowPrivate, err = parseAllowPrivate(*allowPrivate); err != nil {
		return fail(e, "egress: --allow-private: %v", err)
	}
	if *exemptMark != "" {
		m, err := strconv.ParseUint(*exemptMark, 0, 32)
		if err != nil || m == 0 {
			return fail(e, "egress: --exempt-mark %q: want a non-zero 32-bit number", *exemptMark)
		}
		cfg.ExemptMark = uint32(m)
	}
	cfg.VaultDir, cfg.VaultListen = *vaultDir, *vaultListen
	if (*apiCert == "") != (*apiKey == "") {
		return fail(e, "egress: --api-tls-cert and --api-tls-key go together")
	}
	if *apiCert != "" {
		cert, err := tls.LoadX509KeyPair(*apiCert, *apiKey)
		if err != nil {
			return fail(e, "egress: --api-tls-cert: %v", err)
		}
		cfg.APITLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS13}
	}
	if *inbound != "" {
		if cfg.Netns != "" {
			return fail(e, "egress: --inbound needs --netns self")
		}
		ports, ok := parsePorts(*inbound)
		if !ok {
			return fail(e, "egress: --inbound %q: want TCP ports, comma-separated", *inbound)
		}
		if err := nft.RestrictInbound(ports); err != nil {
			return fail(e, "egress: %v", err)
		}
	}
	if *upstreamCA != "" {
		pem, err := os.ReadFile(*upstreamCA)
		if err != nil {
			return fail(e, "egress: --upstream-ca: %v", err)
		}
		roots, err := x509.SystemCertPool()
		if err != nil {
			roots = x509.NewCertPool()
		}
		if !roots.AppendCertsFromPEM(pem) {
			return fail(e, "egress: --upstream-ca %s holds no PEM certificate", *upstreamCA)
		}
		cfg.UpstreamRoots = roots
	}
	cfg.Upstreams = splitList(*upstreams)
	if len(cfg.Upstreams) == 0 {
		cfg.Upstreams = launch.SystemResolvers(true)
	}
	for _, u := range cfg.Upstreams {
		if _, err := netip.ParseAddrPort(u); err != nil {
			return fail(e, "egress: upstream %q: want ip:port", u)
		}
	}
	if cfg.Token == "" {
		// A token kept by an earlier run (a replaced one) will do.
		if b, err := os.ReadFile(cfg.TokenStateFile); cfg.TokenStateFile == "" || err != nil || strings.TrimSpace(string(b)) == "" {
			return fail(e, "egress: a token is required (--token, --token-file or $OPENSANDBOX_EGRESS_TOKEN): the API changes the policy")
		}
	}
	svc, err := egress.New(cfg)
	if err != nil {
		return fail(e, "egress: %v", err)
	}
	if err := svc.Run(ctx); err != nil {
		return fail(e, "egress: %v", err)
	}
	return 0
}

// parsePorts reads a comma-separated list of ports from 1 to 65535; ok is
// false for anything else, an empty item included.
func parsePorts(s string) (ports []uint16, ok bool) {
	for _, p := range strings.Split(s, ",") {
		n, err := strconv.ParseUint(strings.TrimSpace(p), 10, 16)
		if err != nil || n == 0 {
			return nil, false
		}
		ports = append(ports, uint16(n))
	}
	return ports, true
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// parseAllowPrivate reads a list of CIDRs an operator allows back out of
// the private ranges, each checked to be one.
func parseAllowPrivate(list string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range splitList(list) {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("%q: want a CIDR", s)
		}
		out = append(out, p.Masked())
	}
	if err := policy.CheckAllowPrivate(out); err != nil {
		return nil, err
	}
	return out, nil
}
