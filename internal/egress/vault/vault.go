// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

// Package vault is a sandbox's credential vault on the egress contract:
// named credentials whose values are write-only, and bindings that say
// which outbound requests (scheme, host, port, method, path) get which
// credential injected, and how (bearer, basic, an API-key header, custom
// headers). Every mutation bumps a revision; a stale expectedRevision is a
// conflict. Values never leave the vault but as injected headers.
package vault

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path"
	"slices"
	"strings"

	"github.com/corral-dev/corral/api"
)

// Errors, each mapped to the contract's status by the API.
var (
	ErrInvalid  = errors.New("invalid")   // 400
	ErrNotFound = errors.New("not found") // 404
	ErrConflict = errors.New("conflict")  // 409
)

func invalid(format string, a ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, a...)...)
}

// The wire types are the api package's.
type (
	Credential          = api.Credential
	Source              = api.CredentialSource
	Binding             = api.CredentialBinding
	Match               = api.CredentialMatch
	Auth                = api.CredentialAuth
	Header              = api.CredentialHeader
	CreateRequest       = api.CredentialVaultCreateRequest
	MutationRequest     = api.CredentialVaultMutationRequest
	CredentialMutations = api.CredentialMutations
	BindingMutations    = api.BindingMutations
	CredentialMetadata  = api.CredentialMetadata
	BindingMetadata     = api.BindingMetadata
	AuthMetadata        = api.CredentialAuthMetadata
	State               = api.CredentialVaultState
)

// Vault is the stored vault: values included. It is a value: mutations
// return a new Vault.
type Vault struct {
	Revision    int64           `json:"revision"`
	Credentials []storedCred    `json:"credentials"`
	Bindings    []storedBinding `json:"bindings"`
}

type storedCred struct {
	Credential
	Revision int64 `json:"revision"`
}

type storedBinding struct {
	Binding
	Revision int64 `json:"revision"`
}

// isToken reports whether s is an HTTP token (RFC 9110), as header names
// and methods must be.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

// Limits.
const (
	MaxCredentials = 256
	MaxBindings    = 256
	MaxValueBytes  = 64 << 10
)

// Decode reads a JSON body strictly (unknown fields are errors).
func Decode(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return invalid("%v", err)
	}
	if dec.More() {
		return invalid("trailing data after the JSON body")
	}
	return nil
}

// DecodeCreate reads a POST body: strict, with both lists required.
func DecodeCreate(b []byte) (CreateRequest, error) {
	var req CreateRequest
	if err := Decode(b, &req); err != nil {
		return req, err
	}
	var keys map[string]json.RawMessage
	_ = json.Unmarshal(b, &keys)
	for _, k := range []string{"credentials", "bindings"} {
		if v, ok := keys[k]; !ok || string(v) == "null" {
			return req, invalid("%s is required (it may be empty)", k)
		}
	}
	return req, nil
}

func checkCredential(c Credential) error {
	if c.Name == "" || len(c.Name) > 128 || strings.TrimSpace(c.Name) != c.Name {
		return invalid("credential name %q: 1 to 128 characters, no surrounding spaces", c.Name)
	}
	if c.Source.Type != "inline" {
		return invalid("credential %q: source.type must be \"inline\"", c.Name)
	}
	if c.Source.Value == "" || len(c.Source.Value) > MaxValueBytes || strings.ContainsAny(c.Source.Value, "\r\n\x00") {
		return invalid("credential %q: the value must be 1 byte to 64 KiB with no line breaks or NUL", c.Name)
	}
	return nil
}

// NormalizeHost lower-cases a match host and strips a trailing dot.
func NormalizeHost(h string) string {
	return strings.TrimSuffix(strings.ToLower(strings.TrimSpace(h)), ".")
}

