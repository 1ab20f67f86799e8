// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package mcp

import (
	"bytes"
	"fmt"
	"net/netip"
	"os"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/internal/sandbox"
)

// Policy is what a session may do, enforced by the tool layer whatever the
// model asks: the tools offered, the limits of each call, the session's
// budget and the one shape of sandbox it may create. The zero value is not
// usable; start from DefaultPolicy or LoadPolicy.
type Policy struct {
	// Tools are the tools offered; a tool not listed does not exist for the
	// session (it is neither listed nor callable).
	Tools []string `toml:"tools"`
	// ToolPrefix, when set, names every tool PREFIX_name (as the
	// OpenSandbox MCP server's register_tools(prefix=...) does).
	ToolPrefix string `toml:"tool_prefix"`
	Limits     Limits `toml:"limits"`
	Budget     Budget `toml:"budget"`
	// Template is the sandbox the session may create.
	Template Template `toml:"template"`
	// ForeignSandboxes lets the session use sandboxes it did not create
	// (any sandbox its API key can see). Off by default.
	ForeignSandboxes bool `toml:"foreign_sandboxes"`
	// KeepSandboxes keeps the sandboxes a session created when it ends;
	// by default they are deleted (their TTL is the backstop).
	KeepSandboxes bool `toml:"keep_sandboxes"`
}

// Limits bound each tool call.
type Limits struct {
	// CallTimeout bounds any tool call's wall time.
	CallTimeout Duration `toml:"call_timeout"`
	// CommandTimeout is a command's or code run's timeout when the call
	// gives none, and the most a call may ask for.
	CommandTimeout Duration `toml:"command_timeout"`
	// OutputBytes is how much of each output stream a result keeps (half
	// from its head, half from its tail).
	OutputBytes int `toml:"output_bytes"`
	// FileBytes is the most a read returns and a write accepts.
	FileBytes int `toml:"file_bytes"`
	// ContextBytes is the most of one tool result `corral agent` puts in
	// the model's context (its longest fields are cut, with counts);
	// unused by mcp, whose client decides.
	ContextBytes int `toml:"context_bytes"`
}

// Budget bounds a session. Zero means the default, not unlimited.
type Budget struct {
	ToolCalls int      `toml:"tool_calls"`
	WallTime  Duration `toml:"wall_time"`
	Sandboxes int      `toml:"sandboxes"`
	// Snapshots bounds the snapshots a session takes (sandbox_snapshot);
	// they are deleted when the session ends, with its sandboxes.
	Snapshots int `toml:"snapshots"`
	// Turns bounds the model requests of `corral agent` (unused by mcp).
	Turns int `toml:"turns"`
	// Tokens bounds the tokens `corral agent`'s model reports using,
	// prompt and completion together, over the run (unused by mcp).
	Tokens int `toml:"tokens"`
}

// Template is the sandbox a session may create.
type Template struct {
	// Image is the image used when the call names none.
	Image string `toml:"image"`
	// Images are the images a call may name; empty means only Image (or
	// any image when Image is empty too).
	Images []string `toml:"images"`
	// MaxTimeout is the longest time to live a call may ask for.
	MaxTimeout Duration `toml:"max_timeout"`
	// Resources are the sandbox's resourceLimits; a call may ask for no
	// more than these.
	Resources map[string]string `toml:"resources"`
	// Egress is the widest network the sandbox may have: a call may ask
	// for these targets or fewer, never others. Empty: no network at all.
	Egress []string `toml:"egress"`
	// Env is set in every sandbox; a call's env cannot override it.
	Env map[string]string `toml:"env"`
	// Workdir confines file paths and command directories; "/" turns the
	// confinement off. Created in each new sandbox.
	Workdir string `toml:"workdir"`
	// Isolation is the isolation tier of every sandbox (runc or runsc,
	// extensions["corral.dev/isolation"]); empty: the server's default.
	// Calls cannot choose it.
	Isolation string `toml:"isolation"`
}

// Duration is a time.Duration written "90s" in a policy file.
type Duration struct{ time.Duration }

// UnmarshalText reads a Go duration.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return err
	}
	if v <= 0 {
		return fmt.Errorf("%q: want a positive duration", b)
	}
	d.Duration = v
	return nil
}

