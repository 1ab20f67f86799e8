// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

// Package e2b holds E2B's control-plane wire contract as corral answers
// it: the request and response bodies, the error shape, sandbox ids of
// E2B's form, the per-sandbox tokens, the list filter's encoding, the
// signed file URLs and the {port}-{id}.{domain} host names. The server's
// handlers (internal/server) do the work; envd's protocol inside the
// sandbox is internal/execd/envd, generated from internal/e2b/envd.
package e2b

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Ports E2B's clients address in a sandbox.
const (
	EnvdPort        = 49983
	CodeInterpreter = 49999
)

// EnvdVersion is the envd version corral reports: the SDK turns features
// on by it, and corral serves all of them.
const EnvdVersion = "0.6.13"

// ClientID is the (deprecated, still required) clientID of a sandbox.
const ClientID = "corral"

// Headers of E2B's clients.
const (
	HeaderAPIKey       = "X-API-KEY"
	HeaderSandboxID    = "E2b-Sandbox-Id"
	HeaderSandboxPort  = "E2b-Sandbox-Port"
	HeaderAccessToken  = "X-Access-Token"
	HeaderTrafficToken = "E2B-Traffic-Access-Token"
	HeaderNextToken    = "X-Next-Token"
)

// Error is E2B's error body; the SDK branches on Code, which equals the
// HTTP status.
type Error struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// ProxyError is what E2B's edge answers for a sandbox it cannot reach
// (502): the SDK turns it into a TimeoutError.
type ProxyError struct {
	SandboxID string `json:"sandboxId"`
	Message   string `json:"message"`
	Code      int    `json:"code"`
}

// Network is a sandbox's network configuration.
type Network struct {
	AllowOut           []string        `json:"allowOut,omitempty"`
	DenyOut            []string        `json:"denyOut,omitempty"`
	Rules              json.RawMessage `json:"rules,omitempty"`
	EgressProxy        json.RawMessage `json:"egressProxy,omitempty"`
	AllowPublicTraffic *bool           `json:"allowPublicTraffic,omitempty"`
	MaskRequestHost    *string         `json:"maskRequestHost,omitempty"`
	HTTPSPorts         []int           `json:"httpsPorts,omitempty"`
}

// AutoResume is a create's autoResume.
type AutoResume struct {
	Enabled bool `json:"enabled"`
}

// VolumeMount mounts a named volume.
type VolumeMount struct {
	Name string `json:"name"`
	Path string `json:"path"`
}

// NewSandbox is the body of POST /sandboxes (v1) and /v2/sandboxes.
type NewSandbox struct {
	TemplateID          string            `json:"templateID"`
	Alias               string            `json:"alias,omitempty"`
	Timeout             *int64            `json:"timeout,omitempty"`
	Metadata            map[string]string `json:"metadata,omitempty"`
	EnvVars             map[string]string `json:"envVars,omitempty"`
	AllowInternetAccess *bool             `json:"allow_internet_access,omitempty"`
	Network             *Network          `json:"network,omitempty"`
	AutoPause           *bool             `json:"autoPause,omitempty"`
	AutoPauseMemory     *bool             `json:"autoPauseMemory,omitempty"`
	AutoResume          *AutoResume       `json:"autoResume,omitempty"`
	Secure              *bool             `json:"secure,omitempty"`
	MCP                 json.RawMessage   `json:"mcp,omitempty"`
	IAM                 json.RawMessage   `json:"iam,omitempty"`
	VolumeMounts        []VolumeMount     `json:"volumeMounts,omitempty"`
}

// Sandbox is what create and connect answer.
type Sandbox struct {
	SandboxID          string  `json:"sandboxID"`
	TemplateID         string  `json:"templateID"`
	Alias              string  `json:"alias,omitempty"`
	ClientID           string  `json:"clientID"`
	EnvdVersion        string  `json:"envdVersion"`
	EnvdAccessToken    string  `json:"envdAccessToken,omitempty"`
	TrafficAccessToken *string `json:"trafficAccessToken"`
	Domain             *string `json:"domain"`
}

