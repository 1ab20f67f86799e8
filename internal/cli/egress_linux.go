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
)

// runEgress is a sandbox's egress enforcer, run on the host:
// `corral egress --netns PATH [flags]`.
func runEgress(ctx context.Context, e *env, args []string) int {
	fs := newFlagSet(e, "egress", "egress --netns PATH [flags]")
	o := egress.DefaultOptions()
	o.Register(fs)
	if ok, code := parseFlags(fs, e, args); !ok {
		return code
	}
	for _, v := range []struct {
		field *string
		name  string
	}{{&o.Token, "OPENSANDBOX_EGRESS_TOKEN"}, {&o.SandboxID, "OPENSANDBOX_EGRESS_SANDBOX_ID"}, {&o.Policy, "OPENSANDBOX_EGRESS_RULES"}} {
		if *v.field == "" {
			*v.field = e.getenv(v.name)
		}
	}
	if o.Netns == "" {
		return fail(e, "egress: --netns is required")
	}
	if o.LogLimit < 0 {
		return fail(e, "egress: --log-limit %d: want a size in bytes, 0 for none", o.LogLimit)
	}
	logw := e.stderr
	if f, ok := logw.(*os.File); ok && o.LogLimit > 0 {
		// What the sandbox does decides how much the enforcer logs.
		if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() {
			logw = caplog.New(f, o.LogLimit)
		}
	}
	log, err := newLogger(logw, o.LogFormat, o.LogLevel)
	if err != nil {
		return fail(e, "%v", err)
	}
	if o.SandboxID != "" {
		log = log.With("sandbox_id", o.SandboxID)
	}
	if o.TokenFile != "" {
		b, err := os.ReadFile(o.TokenFile)
		if err != nil {
			return fail(e, "egress: --token-file: %v", err)
		}
		if o.Token = strings.TrimSpace(string(b)); o.Token == "" {
			return fail(e, "egress: --token-file %s is empty", o.TokenFile)
		}
	}
	pol, err := policy.Decode([]byte(o.Policy))
	if err != nil {
		return fail(e, "egress: %v", err)
	}
	if o.Netns == "self" {
		o.Netns = ""
	}
	cfg := egress.Config{Netns: o.Netns, Token: o.Token, TokenStateFile: o.TokenState, PolicyFile: o.PolicyFile, Initial: pol,
		DNSListen: o.DNSListen, APIListen: o.APIListen, APISocket: o.APISocket, SandboxID: o.SandboxID, DropPrivileges: true, Logger: log}
	for _, p := range splitList(o.Deny) {
		pfx, err := netip.ParsePrefix(p)
		if err != nil {
			return fail(e, "egress: --deny %q: want a CIDR", p)
		}
		cfg.DenyPrefixes = append(cfg.DenyPrefixes, pfx)
	}
	if cfg.AllowPrivate, err = parseAllowPrivate(o.AllowPrivate); err != nil {
		return fail(e, "egress: --allow-private: %v", err)
	}
	if o.ExemptMark != "" {
		m, err := strconv.ParseUint(o.ExemptMark, 0, 32)
		if err != nil || m == 0 {
			return fail(e, "egress: --exempt-mark %q: want a non-zero 32-bit number", o.ExemptMark)
		}
		cfg.ExemptMark = uint32(m)
	}
	cfg.VaultDir, cfg.VaultListen = o.VaultDir, o.VaultListen
	if (o.APITLSCert == "") != (o.APITLSKey == "") {
		return fail(e, "egress: --api-tls-cert and --api-tls-key go together")
	}
	if o.APITLSCert != "" {
		cert, err := tls.LoadX509KeyPair(o.APITLSCert, o.APITLSKey)
		if err != nil {
			return fail(e, "egress: --api-tls-cert: %v", err)
		}
		cfg.APITLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS13}
	}
	if o.Inbound != "" {
		if cfg.Netns != "" {
			return fail(e, "egress: --inbound needs --netns self")
		}
		ports, ok := parsePorts(o.Inbound)
		if !ok {
			return fail(e, "egress: --inbound %q: want TCP ports, comma-separated", o.Inbound)
		}
		if err := nft.RestrictInbound(ports); err != nil {
			return fail(e, "egress: %v", err)
		}
	}
	if o.UpstreamCA != "" {
		pem, err := os.ReadFile(o.UpstreamCA)
		if err != nil {
			return fail(e, "egress: --upstream-ca: %v", err)
		}
		roots, err := x509.SystemCertPool()
		if err != nil {
			roots = x509.NewCertPool()
		}
		if !roots.AppendCertsFromPEM(pem) {
			return fail(e, "egress: --upstream-ca %s holds no PEM certificate", o.UpstreamCA)
		}
		cfg.UpstreamRoots = roots
	}
	cfg.Upstreams = splitList(o.Upstreams)
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
