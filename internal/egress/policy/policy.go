// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

// Package policy is the egress policy model: a default action and rules
// whose targets are exact domains, "*.suffix" wildcard domains, IP
// addresses or CIDR prefixes. Compile validates a policy (naming the
// offending rule) and builds a matcher where the first matching rule in
// list order decides and no match means the default action. An always-deny
// set — link-local and cloud metadata addresses, unspecified and
// multicast addresses, and whatever the runtime adds (the host's own
// addresses, the corral server, other sandboxes) — is checked before any
// rule, so no policy can open it. The package is pure: enforcement (DNS
// answers, nftables sets) uses it.
package policy

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"
)

// Actions.
const (
	Allow = "allow"
	Deny  = "deny"
)

// Rule is one egress rule as the contract spells it.
type Rule struct {
	Action string `json:"action"`
	Target string `json:"target"`
}

// Policy is the contract's NetworkPolicy.
type Policy struct {
	DefaultAction string `json:"defaultAction,omitempty"`
	Egress        []Rule `json:"egress"`
}

// MaxRules bounds a policy's rules (OpenSandbox's default cap).
const MaxRules = 4096

// Error is a policy that cannot be compiled; Rule is the index of the
// offending rule, or -1.
type Error struct {
	Rule int
	Msg  string
}

func (e *Error) Error() string {
	if e.Rule < 0 {
		return "networkPolicy: " + e.Msg
	}
	return fmt.Sprintf("networkPolicy.egress[%d]: %s", e.Rule, e.Msg)
}

// Decision is what a policy says about a destination.
type Decision struct {
	Allow bool
	// Rule is the deciding rule's index, -1 for the default action, or -2
	// for the always-deny set.
	Rule int
	// Reason says why, for audit events.
	Reason string
}

// The Rule values of decisions no user rule made.
const (
	ByDefault    = -1
	ByAlwaysDeny = -2
)

// kind is how a target is matched.
type kind int

const (
	kindExact kind = iota
	kindWildcard
	kindIP
	kindPrefix
)

type compiledRule struct {
	allow  bool
	kind   kind
	domain string // exact name, or the suffix after "*." with a leading dot
	prefix netip.Prefix
}

// Compiled is a validated policy ready to answer decisions.
type Compiled struct {
	policy     Policy
	defAllow   bool
	rules      []compiledRule
	exact      map[string]int // domain → first rule index
	alwaysDeny []netip.Prefix
}

// Options tune Compile.
type Options struct {
	// DenyPrefixes are added to the always-deny set (the host's addresses,
	// the server, other sandboxes' networks).
	DenyPrefixes []netip.Prefix
	// AllowPrivate takes ranges out of the always-deny set's private
	// part (PrivateRanges): an operator's opt-in to let sandboxes reach
	// an internal network. DenyPrefixes still win over it.
	AllowPrivate []netip.Prefix
}

// AlwaysDeny is the built-in always-deny set: the fixed part, and every
// private range (PrivateRanges).
func AlwaysDeny() []netip.Prefix { return append(fixedDeny(), PrivateRanges()...) }

// fixedDeny is what no option lets a sandbox reach.
func fixedDeny() []netip.Prefix {
	return prefixes(
		"0.0.0.0/8",          // "this network"
		"127.0.0.0/8",        // loopback: names must not resolve to it (the host's, to a proxy)
		"169.254.0.0/16",     // link-local, incl. 169.254.169.254 metadata (AWS, GCP, Azure, Oracle, DigitalOcean)
		"100.100.100.200/32", // Alibaba Cloud metadata (inside 100.64.0.0/10 too, but never allowed back)
		"168.63.129.16/32",   // Azure's WireServer (inside no private range)
		"192.0.0.0/24",       // IETF protocol assignments
		"224.0.0.0/4",        // multicast
		"240.0.0.0/4",        // reserved, and broadcast
		"::/128",             // unspecified
		"::1/128",            // loopback
		"fe80::/10",          // link-local
		"fec0::/10",          // site-local (deprecated, still routed on some networks)
		"fd00:ec2::254/128",  // AWS metadata over IPv6 (inside fc00::/7 too, but never allowed back)
		"ff00::/8",           // multicast
	)
}