// Lifecycle is what happens to a sandbox at its timeout.
type Lifecycle struct {
	OnTimeout  string `json:"onTimeout"`
	AutoResume bool   `json:"autoResume"`
}

// SandboxDetail is GET /sandboxes/{id}'s answer; ListedSandbox is a list
// item (the same without network, lifecycle and token).
type SandboxDetail struct {
	SandboxID           string            `json:"sandboxID"`
	TemplateID          string            `json:"templateID"`
	Alias               string            `json:"alias,omitempty"`
	ClientID            string            `json:"clientID"`
	StartedAt           time.Time         `json:"startedAt"`
	EndAt               time.Time         `json:"endAt"`
	CPUCount            int               `json:"cpuCount"`
	MemoryMB            int               `json:"memoryMB"`
	DiskSizeMB          int               `json:"diskSizeMB"`
	State               string            `json:"state"`
	Metadata            map[string]string `json:"metadata,omitempty"`
	EnvdVersion         string            `json:"envdVersion"`
	EnvdAccessToken     string            `json:"envdAccessToken,omitempty"`
	AllowInternetAccess *bool             `json:"allowInternetAccess,omitempty"`
	Network             *Network          `json:"network,omitempty"`
	Lifecycle           *Lifecycle        `json:"lifecycle,omitempty"`
	VolumeMounts        []VolumeMount     `json:"volumeMounts,omitempty"`
	Domain              *string           `json:"domain,omitempty"`
}

// SandboxMetric is one sample of a sandbox's use.
type SandboxMetric struct {
	Timestamp     time.Time `json:"timestamp"`
	TimestampUnix int64     `json:"timestampUnix"`
	CPUCount      int       `json:"cpuCount"`
	CPUUsedPct    float64   `json:"cpuUsedPct"`
	MemUsed       int64     `json:"memUsed"`
	MemTotal      int64     `json:"memTotal"`
	MemCache      int64     `json:"memCache"`
	DiskUsed      int64     `json:"diskUsed"`
	DiskTotal     int64     `json:"diskTotal"`
}

// SnapshotInfo is a snapshot as E2B describes one.
type SnapshotInfo struct {
	SnapshotID string   `json:"snapshotID"`
	Names      []string `json:"names"`
}

// ForkResult is one sandbox of a fork's answer.
type ForkResult struct {
	Sandbox *Sandbox `json:"sandbox,omitempty"`
	Error   *Error   `json:"error,omitempty"`
}

// FromCorralID gives the E2B form of a corral sandbox id: a UUID without
// its hyphens (E2B ids are [a-z0-9]+, as {port}-{id} host names need).
// ok is false for an id of another form.
func FromCorralID(id string) (string, bool) {
	if len(id) != 36 || id[8] != '-' || id[13] != '-' || id[18] != '-' || id[23] != '-' {
		return "", false
	}
	out := strings.ReplaceAll(id, "-", "")
	if !isLowerHex(out) {
		return "", false
	}
	return out, true
}

// ToCorralID reverses FromCorralID; ok is false for anything that is not
// 32 lower-case hexadecimal digits.
func ToCorralID(id string) (string, bool) {
	if len(id) != 32 || !isLowerHex(id) {
		return "", false
	}
	return id[:8] + "-" + id[8:12] + "-" + id[12:16] + "-" + id[16:20] + "-" + id[20:], true
}

