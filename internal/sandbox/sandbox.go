// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package sandbox

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/errdefs"
)

// Reasons recorded in Status.Reason. They are stable strings users and
// scripts can match on.
const (
	ReasonProvisioning = "provisioning"
	ReasonStarted      = "started"
	ReasonStartFailed  = "start_failed"
	// ReasonRuntimeUnavailable is a start that failed because the runtime
	// could not be reached; a retry with the same Idempotency-Key tries
	// again instead of replaying the failure.
	ReasonRuntimeUnavailable = "runtime_unavailable"
	ReasonInterrupted        = "interrupted_by_restart"
	ReasonPaused             = "paused"
	ReasonResumed            = "resumed"
	ReasonPauseFailed        = "pause_failed"
	ReasonResumeFailed       = "resume_failed"
	ReasonUserDelete         = "user_delete"
	ReasonTTLExpiry          = "ttl_expiry"
	// ReasonPausedRetention: paused for longer than the server keeps
	// paused sandboxes.
	ReasonPausedRetention = "paused_retention"
	ReasonExited          = "entrypoint_exited"
	ReasonExitedError     = "entrypoint_failed"
	ReasonLost            = "runtime_lost"
	ReasonRecovered       = "recovered"
	ReasonRecovering      = "recovering"
	ReasonDestroyPending  = "destroy_retrying"
)

// Status is a sandbox's state and why it is in it.
type Status struct {
	State            State
	Reason           string
	Message          string
	LastTransitionAt time.Time
}

// Image is where a sandbox's root filesystem comes from. Credentials are
// never part of the record.
type Image struct {
	URI string
}

// Platform is an OS/architecture pair.
type Platform struct {
	OS   string
	Arch string
}

// Token is a per-sandbox secret. It never appears in logs.
type Token string

// LogValue redacts the token.
func (Token) LogValue() slog.Value { return slog.StringValue("REDACTED") }

// Sandbox is the record of one sandbox.
type Sandbox struct {
	ID         string
	Tenant     string
	Image      *Image
	SnapshotID string
	Platform   *Platform
	Entrypoint []string
	Metadata   map[string]string
	Resources  Resources
	Extensions map[string]string
	// NetworkPolicy is the create-time egress policy as JSON, or nil.
	NetworkPolicy json.RawMessage
	Status        Status
	CreatedAt     time.Time
	// ExpiresAt is zero for a sandbox that is cleaned up by hand.
	ExpiresAt time.Time
	// Driver is the runtime that owns the sandbox.
	Driver string
	// Handle is the driver's JSON-encoded handle; nil until Create returned.
	Handle json.RawMessage
	// ExecdToken authenticates clients to the sandbox's execd.
	ExecdToken Token
	// EgressToken authenticates clients to the sandbox's egress API.
	EgressToken Token
	// UpdatedAt is when the record last changed.
	UpdatedAt time.Time
	// Version is the stored record's revision where the record store
	// versions records (a shared store, for optimistic concurrency);
	// opaque, empty otherwise.
	Version string
}

// Clone returns a deep copy, so records handed out cannot alias the stored one.
func (s *Sandbox) Clone() *Sandbox {
	c := *s
	if s.Image != nil {
		img := *s.Image
		c.Image = &img
	}
	if s.Platform != nil {
		p := *s.Platform
		c.Platform = &p
	}
	c.Entrypoint = append([]string(nil), s.Entrypoint...)
	c.Metadata = cloneMap(s.Metadata)
	c.Extensions = cloneMap(s.Extensions)
	c.NetworkPolicy = append(json.RawMessage(nil), s.NetworkPolicy...)
	c.Handle = append(json.RawMessage(nil), s.Handle...)
	return &c
}

func cloneMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	c := make(map[string]string, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

// Expired reports whether the sandbox has an expiry at or before now.
func (s *Sandbox) Expired(now time.Time) bool {
	return !s.ExpiresAt.IsZero() && !now.Before(s.ExpiresAt)
}

// SetStatus moves the record to state, checking the transition table. A
// transition to the same state only refreshes reason and message.
func (s *Sandbox) SetStatus(state State, reason, message string, now time.Time) error {
	if state != s.Status.State && !CanTransition(s.Status.State, state) {
		return errdefs.Newf(errdefs.ErrFailedPrecondition, api.CodeSandboxInvalidState,
			"sandbox %s is %s and cannot become %s", s.ID, s.Status.State, state)
	}
	if state != s.Status.State || s.Status.LastTransitionAt.IsZero() {
		s.Status.LastTransitionAt = now
	}
	s.Status.State, s.Status.Reason, s.Status.Message = state, reason, message
	s.UpdatedAt = now
	return nil
}

// PlausibleID reports whether id could name a sandbox: 1 to 63 lower-case
// letters, digits and '-' (IDs are UUIDs; runtimes name objects after
// them). Anything else is not looked up anywhere.
func PlausibleID(id string) bool {
	if len(id) == 0 || len(id) > 63 {
		return false
	}
	for _, c := range id {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
			return false
		}
	}
	return true
}

// NewID returns a random RFC 4122 version 4 UUID, the form OpenSandbox uses.
func NewID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	var out [36]byte
	hex.Encode(out[0:8], b[0:4])
	out[8] = '-'
	hex.Encode(out[9:13], b[4:6])
	out[13] = '-'
	hex.Encode(out[14:18], b[6:8])
	out[18] = '-'
	hex.Encode(out[19:23], b[8:10])
	out[23] = '-'
	hex.Encode(out[24:], b[10:])
	return string(out[:])
}

// NewToken returns a random URL-safe secret with 256 bits of entropy.
func NewToken() Token {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return Token(base64.RawURLEncoding.EncodeToString(b[:]))
}

// ShortID is the first block of an ID, for names with a length limit.
func ShortID(id string) string {
	if len(id) >= 8 {
		return id[:8]
	}
	return fmt.Sprintf("%08s", id)
}

// ExtensionRenewOnAccess is the create extension that opts a sandbox into
// renew-on-access (OpenSandbox's access.renew.extend.seconds): a request
// the server proxies to it extends its expiry to at least that many
// seconds from then.
const ExtensionRenewOnAccess = "access.renew.extend.seconds"

// ParseRenewOnAccess reads the value of ExtensionRenewOnAccess: a whole
// number of seconds from 300 to 86400.
func ParseRenewOnAccess(v string) (time.Duration, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n < 300 || n > 86400 {
		return 0, fmt.Errorf("extensions[%s] %q: must be a whole number from 300 to 86400", ExtensionRenewOnAccess, v)
	}
	return time.Duration(n) * time.Second, nil
}

// RenewOnAccess is how far a request extends s's expiry (0: it does not).
func (s *Sandbox) RenewOnAccess() time.Duration {
	v, ok := s.Extensions[ExtensionRenewOnAccess]
	if !ok || s.ExpiresAt.IsZero() {
		return 0
	}
	d, err := ParseRenewOnAccess(v)
	if err != nil {
		return 0
	}
	return d
}