// PrivateRanges are the networks a host's neighbours live on, which no
// sandbox reaches unless the operator allows a part of them back
// (Options.AllowPrivate): traffic out of a sandbox is masqueraded as the
// host, which firewalls inside those networks tend to trust.
func PrivateRanges() []netip.Prefix {
	return prefixes(
		"10.0.0.0/8",     // RFC 1918
		"172.16.0.0/12",  // RFC 1918
		"192.168.0.0/16", // RFC 1918
		"100.64.0.0/10",  // carrier-grade NAT (RFC 6598); cloud and VPN internals
		"198.18.0.0/15",  // benchmarking (RFC 2544); used inside some clouds
		"fc00::/7",       // unique local addresses (RFC 4193)
	)
}

func prefixes(ss ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParsePrefix(s)
	}
	return out
}

// SplitList is a comma-separated list's items, trimmed, empty ones
// dropped: how the flags of the server and the enforcer take lists.
func SplitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// ParseAllowPrivate reads a comma-separated list of CIDRs an operator
// allows back out of the private ranges, each checked with
// CheckAllowPrivate.
func ParseAllowPrivate(list string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range SplitList(list) {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("%q: want a CIDR", s)
		}
		out = append(out, p.Masked())
	}
	if err := CheckAllowPrivate(out); err != nil {
		return nil, err
	}
	return out, nil
}

// CheckAllowPrivate refuses a range an operator wants to allow back that
// is not inside a private range, or that holds a metadata address.
func CheckAllowPrivate(allow []netip.Prefix) error {
	for _, a := range allow {
		a = a.Masked()
		inside := false
		for _, p := range PrivateRanges() {
			inside = inside || p.Bits() <= a.Bits() && p.Contains(a.Addr())
		}
		if !inside {
			return fmt.Errorf("%s is not inside a private range (%s): only those can be allowed back", a, joinPrefixes(PrivateRanges()))
		}
		for _, f := range fixedDeny() {
			if f.Overlaps(a) {
				return fmt.Errorf("%s holds %s, which stays denied", a, f)
			}
		}
	}
	return nil
}

func joinPrefixes(ps []netip.Prefix) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	return strings.Join(s, ", ")
}

// denySet is the always-deny set under opts: the fixed part, the private
// ranges less what opts allows back, and opts' own denials.
func denySet(opts Options) []netip.Prefix {
	out := fixedDeny()
	for _, p := range PrivateRanges() {
		out = append(out, subtractPrefix(p, opts.AllowPrivate)...)
	}
	return append(out, opts.DenyPrefixes...)
}

// subtractPrefix is p less every hole, as prefixes.
func subtractPrefix(p netip.Prefix, holes []netip.Prefix) []netip.Prefix {
	for _, h := range holes {
		h = h.Masked()
		if !h.Overlaps(p) {
			continue
		}
		if h.Bits() <= p.Bits() {
			return nil // the hole covers p
		}
		// The hole is inside p: split p in two and subtract from each half.
		lo := netip.PrefixFrom(p.Addr(), p.Bits()+1)
		hiAddr := p.Addr().AsSlice()
		bit := p.Bits()
		hiAddr[bit/8] |= 0x80 >> (bit % 8)
		hi, _ := netip.AddrFromSlice(hiAddr)
		return append(subtractPrefix(lo, holes), subtractPrefix(netip.PrefixFrom(hi, p.Bits()+1), holes)...)
	}
	return []netip.Prefix{p}
}

// DenySet is the always-deny set this policy was compiled with: what
// nothing in it can allow (the enforcer programs it into the kernel).
func (c *Compiled) DenySet() []netip.Prefix { return c.alwaysDeny }