func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// token derives a per-sandbox token from a secret only the server holds
// (the sandbox's execd token, which no process in the sandbox has), so
// every replica computes the same one and it dies with the sandbox.
func token(secret, corralID, purpose string) string {
	m := hmac.New(sha256.New, []byte(secret))
	fmt.Fprintf(m, "corral e2b %s %s", purpose, corralID)
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// AccessToken is a sandbox's envdAccessToken (X-Access-Token).
func AccessToken(secret, corralID string) string { return "ea_" + token(secret, corralID, "envd") }

// TrafficToken is a sandbox's trafficAccessToken, for its other ports.
func TrafficToken(secret, corralID string) string {
	return "et_" + token(secret, corralID, "traffic")
}

// Equal compares two tokens in constant time; an empty one matches nothing.
func Equal(got, want string) bool {
	return got != "" && want != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// FileSignature is the signature of a /files URL: v1_ and the unpadded
// base64 of SHA-256 over path:operation:user:token[:expiry]. user is ""
// for the default user; expiry 0 means none.
func FileSignature(path, operation, user, accessToken string, expiry int64) string {
	s := path + ":" + operation + ":" + user + ":" + accessToken
	if expiry != 0 {
		s += ":" + strconv.FormatInt(expiry, 10)
	}
	sum := sha256.Sum256([]byte(s))
	return "v1_" + base64.RawStdEncoding.EncodeToString(sum[:])
}

// CheckFileSignature checks a /files request's signature query against
// the sandbox's access token: GET reads, POST writes.
func CheckFileSignature(method string, q url.Values, accessToken string, now time.Time) error {
	sig := q.Get("signature")
	if sig == "" {
		return errors.New("a signature is required")
	}
	if accessToken == "" {
		return errors.New("the sandbox has no access token to check a signature with")
	}
	op := "read"
	if method == "POST" {
		op = "write"
	}
	var exp int64
	if v := q.Get("signature_expiration"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			return errors.New("signature_expiration must be a unix time in seconds")
		}
		if now.Unix() > n {
			return errors.New("the signed URL has expired")
		}
		exp = n
	}
	want := FileSignature(q.Get("path"), op, q.Get("username"), accessToken, exp)
	if !Equal(sig, want) {
		return errors.New("the signature does not match this path, operation and user")
	}
	return nil
}

// ParseMetadataFilter reads the list's metadata parameter (after the
// query's own decoding): key=value pairs joined by '&', each part
// percent-encoded, the whole percent-encoded once more.
func ParseMetadataFilter(v string) (map[string]string, error) {
	if v == "" {
		return nil, nil
	}
	whole, err := url.QueryUnescape(v)
	if err != nil {
		return nil, fmt.Errorf("metadata %q is not percent-encoded: %w", v, err)
	}
	out := map[string]string{}
	for _, pair := range strings.Split(whole, "&") {
		if pair == "" {
			continue
		}
		k, val, ok := strings.Cut(pair, "=")
		if !ok {
			return nil, fmt.Errorf("metadata filter %q: each part must be key=value", pair)
		}
		if k, err = url.QueryUnescape(k); err != nil {
			return nil, fmt.Errorf("metadata filter key %q is not percent-encoded: %w", k, err)
		}
		if val, err = url.QueryUnescape(val); err != nil {
			return nil, fmt.Errorf("metadata filter value %q is not percent-encoded: %w", val, err)
		}
		if k == "" {
			return nil, errors.New("metadata filter: a key must not be empty")
		}
		out[k] = val
	}
	return out, nil
}

// ParseHost reads a {port}-{id}.{domain} host name (a port suffix on the
// host is ignored). ok is false for any other name.
func ParseHost(host, domain string) (port int, id string, ok bool) {
	if domain == "" {
		return 0, "", false
	}
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	label, ok := strings.CutSuffix(host, "."+strings.ToLower(domain))
	if !ok || strings.Contains(label, ".") {
		return 0, "", false
	}
	p, id, ok := strings.Cut(label, "-")
	if !ok || id == "" || strings.Contains(id, "-") {
		return 0, "", false
	}
	n, err := strconv.Atoi(p)
	if err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != p {
		return 0, "", false
	}
	return n, id, true
}