func checkBinding(b Binding, creds map[string]bool) error {
	if b.Name == "" || len(b.Name) > 128 || strings.TrimSpace(b.Name) != b.Name {
		return invalid("binding name %q: 1 to 128 characters, no surrounding spaces", b.Name)
	}
	m := b.Match
	if len(m.Hosts) == 0 {
		return invalid("binding %q: match.hosts is required", b.Name)
	}
	for _, h := range m.Hosts {
		n := NormalizeHost(h)
		d := strings.TrimPrefix(n, "*.")
		if d == "" || strings.ContainsAny(d, "*/:@ ") || !strings.Contains(d, ".") && d != "localhost" {
			return invalid("binding %q: host %q: want a domain name or *.domain", b.Name, h)
		}
	}
	for _, s := range m.Schemes {
		if s != "https" && s != "http" {
			return invalid("binding %q: scheme %q: want https or http", b.Name, s)
		}
	}
	for _, p := range m.Ports {
		if p < 1 || p > 65535 {
			return invalid("binding %q: port %d: want 1 to 65535", b.Name, p)
		}
	}
	for _, meth := range m.Methods {
		if !isToken(meth) {
			return invalid("binding %q: method %q is not a token", b.Name, meth)
		}
	}
	for _, p := range m.Paths {
		if !strings.HasPrefix(p, "/") {
			return invalid("binding %q: path %q must start with /", b.Name, p)
		}
		if _, err := path.Match(p, "/"); err != nil {
			return invalid("binding %q: path %q: %v", b.Name, p, err)
		}
	}
	ref := func(name string) error {
		if name == "" {
			return invalid("binding %q: auth.credential is required", b.Name)
		}
		if !creds[name] {
			return invalid("binding %q: credential %q does not exist", b.Name, name)
		}
		return nil
	}
	switch a := b.Auth; a.Type {
	case "bearer", "basic":
		if a.Name != "" || len(a.Headers) > 0 {
			return invalid("binding %q: %s auth takes only credential", b.Name, a.Type)
		}
		return ref(a.Credential)
	case "apiKey":
		if !isToken(a.Name) {
			return invalid("binding %q: apiKey header name %q is not a token", b.Name, a.Name)
		}
		if len(a.Headers) > 0 {
			return invalid("binding %q: apiKey auth takes name and credential", b.Name)
		}
		return ref(a.Credential)
	case "customHeaders":
		if len(a.Headers) == 0 || a.Credential != "" || a.Name != "" {
			return invalid("binding %q: customHeaders auth takes a non-empty headers list", b.Name)
		}
		for _, h := range a.Headers {
			if !isToken(h.Name) {
				return invalid("binding %q: header name %q is not a token", b.Name, h.Name)
			}
			if err := ref(h.Credential); err != nil {
				return err
			}
		}
		return nil
	default:
		return invalid("binding %q: auth.type %q: want bearer, basic, apiKey or customHeaders", b.Name, a.Type)
	}
}

// check validates the whole vault: names unique, references resolved.
func (v Vault) check() error {
	if len(v.Credentials) > MaxCredentials || len(v.Bindings) > MaxBindings {
		return invalid("at most %d credentials and %d bindings", MaxCredentials, MaxBindings)
	}
	creds := map[string]bool{}
	for _, c := range v.Credentials {
		if err := checkCredential(c.Credential); err != nil {
			return err
		}
		if creds[c.Name] {
			return invalid("credential %q appears twice", c.Name)
		}
		creds[c.Name] = true
	}
	seen := map[string]bool{}
	for _, b := range v.Bindings {
		if err := checkBinding(b.Binding, creds); err != nil {
			return err
		}
		if seen[b.Name] {
			return invalid("binding %q appears twice", b.Name)
		}
		seen[b.Name] = true
	}
	return nil
}

// Create makes revision 1 of a vault.
func Create(req CreateRequest) (Vault, error) {
	v := Vault{Revision: 1}
	for _, c := range req.Credentials {
		v.Credentials = append(v.Credentials, storedCred{Credential: c, Revision: 1})
	}
	for _, b := range req.Bindings {
		v.Bindings = append(v.Bindings, storedBinding{Binding: normalize(b), Revision: 1})
	}
	if err := v.check(); err != nil {
		return Vault{}, err
	}
	return v, nil
}