// Decode reads a policy from JSON, rejecting unknown fields as the
// contract's additionalProperties: false does. Empty input, "null" and
// "{}" are the empty policy.
func Decode(raw []byte) (Policy, error) {
	var p Policy
	s := strings.TrimSpace(string(raw))
	if s == "" || s == "null" {
		return p, nil
	}
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return p, &Error{Rule: -1, Msg: "not a valid policy: " + err.Error()}
	}
	return p, nil
}

// Compile validates p and builds its matcher. An empty default action is
// deny.
func Compile(p Policy, opts Options) (*Compiled, error) {
	def := strings.ToLower(strings.TrimSpace(p.DefaultAction))
	switch def {
	case "", Deny:
		def = Deny
	case Allow:
	default:
		return nil, &Error{Rule: -1, Msg: fmt.Sprintf("defaultAction %q: want allow or deny", p.DefaultAction)}
	}
	if len(p.Egress) > MaxRules {
		return nil, &Error{Rule: -1, Msg: fmt.Sprintf("%d rules; at most %d are allowed", len(p.Egress), MaxRules)}
	}
	c := &Compiled{defAllow: def == Allow, exact: map[string]int{},
		alwaysDeny: denySet(opts)}
	norm := Policy{DefaultAction: def, Egress: make([]Rule, 0, len(p.Egress))}
	for i, r := range p.Egress {
		action := strings.ToLower(strings.TrimSpace(r.Action))
		if action != Allow && action != Deny {
			return nil, &Error{Rule: i, Msg: fmt.Sprintf("action %q: want allow or deny", r.Action)}
		}
		target := NormalizeTarget(r.Target)
		cr, err := compileTarget(target)
		if err != nil {
			return nil, &Error{Rule: i, Msg: err.Error()}
		}
		cr.allow = action == Allow
		if cr.kind == kindExact {
			if _, seen := c.exact[cr.domain]; !seen {
				c.exact[cr.domain] = i
			}
		}
		c.rules = append(c.rules, cr)
		norm.Egress = append(norm.Egress, Rule{Action: action, Target: target})
	}
	c.policy = norm
	return c, nil
}

// NormalizeTarget trims, lowercases and drops a trailing dot.
func NormalizeTarget(t string) string {
	return strings.TrimSuffix(strings.ToLower(strings.TrimSpace(t)), ".")
}

func compileTarget(t string) (compiledRule, error) {
	switch {
	case t == "":
		return compiledRule{}, fmt.Errorf("target is empty")
	case strings.Contains(t, "/"):
		p, err := netip.ParsePrefix(t)
		if err != nil {
			return compiledRule{}, fmt.Errorf("target %q is not a domain name, a wildcard (*.example.com), an IP address or a CIDR prefix", t)
		}
		return compiledRule{kind: kindPrefix, prefix: p.Masked()}, nil
	}
	if ip, err := netip.ParseAddr(t); err == nil {
		return compiledRule{kind: kindIP, prefix: netip.PrefixFrom(ip.Unmap(), ip.Unmap().BitLen())}, nil
	}
	if rest, ok := strings.CutPrefix(t, "*."); ok {
		if err := checkDomain(rest); err != nil {
			return compiledRule{}, fmt.Errorf("target %q: %v", t, err)
		}
		return compiledRule{kind: kindWildcard, domain: "." + rest}, nil
	}
	if err := checkDomain(t); err != nil {
		return compiledRule{}, fmt.Errorf("target %q: %v", t, err)
	}
	return compiledRule{kind: kindExact, domain: t}, nil
}

// checkDomain accepts DNS names: labels of letters, digits, hyphens and
// underscores, 1 to 63 bytes, 253 bytes in all.
func checkDomain(d string) error {
	if len(d) > 253 {
		return fmt.Errorf("the name is longer than 253 bytes")
	}
	for _, label := range strings.Split(d, ".") {
		if label == "" || len(label) > 63 {
			return fmt.Errorf("not a domain name, a wildcard (*.example.com), an IP address or a CIDR")
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return fmt.Errorf("not a domain name, a wildcard (*.example.com), an IP address or a CIDR")
			}
		}
	}
	return nil
}