// MarshalText writes a Go duration.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// Defaults of a policy that says nothing.
const (
	DefaultCallTimeout    = 5 * time.Minute
	DefaultCommandTimeout = 60 * time.Second
	DefaultOutputBytes    = 16 << 10
	DefaultFileBytes      = 1 << 20
	DefaultToolCalls      = 200
	DefaultWallTime       = time.Hour
	DefaultSandboxes      = 2
	DefaultSnapshots      = 4
	DefaultTurns          = 40
	DefaultTokens         = 1000000
	DefaultContextBytes   = 64 << 10
	DefaultMaxTimeout     = time.Hour
	DefaultWorkdir        = "/workspace"
	maxOutputBytes        = 4 << 20
	maxFileBytes          = 32 << 20
)

// DefaultPolicy offers every tool, on sandboxes with no network, 1 CPU and
// 2 GiB, that live at most an hour.
func DefaultPolicy() Policy {
	p := Policy{}
	p.fill()
	return p
}

// LoadPolicy reads a TOML policy file; what it leaves out takes the
// defaults, and a key it does not know is an error.
func LoadPolicy(file string) (Policy, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return Policy{}, err
	}
	return ParsePolicy(b, file)
}

// ParsePolicy reads a TOML policy; name is for error messages.
func ParsePolicy(b []byte, name string) (Policy, error) {
	var p Policy
	md, err := toml.NewDecoder(bytes.NewReader(b)).Decode(&p)
	if err != nil {
		return Policy{}, fmt.Errorf("policy %s: %w", name, err)
	}
	if un := md.Undecoded(); len(un) > 0 {
		return Policy{}, fmt.Errorf("policy %s: unknown key %q", name, un[0].String())
	}
	p.fill()
	if err := p.check(); err != nil {
		return Policy{}, fmt.Errorf("policy %s: %w", name, err)
	}
	return p, nil
}

func (p *Policy) fill() {
	if p.Tools == nil {
		p.Tools = ToolNames()
	}
	setDur := func(d *Duration, v time.Duration) {
		if d.Duration == 0 {
			d.Duration = v
		}
	}
	setInt := func(i *int, v int) {
		if *i == 0 {
			*i = v
		}
	}
	setDur(&p.Limits.CallTimeout, DefaultCallTimeout)
	setDur(&p.Limits.CommandTimeout, DefaultCommandTimeout)
	setInt(&p.Limits.OutputBytes, DefaultOutputBytes)
	setInt(&p.Limits.FileBytes, DefaultFileBytes)
	setInt(&p.Budget.ToolCalls, DefaultToolCalls)
	setDur(&p.Budget.WallTime, DefaultWallTime)
	setInt(&p.Budget.Sandboxes, DefaultSandboxes)
	setInt(&p.Budget.Snapshots, DefaultSnapshots)
	setInt(&p.Budget.Turns, DefaultTurns)
	setInt(&p.Budget.Tokens, DefaultTokens)
	setInt(&p.Limits.ContextBytes, DefaultContextBytes)
	setDur(&p.Template.MaxTimeout, DefaultMaxTimeout)
	if p.Template.Resources == nil {
		p.Template.Resources = map[string]string{"cpu": "1", "memory": "2Gi"}
	}
	if p.Template.Workdir == "" {
		p.Template.Workdir = DefaultWorkdir
	}
}

func (p *Policy) check() error {
	known := ToolNames()
	for _, t := range p.Tools {
		if !slices.Contains(known, t) {
			return fmt.Errorf("tools: unknown tool %q (known: %s)", t, strings.Join(known, ", "))
		}
	}
	if p.ToolPrefix != "" && !validToolName(p.ToolPrefix) {
		return fmt.Errorf("tool_prefix %q: use letters, digits, '_' and '-'", p.ToolPrefix)
	}
	if p.Limits.OutputBytes < 0 || p.Limits.OutputBytes > maxOutputBytes {
		return fmt.Errorf("limits.output_bytes: want 1..%d", maxOutputBytes)
	}
	if p.Limits.FileBytes < 0 || p.Limits.FileBytes > maxFileBytes {
		return fmt.Errorf("limits.file_bytes: want 1..%d", maxFileBytes)
	}
	if p.Limits.CommandTimeout.Duration > p.Limits.CallTimeout.Duration {
		return fmt.Errorf("limits.command_timeout (%v) is longer than limits.call_timeout (%v)", p.Limits.CommandTimeout, p.Limits.CallTimeout)
	}
	if p.Limits.ContextBytes < 1024 || p.Limits.ContextBytes > maxOutputBytes {
		return fmt.Errorf("limits.context_bytes: want 1024..%d", maxOutputBytes)
	}
	if p.Budget.ToolCalls < 0 || p.Budget.Sandboxes < 0 || p.Budget.Snapshots < 0 || p.Budget.Turns < 0 || p.Budget.Tokens < 0 {
		return fmt.Errorf("budget: counts must be positive")
	}
	if _, err := sandbox.ParseResources(p.Template.Resources); err != nil {
		return fmt.Errorf("template.resources: %w", err)
	}
	if !path.IsAbs(p.Template.Workdir) || path.Clean(p.Template.Workdir) != p.Template.Workdir {
		return fmt.Errorf("template.workdir %q: want a clean absolute path", p.Template.Workdir)
	}
	for _, t := range p.Template.Egress {
		if _, err := parseTarget(t); err != nil {
			return fmt.Errorf("template.egress: %w", err)
		}
	}
	for k := range p.Template.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return fmt.Errorf("template.env: bad name %q", k)
		}
	}
	switch p.Template.Isolation {
	case "", api.IsolationRunc, api.IsolationRunsc:
	default:
		return fmt.Errorf("template.isolation %q: want %s or %s", p.Template.Isolation, api.IsolationRunc, api.IsolationRunsc)
	}
	return nil
}