func normalize(b Binding) Binding {
	hosts := make([]string, len(b.Match.Hosts))
	for i, h := range b.Match.Hosts {
		hosts[i] = NormalizeHost(h)
	}
	b.Match.Hosts = hosts
	return b
}

// Mutate applies a PATCH: deletes, then replaces, then adds, all or
// nothing, at a new revision.
func (v Vault) Mutate(req MutationRequest) (Vault, error) {
	if req.ExpectedRevision != nil && *req.ExpectedRevision != v.Revision {
		return Vault{}, fmt.Errorf("%w: expectedRevision %d, the vault is at %d", ErrConflict, *req.ExpectedRevision, v.Revision)
	}
	if req.Credentials == nil && req.Bindings == nil {
		return Vault{}, invalid("nothing to change: give credentials and/or bindings")
	}
	rev := v.Revision + 1
	next := Vault{Revision: rev, Credentials: v.Credentials, Bindings: v.Bindings}
	var err error
	if m := req.Credentials; m != nil {
		next.Credentials, err = mutate(v.Credentials, "credential", func(c storedCred) string { return c.Name },
			func(c Credential) storedCred { return storedCred{Credential: c, Revision: rev} },
			func(c Credential) string { return c.Name }, m.Delete, m.Replace, m.Add)
		if err != nil {
			return Vault{}, err
		}
	}
	if m := req.Bindings; m != nil {
		next.Bindings, err = mutate(v.Bindings, "binding", func(b storedBinding) string { return b.Name },
			func(b Binding) storedBinding { return storedBinding{Binding: normalize(b), Revision: rev} },
			func(b Binding) string { return b.Name }, m.Delete, m.Replace, m.Add)
		if err != nil {
			return Vault{}, err
		}
	}
	if err := next.check(); err != nil {
		return Vault{}, err
	}
	return next, nil
}

// mutate applies deletes, then replaces, then adds to a copy of list:
// what is deleted or replaced must exist, what is added must not.
func mutate[S, W any](list []S, kind string, nameOf func(S) string, store func(W) S, wireName func(W) string,
	del []string, repl, add []W) ([]S, error) {
	out := slices.Clone(list)
	find := func(name string) int { return slices.IndexFunc(out, func(x S) bool { return nameOf(x) == name }) }
	for _, name := range del {
		i := find(name)
		if i < 0 {
			return nil, fmt.Errorf("%w: %s %q", ErrNotFound, kind, name)
		}
		out = slices.Delete(out, i, i+1)
	}
	for _, w := range repl {
		i := find(wireName(w))
		if i < 0 {
			return nil, fmt.Errorf("%w: %s %q", ErrNotFound, kind, wireName(w))
		}
		out[i] = store(w)
	}
	for _, w := range add {
		if find(wireName(w)) >= 0 {
			return nil, fmt.Errorf("%w: %s %q exists; replace it instead", ErrConflict, kind, wireName(w))
		}
		out = append(out, store(w))
	}
	return out, nil
}

// State is the sanitized view: no values, no credential references.
func (v Vault) State() State {
	st := State{Revision: v.Revision, Credentials: v.CredentialList(), Bindings: v.BindingList()}
	return st
}

// CredentialList is the sanitized credentials.
func (v Vault) CredentialList() []CredentialMetadata {
	out := make([]CredentialMetadata, 0, len(v.Credentials))
	for _, c := range v.Credentials {
		out = append(out, CredentialMetadata{Name: c.Name, SourceType: c.Source.Type, Revision: c.Revision})
	}
	return out
}

// BindingList is the sanitized bindings.
func (v Vault) BindingList() []BindingMetadata {
	out := make([]BindingMetadata, 0, len(v.Bindings))
	for _, b := range v.Bindings {
		m := withDefaults(b.Match)
		out = append(out, BindingMetadata{Name: b.Name, Revision: b.Revision, Match: &m,
			Auth: &AuthMetadata{Type: b.Auth.Type, Name: b.Auth.Name}})
	}
	return out
}