// DefaultAllows reports whether what no rule matches is allowed.
func (c *Compiled) DefaultAllows() bool { return c.defAllow }

// Policy returns the normalised policy (actions and targets lowercased).
func (c *Compiled) Policy() Policy { return c.policy }

// Mode is the contract's summary: deny_all, allow_all or enforcing.
func (c *Compiled) Mode() string {
	switch {
	case len(c.rules) > 0:
		return "enforcing"
	case c.defAllow:
		return "allow_all"
	}
	return "deny_all"
}

// DecideName says whether a domain name may be resolved and reached.
// Names are matched after normalisation; an exact rule and a wildcard
// rule compete by position, and the first wins.
func (c *Compiled) DecideName(name string) Decision {
	name = NormalizeTarget(name)
	best := len(c.rules)
	if i, ok := c.exact[name]; ok {
		best = i
	}
	for i := 0; i < best; i++ {
		r := c.rules[i]
		if r.kind == kindWildcard && strings.HasSuffix(name, r.domain) && len(name) > len(r.domain) {
			best = i
			break
		}
	}
	if best < len(c.rules) {
		return decided(c.rules[best].allow, best, c.policy.Egress[best].Target)
	}
	return Decision{Allow: c.defAllow, Rule: ByDefault, Reason: "default " + c.policy.DefaultAction}
}

// DecideIP says whether an address may be reached directly. The
// always-deny set comes first; then IP and CIDR rules in order; then the
// default. (Addresses resolved for an allowed name are allowed by the
// enforcer, not here.)
func (c *Compiled) DecideIP(ip netip.Addr) Decision {
	ip = ip.Unmap()
	if reason, denied := c.AlwaysDenied(ip); denied {
		return Decision{Allow: false, Rule: ByAlwaysDeny, Reason: reason}
	}
	for i, r := range c.rules {
		if (r.kind == kindIP || r.kind == kindPrefix) && r.prefix.Contains(ip) {
			return decided(r.allow, i, c.policy.Egress[i].Target)
		}
	}
	return Decision{Allow: c.defAllow, Rule: ByDefault, Reason: "default " + c.policy.DefaultAction}
}

// AlwaysDenied reports whether ip is in the always-deny set.
func (c *Compiled) AlwaysDenied(ip netip.Addr) (string, bool) {
	ip = ip.Unmap()
	for _, p := range c.alwaysDeny {
		if p.Contains(ip) {
			return "always denied (" + p.String() + ")", true
		}
	}
	return "", false
}

func decided(allow bool, i int, target string) Decision {
	verb := "denied"
	if allow {
		verb = "allowed"
	}
	return Decision{Allow: allow, Rule: i, Reason: fmt.Sprintf("%s by rule %d (%s)", verb, i, target)}
}

// Merge applies a PATCH: the patch's rules come first (on duplicate
// targets within it, the first wins), rules of p with the same target are
// replaced, and the default action is kept.
func Merge(p Policy, patch []Rule) Policy {
	out := Policy{DefaultAction: p.DefaultAction}
	seen := map[string]bool{}
	for _, r := range patch {
		t := NormalizeTarget(r.Target)
		if seen[t] {
			continue
		}
		seen[t] = true
		out.Egress = append(out.Egress, Rule{Action: strings.ToLower(strings.TrimSpace(r.Action)), Target: t})
	}
	for _, r := range p.Egress {
		if t := NormalizeTarget(r.Target); !seen[t] {
			out.Egress = append(out.Egress, r)
		}
	}
	return out
}

// Remove deletes the rules whose targets are given and reports how many
// went.
func Remove(p Policy, targets []string) (Policy, int) {
	drop := map[string]bool{}
	for _, t := range targets {
		drop[NormalizeTarget(t)] = true
	}
	out := Policy{DefaultAction: p.DefaultAction}
	n := 0
	for _, r := range p.Egress {
		if drop[NormalizeTarget(r.Target)] {
			n++
			continue
		}
		out.Egress = append(out.Egress, r)
	}
	return out, n
}
