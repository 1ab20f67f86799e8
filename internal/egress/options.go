// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package egress

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"

	"github.com/corral-dev/corral/internal/cmdline"
	"github.com/corral-dev/corral/internal/egress/dnsproxy"
	"github.com/corral-dev/corral/internal/egress/nft"
	"github.com/corral-dev/corral/internal/egress/policy"
	"github.com/corral-dev/corral/internal/insandbox"
)

// Options are `corral egress`'s command line. The runtimes that start an
// enforcer (internal/egress/launch on this machine, the docker driver's
// sidecar, the Kubernetes controller's sidecar) build it with Argv, and
// corral egress parses it with Register, so the two cannot drift apart.
// Lists are comma-separated, as on the command line.
type Options struct {
	// Netns is the sandbox's network namespace; "self" is the process's
	// own (an enforcer inside it, a pod's sidecar).
	Netns string
	// Token, or the contents of TokenFile, is required of API callers;
	// TokenState keeps a token replaced through the API.
	Token, TokenFile, TokenState string
	SandboxID                    string
	// PolicyFile keeps the policy across restarts; Policy is the initial
	// one as JSON.
	PolicyFile, Policy string
	// Upstreams are resolvers (ip:port); Deny more prefixes nothing may
	// reach; AllowPrivate parts of the private ranges a policy may allow.
	Upstreams, Deny, AllowPrivate   string
	DNSListen, APIListen, APISocket string
	// VaultDir enables the credential vault; VaultListen is its proxy.
	VaultDir, VaultListen string
	APITLSCert, APITLSKey string
	// Inbound (with Netns "self") accepts new inbound TCP only on these
	// ports.
	Inbound    string
	UpstreamCA string
	// ExemptMark is the socket mark of the enforcer's own DNS queries.
	ExemptMark          string
	LogFormat, LogLevel string
	LogLimit            int64
}

// DefaultOptions are the options of a bare `corral egress --netns PATH`.
func DefaultOptions() Options {
	return Options{DNSListen: "127.0.0.1:53", APIListen: insandbox.EgressListen, VaultListen: insandbox.VaultProxyListen,
		LogFormat: "json", LogLevel: "info"}
}

// Register defines corral egress's flags on fs, parsed into o; each
// flag's default is o's value when Register is called.
func (o *Options) Register(fs *flag.FlagSet) {
	fs.StringVar(&o.Netns, "netns", o.Netns, "the sandbox's network namespace (required); self: this process's own, for an enforcer inside it (a pod's sidecar)")
	fs.StringVar(&o.Token, "token", o.Token, "token required in OPENSANDBOX-EGRESS-AUTH (default $OPENSANDBOX_EGRESS_TOKEN)")
	fs.StringVar(&o.TokenFile, "token-file", o.TokenFile, "read the token from this file instead")
	fs.StringVar(&o.TokenState, "token-state", o.TokenState, "where a token replaced through the API (PUT /corral/token) is kept; it overrides --token when present")
	fs.StringVar(&o.SandboxID, "sandbox-id", o.SandboxID, "the sandbox's ID, for the log and the audit stream (default $OPENSANDBOX_EGRESS_SANDBOX_ID)")
	fs.StringVar(&o.PolicyFile, "policy-file", o.PolicyFile, "where the policy is kept across restarts")
	fs.StringVar(&o.Policy, "policy", o.Policy, "the initial policy as JSON (default $OPENSANDBOX_EGRESS_RULES; none: deny everything)")
	fs.StringVar(&o.Upstreams, "upstream", o.Upstreams, "resolvers to forward DNS to, ip:port comma-separated (default: this machine's /etc/resolv.conf)")
	fs.StringVar(&o.Deny, "deny", o.Deny, "more prefixes nothing may reach, comma-separated CIDRs (the host, the server, other sandboxes)")
	fs.StringVar(&o.AllowPrivate, "allow-private", o.AllowPrivate, "parts of the private ranges (RFC 1918, 100.64.0.0/10, 198.18.0.0/15, fc00::/7) sandboxes may reach when their policy allows, comma-separated CIDRs")
	fs.StringVar(&o.DNSListen, "dns-listen", o.DNSListen, "DNS address inside the namespace")
	fs.StringVar(&o.APIListen, "api-listen", o.APIListen, "policy API address inside the namespace (none: only --api-socket)")
	fs.StringVar(&o.APISocket, "api-socket", o.APISocket, "also serve the API on this Unix socket on the host (0600)")
	fs.StringVar(&o.VaultDir, "vault-dir", o.VaultDir, "enable the credential vault: the directory of the sandbox's CA (ca.pem, ca-key.pem) and the persisted vault")
	fs.StringVar(&o.VaultListen, "vault-listen", o.VaultListen, "the credential proxy's address inside the namespace")
	fs.StringVar(&o.APITLSCert, "api-tls-cert", o.APITLSCert, "serve the API's TCP listener over TLS with this PEM certificate (with --api-tls-key)")
	fs.StringVar(&o.APITLSKey, "api-tls-key", o.APITLSKey, "the PEM key of --api-tls-cert")
	fs.StringVar(&o.Inbound, "inbound", o.Inbound, "with --netns self: accept new inbound connections only on these TCP ports (comma-separated), besides loopback and answers")
	fs.StringVar(&o.UpstreamCA, "upstream-ca", o.UpstreamCA, "PEM file of extra CAs trusted when the credential proxy verifies servers (besides the system's)")
	fs.StringVar(&o.ExemptMark, "exempt-mark", o.ExemptMark, "socket mark of the enforcer's own DNS queries, let through whatever the policy (decimal or 0x hex; for an enforcer inside the namespace it confines, as a pod's sidecar)")
	fs.StringVar(&o.LogFormat, "log-format", o.LogFormat, "log format: json or text")
	fs.StringVar(&o.LogLevel, "log-level", o.LogLevel, "log level: debug, info, warn, error")
	fs.Int64Var(&o.LogLimit, "log-limit", o.LogLimit, "when stderr is a file, keep it under this many bytes, dropping the oldest lines (0: no limit)")
}