// Offers reports whether the policy offers a tool.
func (p *Policy) Offers(tool string) bool { return slices.Contains(p.Tools, tool) }

// images are the images a call may name ("" = any).
func (p *Policy) allowedImage(img string) (string, error) {
	t := p.Template
	if img == "" {
		if t.Image == "" {
			return "", badArgs("image is required (the policy names no default image)")
		}
		return t.Image, nil
	}
	allowed := t.Images
	if len(allowed) == 0 && t.Image != "" {
		allowed = []string{t.Image}
	}
	if len(allowed) > 0 && !slices.Contains(allowed, img) {
		return "", badArgs("image %q is not allowed by the policy (allowed: %s)", img, strings.Join(allowed, ", "))
	}
	return img, nil
}

// timeout checks a requested time to live.
func (p *Policy) timeout(secs *int64) (int64, error) {
	limit := int64(p.Template.MaxTimeout.Seconds())
	if secs == nil {
		return min(600, limit), nil
	}
	if *secs < 60 {
		return 0, badArgs("timeout_seconds %d: at least 60", *secs)
	}
	if *secs > limit {
		return 0, badArgs("timeout_seconds %d exceeds the policy's limit of %d", *secs, limit)
	}
	return *secs, nil
}

// resources checks requested resource limits against the template's; the
// template's are used where the call says nothing.
func (p *Policy) resources(req map[string]string) (map[string]string, error) {
	out := map[string]string{}
	for k, v := range p.Template.Resources {
		out[k] = v
	}
	if len(req) == 0 {
		return out, nil
	}
	want, err := sandbox.ParseResources(req)
	if err != nil {
		return nil, badArgs("resource: %s", errMessage(err))
	}
	limit, _ := sandbox.ParseResources(p.Template.Resources)
	over := func(name string, w, l int64) error {
		if w > 0 && l > 0 && w > l {
			return badArgs("resource %s=%s is more than the policy allows (%s)", name, req[name], p.Template.Resources[name])
		}
		if w > 0 && l == 0 {
			return badArgs("resource %s is set by the server, not by a call", name)
		}
		return nil
	}
	for _, c := range []struct {
		name string
		w, l int64
	}{{"cpu", want.CPUMillis, limit.CPUMillis}, {"memory", want.MemoryBytes, limit.MemoryBytes}, {"pids", want.Pids, limit.Pids}, {"disk", want.DiskBytes, limit.DiskBytes}} {
		if err := over(c.name, c.w, c.l); err != nil {
			return nil, err
		}
	}
	for k, v := range req {
		out[strings.ToLower(k)] = v
	}
	return out, nil
}