func withDefaults(m Match) Match {
	if len(m.Schemes) == 0 {
		m.Schemes = []string{"https"}
	}
	if len(m.Ports) == 0 {
		m.Ports = []int{443}
	}
	if len(m.Methods) == 0 {
		m.Methods = []string{"GET", "POST", "PUT", "PATCH", "DELETE"}
	}
	if len(m.Paths) == 0 {
		m.Paths = []string{"/*"}
	}
	return m
}

// Hosts are every binding's hosts (exact names and *.wildcards).
func (v Vault) Hosts() []string {
	var out []string
	for _, b := range v.Bindings {
		for _, h := range b.Match.Hosts {
			if !slices.Contains(out, h) {
				out = append(out, h)
			}
		}
	}
	return out
}

// Ports are every binding's ports (defaults applied).
func (v Vault) Ports() []int {
	var out []int
	for _, b := range v.Bindings {
		for _, p := range withDefaults(b.Match).Ports {
			if !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
	}
	slices.Sort(out)
	return out
}

// HostMatches reports whether a binding host (exact or *.suffix)
// matches name.
func HostMatches(pattern, name string) bool {
	name = NormalizeHost(name)
	if suffix, ok := strings.CutPrefix(pattern, "*."); ok {
		return strings.HasSuffix(name, "."+suffix)
	}
	return pattern == name
}

// Request is what a request is matched on.
type Request struct {
	Scheme string
	Host   string
	Port   int
	Method string
	Path   string
}

// Injection is what Match decided for a request.
type Injection struct {
	// Binding is the matching binding's name ("" when none or several).
	Binding string
	// Ambiguous lists the bindings when more than one matched; nothing
	// is injected then.
	Ambiguous []string
	// Headers are set on the request (they replace what it carried).
	Headers http.Header
}

// Match finds the binding for a request: exactly one must match for a
// credential to be injected.
func (v Vault) Match(r Request) Injection {
	var matched []storedBinding
	for _, b := range v.Bindings {
		m := withDefaults(b.Match)
		if !slices.Contains(m.Schemes, r.Scheme) || !slices.Contains(m.Ports, r.Port) ||
			!slices.ContainsFunc(m.Methods, func(x string) bool { return strings.EqualFold(x, r.Method) }) ||
			!slices.ContainsFunc(m.Hosts, func(h string) bool { return HostMatches(h, r.Host) }) ||
			!slices.ContainsFunc(m.Paths, func(p string) bool { return pathMatches(p, r.Path) }) {
			continue
		}
		matched = append(matched, b)
	}
	if len(matched) != 1 {
		var names []string
		for _, b := range matched {
			names = append(names, b.Name)
		}
		if len(names) > 1 {
			return Injection{Ambiguous: names}
		}
		return Injection{}
	}
	b := matched[0]
	value := func(name string) string {
		for _, c := range v.Credentials {
			if c.Name == name {
				return c.Source.Value
			}
		}
		return ""
	}
	h := http.Header{}
	switch b.Auth.Type {
	case "bearer":
		h.Set("Authorization", "Bearer "+value(b.Auth.Credential))
	case "basic":
		h.Set("Authorization", "Basic "+value(b.Auth.Credential))
	case "apiKey":
		h.Set(b.Auth.Name, value(b.Auth.Credential))
	case "customHeaders":
		for _, x := range b.Auth.Headers {
			h.Set(x.Name, value(x.Credential))
		}
	}
	return Injection{Binding: b.Name, Headers: h}
}

// pathMatches matches a path pattern: "/*" and a trailing "/*" match any
// depth below; otherwise path.Match semantics.
func pathMatches(pattern, p string) bool {
	if prefix, ok := strings.CutSuffix(pattern, "/*"); ok {
		return p == prefix || strings.HasPrefix(p, prefix+"/")
	}
	ok, _ := path.Match(pattern, p)
	return ok
}

// Secrets are every credential value (to check nothing leaks them).
func (v Vault) Secrets() []string {
	var out []string
	for _, c := range v.Credentials {
		out = append(out, c.Source.Value)
	}
	return out
}