// Argv is the command line that runs binary as `corral egress` with o:
// the flags that differ from DefaultOptions, each followed by its value.
func (o Options) Argv(binary string) []string {
	base := DefaultOptions()
	return cmdline.Argv(binary, "egress", o.Register, base.Register)
}

// ParseArgs parses a command line Argv built (without the binary and
// "egress").
func ParseArgs(args []string) (Options, error) {
	o := DefaultOptions()
	fs := flag.NewFlagSet("egress", flag.ContinueOnError)
	o.Register(fs)
	return o, fs.Parse(args)
}

// Config loads what the options name (the token file, the TLS pair, the
// extra CAs) and checks the rest, for New; the Logger and DropPrivileges
// are the caller's. An error names the flag at fault.
func (o Options) Config() (Config, error) {
	cfg := Config{Netns: o.Netns, Token: o.Token, TokenStateFile: o.TokenState, PolicyFile: o.PolicyFile,
		DNSListen: o.DNSListen, APIListen: o.APIListen, APISocket: o.APISocket, SandboxID: o.SandboxID,
		VaultDir: o.VaultDir, VaultListen: o.VaultListen}
	if o.Netns == "" {
		return Config{}, errors.New("--netns is required")
	}
	if o.Netns == "self" {
		cfg.Netns = ""
	}
	if o.TokenFile != "" {
		b, err := os.ReadFile(o.TokenFile)
		if err != nil {
			return Config{}, fmt.Errorf("--token-file: %w", err)
		}
		if cfg.Token = strings.TrimSpace(string(b)); cfg.Token == "" {
			return Config{}, fmt.Errorf("--token-file %s is empty", o.TokenFile)
		}
	}
	var err error
	if cfg.Initial, err = policy.Decode([]byte(o.Policy)); err != nil {
		return Config{}, fmt.Errorf("--policy: %w", err)
	}
	for _, p := range policy.SplitList(o.Deny) {
		pfx, err := netip.ParsePrefix(p)
		if err != nil {
			return Config{}, fmt.Errorf("--deny %q: want a CIDR", p)
		}
		cfg.DenyPrefixes = append(cfg.DenyPrefixes, pfx)
	}
	if cfg.AllowPrivate, err = policy.ParseAllowPrivate(o.AllowPrivate); err != nil {
		return Config{}, fmt.Errorf("--allow-private: %w", err)
	}
	if o.ExemptMark != "" {
		m, err := strconv.ParseUint(o.ExemptMark, 0, 32)
		if err != nil || m == 0 {
			return Config{}, fmt.Errorf("--exempt-mark %q: want a non-zero 32-bit number", o.ExemptMark)
		}
		cfg.ExemptMark = uint32(m)
	}
	if (o.APITLSCert == "") != (o.APITLSKey == "") {
		return Config{}, errors.New("--api-tls-cert and --api-tls-key go together")
	}
	if o.APITLSCert != "" {
		cert, err := tls.LoadX509KeyPair(o.APITLSCert, o.APITLSKey)
		if err != nil {
			return Config{}, fmt.Errorf("--api-tls-cert: %w", err)
		}
		cfg.APITLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS13}
	}
	if o.Inbound != "" {
		if cfg.Netns != "" {
			return Config{}, errors.New("--inbound needs --netns self")
		}
		ports, ok := nft.ParsePorts(o.Inbound)
		if !ok {
			return Config{}, fmt.Errorf("--inbound %q: want TCP ports, comma-separated", o.Inbound)
		}
		cfg.Inbound = ports
	}
	if o.UpstreamCA != "" {
		pem, err := os.ReadFile(o.UpstreamCA)
		if err != nil {
			return Config{}, fmt.Errorf("--upstream-ca: %w", err)
		}
		roots, err := x509.SystemCertPool()
		if err != nil {
			roots = x509.NewCertPool()
		}
		if !roots.AppendCertsFromPEM(pem) {
			return Config{}, fmt.Errorf("--upstream-ca %s holds no PEM certificate", o.UpstreamCA)
		}
		cfg.UpstreamRoots = roots
	}
	if cfg.Upstreams = policy.SplitList(o.Upstreams); len(cfg.Upstreams) == 0 {
		cfg.Upstreams = dnsproxy.SystemResolvers()
	}
	for _, u := range cfg.Upstreams {
		if _, err := netip.ParseAddrPort(u); err != nil {
			return Config{}, fmt.Errorf("upstream %q: want ip:port", u)
		}
	}
	if cfg.Token == "" {
		// A token kept by an earlier run (a replaced one) will do.
		if b, err := os.ReadFile(cfg.TokenStateFile); cfg.TokenStateFile == "" || err != nil || strings.TrimSpace(string(b)) == "" {
			return Config{}, errors.New("a token is required (--token, --token-file or $OPENSANDBOX_EGRESS_TOKEN): the API changes the policy")
		}
	}
	return cfg, nil
}