// network turns a requested network policy into the sandbox's: deny by
// default, and only targets within the template's egress list. No request
// means the whole template list; an empty template means no network. The
// policy is always explicit, a deny-all one included: a create without one
// would get the server's default (--network-default-policy), which an
// operator may have set to allow.
func (p *Policy) network(req *api.NetworkPolicy) (*api.NetworkPolicy, error) {
	allowed := make([]target, 0, len(p.Template.Egress))
	for _, t := range p.Template.Egress {
		tt, _ := parseTarget(t)
		allowed = append(allowed, tt)
	}
	if req == nil {
		np := &api.NetworkPolicy{DefaultAction: "deny"}
		for _, t := range p.Template.Egress {
			np.Egress = append(np.Egress, api.NetworkRule{Action: "allow", Target: t})
		}
		return np, nil
	}
	if req.DefaultAction != "" && req.DefaultAction != "deny" {
		return nil, badArgs("network_policy.defaultAction %q: the policy allows only \"deny\"", req.DefaultAction)
	}
	np := &api.NetworkPolicy{DefaultAction: "deny"}
	for _, r := range req.Egress {
		switch r.Action {
		case "deny":
		case "allow":
			t, err := parseTarget(r.Target)
			if err != nil {
				return nil, badArgs("network_policy: %v", err)
			}
			if !slices.ContainsFunc(allowed, func(a target) bool { return a.covers(t) }) {
				if len(allowed) == 0 {
					return nil, badArgs("network_policy: %q is not allowed: the policy gives sandboxes no network", r.Target)
				}
				return nil, badArgs("network_policy: %q is not allowed by the policy (allowed: %s)", r.Target, strings.Join(p.Template.Egress, ", "))
			}
		default:
			return nil, badArgs("network_policy: rule action %q: want allow or deny", r.Action)
		}
		np.Egress = append(np.Egress, r)
	}
	if !slices.ContainsFunc(np.Egress, func(r api.NetworkRule) bool { return r.Action == "allow" }) {
		return &api.NetworkPolicy{DefaultAction: "deny"}, nil // nothing allowed: no network at all
	}
	return np, nil
}

// allows reports whether a network policy allows any target.
func allows(np *api.NetworkPolicy) bool {
	return np != nil && slices.ContainsFunc(np.Egress, func(r api.NetworkRule) bool { return r.Action == "allow" })
}

// target is an egress target: a domain (with an optional leading "*.")
// or an address prefix.
type target struct {
	domain   string
	wildcard bool
	prefix   netip.Prefix
}

func parseTarget(s string) (target, error) {
	s = strings.TrimSuffix(strings.ToLower(strings.TrimSpace(s)), ".")
	if s == "" {
		return target{}, fmt.Errorf("empty target")
	}
	if p, err := netip.ParsePrefix(s); err == nil {
		return target{prefix: p.Masked()}, nil
	}
	if a, err := netip.ParseAddr(s); err == nil {
		return target{prefix: netip.PrefixFrom(a, a.BitLen())}, nil
	}
	t := target{domain: s}
	if rest, ok := strings.CutPrefix(s, "*."); ok {
		t.domain, t.wildcard = rest, true
	}
	if t.domain == "" || strings.ContainsAny(t.domain, "*/ :@") {
		return target{}, fmt.Errorf("target %q: want a domain, *.domain, an address or a CIDR", s)
	}
	return t, nil
}

// covers reports whether allowing a allows everything t allows.
func (a target) covers(t target) bool {
	if a.prefix.IsValid() || t.prefix.IsValid() {
		return a.prefix.IsValid() && t.prefix.IsValid() && a.prefix.Bits() <= t.prefix.Bits() && a.prefix.Contains(t.prefix.Addr())
	}
	if !a.wildcard {
		return !t.wildcard && a.domain == t.domain
	}
	return strings.HasSuffix(t.domain, "."+a.domain) || (t.wildcard && t.domain == a.domain)
}

// confine resolves a path of a call against the work directory and refuses
// one outside it.
func (p *Policy) confine(arg, name string) (string, error) {
	if strings.ContainsRune(arg, 0) {
		return "", badArgs("%s: a path cannot contain NUL", name)
	}
	wd := p.Template.Workdir
	if arg == "" {
		return wd, nil
	}
	full := arg
	if !path.IsAbs(full) {
		full = path.Join(wd, full)
	}
	full = path.Clean(full)
	if wd != "/" && full != wd && !strings.HasPrefix(full, wd+"/") {
		return "", badArgs("%s %q is outside the work directory %s", name, arg, wd)
	}
	return full, nil
}

// env merges a call's environment under the template's.
func (p *Policy) env(req map[string]string) map[string]*string {
	if len(req) == 0 && len(p.Template.Env) == 0 {
		return nil
	}
	out := map[string]*string{}
	for k, v := range req {
		out[k] = &v
	}
	for k, v := range p.Template.Env {
		out[k] = &v
	}
	return out
}
