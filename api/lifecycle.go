// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package api

import (
	"encoding/json"
	"time"
)

// Header names of the lifecycle API.
const (
	HeaderAPIKey = "OPEN-SANDBOX-API-KEY"
	// HeaderAPIKeyAlias is accepted as HeaderAPIKey is (the OpenSandbox
	// SDKs send it behind gateways); HeaderAPIKey wins when both are set.
	HeaderAPIKeyAlias    = "X-API-Key"
	HeaderRequestID      = "X-Request-ID"
	HeaderIdempotencyKey = "Idempotency-Key"
	HeaderExecdToken     = "X-EXECD-ACCESS-TOKEN"
	HeaderEgressToken    = "OPENSANDBOX-EGRESS-AUTH"
	// HeaderObserve "1" on a GET through the proxy marks a request that
	// only watches (a console's metrics): the server neither resumes a
	// paused sandbox for it nor renews one on access, and execd does not
	// count it as activity, so an open console keeps nothing awake.
	HeaderObserve = "Corral-Observe"
)

// Well-known ports inside a sandbox.
const (
	ExecdPort  = 44772
	EgressPort = 18080
)

// Corral's extension of the egress API: PUT {"token": "..."} (at least
// EgressTokenMinLen characters, no spaces) with the current token
// replaces it.
const (
	PathEgressToken   = "/corral/token"
	EgressTokenMinLen = 16
)

// Sandbox states as they appear on the wire.
const (
	StatePending    = "Pending"
	StateRunning    = "Running"
	StatePausing    = "Pausing"
	StatePaused     = "Paused"
	StateResuming   = "Resuming"
	StateStopping   = "Stopping"
	StateTerminated = "Terminated"
	StateFailed     = "Failed"
)

// Snapshot states as they appear on the wire.
const (
	SnapshotCreating = "Creating"
	SnapshotReady    = "Ready"
	SnapshotFailed   = "Failed"
	SnapshotDeleting = "Deleting"
)

// ImageSpec names the image a sandbox starts from.
type ImageSpec struct {
	URI  string     `json:"uri"`
	Auth *ImageAuth `json:"auth,omitempty"`
}

// ImageAuth holds registry credentials. It is never echoed back.
type ImageAuth struct {
	Username string `json:"username,omitempty"`
	Password string `json:"password,omitempty"`
}

// PlatformSpec selects an OS and CPU architecture.
type PlatformSpec struct {
	OS   string `json:"os"`
	Arch string `json:"arch"`
}

// NetworkRule is one egress rule.
type NetworkRule struct {
	Action string `json:"action"`
	Target string `json:"target"`
}

// NetworkPolicy is a sandbox's egress policy.
type NetworkPolicy struct {
	DefaultAction string        `json:"defaultAction,omitempty"`
	Egress        []NetworkRule `json:"egress,omitempty"`
}

// EgressPolicyStatus is what the egress API answers about the policy.
type EgressPolicyStatus struct {
	Status          string         `json:"status"`
	Mode            string         `json:"mode"`
	EnforcementMode string         `json:"enforcementMode"`
	Reason          string         `json:"reason,omitempty"`
	Policy          *NetworkPolicy `json:"policy,omitempty"`
}

// SandboxEvent is one entry of a sandbox's event log (a corral
// extension): lifecycle transitions (created, started, paused, deleted...)
// and egress decisions (egress.dns, egress.connection), whose Detail is the
// enforcer's audit event.
type SandboxEvent struct {
	Seq     int64           `json:"seq"`
	Time    time.Time       `json:"time"`
	Type    string          `json:"type"`
	State   string          `json:"state,omitempty"`
	Reason  string          `json:"reason,omitempty"`
	Message string          `json:"message,omitempty"`
	Detail  json.RawMessage `json:"detail,omitempty"`
}

// SandboxEventList is a page of events; Next is the after= of the next
// page (the last Seq, or the request's after when empty).
type SandboxEventList struct {
	Items []SandboxEvent `json:"items"`
	Next  int64          `json:"next"`
}

// DiagnosticContent answers GET /sandboxes/{id}/diagnostics/{logs,events}
// with a scope (OpenSandbox's diagnostics API). corral delivers inline.
type DiagnosticContent struct {
	SandboxID     string   `json:"sandboxId"`
	Kind          string   `json:"kind"` // logs or events
	Scope         string   `json:"scope"`
	Delivery      string   `json:"delivery"` // inline
	ContentType   string   `json:"contentType"`
	Content       string   `json:"content"`
	ContentLength int      `json:"contentLength"`
	Truncated     bool     `json:"truncated"`
	Warnings      []string `json:"warnings,omitempty"`
}

// The diagnostics API's scopes.
const (
	DiagnosticScopeContainer = "container"
	DiagnosticScopeLifecycle = "lifecycle"
	DiagnosticScopeRuntime   = "runtime"
	DiagnosticScopeNetwork   = "network"
	DiagnosticScopeProcess   = "process"
	DiagnosticScopeAll       = "all"
)

// Secret is a tenant's secret as the API shows it: never its value.
type Secret struct {
	Name      string     `json:"name"`
	CreatedAt *time.Time `json:"createdAt,omitempty"`
	UpdatedAt *time.Time `json:"updatedAt,omitempty"`
}

// SecretList is GET /secrets.
type SecretList struct {
	Items []Secret `json:"items"`
}

// CredentialProxyConfig turns credential injection on.
type CredentialProxyConfig struct {
	Enabled bool `json:"enabled"`
}

// CreateSandboxRequest is the body of POST /sandboxes. Optional scalar fields
// are pointers so that absent and null can be told from zero.
type CreateSandboxRequest struct {
	Image           *ImageSpec             `json:"image,omitempty"`
	SnapshotID      string                 `json:"snapshotId,omitempty"`
	Platform        *PlatformSpec          `json:"platform,omitempty"`
	Timeout         *int64                 `json:"timeout,omitempty"`
	ResourceLimits  map[string]string      `json:"resourceLimits,omitempty"`
	Env             map[string]*string     `json:"env,omitempty"`
	Metadata        map[string]string      `json:"metadata,omitempty"`
	Entrypoint      []string               `json:"entrypoint,omitempty"`
	NetworkPolicy   *NetworkPolicy         `json:"networkPolicy,omitempty"`
	CredentialProxy *CredentialProxyConfig `json:"credentialProxy,omitempty"`
	SecureAccess    bool                   `json:"secureAccess,omitempty"`
	Volumes         []Volume               `json:"volumes,omitempty"`
	Extensions      map[string]string      `json:"extensions,omitempty"`
}

// Volume is a storage mount of a sandbox: a name, exactly one backend,
// and where and how it is mounted.
type Volume struct {
	Name      string      `json:"name"`
	Host      *HostVolume `json:"host,omitempty"`
	PVC       *PVCVolume  `json:"pvc,omitempty"`
	OSSFS     *OSSFS      `json:"ossfs,omitempty"`
	MountPath string      `json:"mountPath"`
	ReadOnly  bool        `json:"readOnly,omitempty"`
	SubPath   string      `json:"subPath,omitempty"`
}

// HostVolume is a directory of the host's, under a prefix the server
// allows.
type HostVolume struct {
	Path string `json:"path"`
}

// PVCVolume is a named volume the platform manages (corral: one per
// tenant and name).
type PVCVolume struct {
	ClaimName                  string   `json:"claimName"`
	CreateIfNotExists          *bool    `json:"createIfNotExists,omitempty"`
	DeleteOnSandboxTermination bool     `json:"deleteOnSandboxTermination,omitempty"`
	StorageClass               *string  `json:"storageClass,omitempty"`
	Storage                    *string  `json:"storage,omitempty"`
	AccessModes                []string `json:"accessModes,omitempty"`
}

// OSSFS is an object-storage mount; corral does not serve it.
type OSSFS struct {
	Bucket   string `json:"bucket,omitempty"`
	Endpoint string `json:"endpoint,omitempty"`
}

// VolumeInfo is one of a tenant's named volumes (GET /v1/volumes, corral's).
type VolumeInfo struct {
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"createdAt"`
	// InUseBy are the sandboxes that mount it.
	InUseBy []string `json:"inUseBy,omitempty"`
}

// ListVolumesResponse is the body of GET /v1/volumes.
type ListVolumesResponse struct {
	Items []VolumeInfo `json:"items"`
}

// SandboxStatus is a sandbox's lifecycle state with its explanation.
type SandboxStatus struct {
	State            string     `json:"state"`
	Reason           string     `json:"reason,omitempty"`
	Message          string     `json:"message,omitempty"`
	LastTransitionAt *time.Time `json:"lastTransitionAt,omitempty"`
}

// Sandbox is the full representation of a sandbox.
type Sandbox struct {
	ID         string            `json:"id"`
	Image      *ImageSpec        `json:"image,omitempty"`
	SnapshotID string            `json:"snapshotId,omitempty"`
	Platform   *PlatformSpec     `json:"platform,omitempty"`
	Status     SandboxStatus     `json:"status"`
	Metadata   map[string]string `json:"metadata,omitempty"`
	Entrypoint []string          `json:"entrypoint"`
	ExpiresAt  *time.Time        `json:"expiresAt,omitempty"`
	CreatedAt  time.Time         `json:"createdAt"`
	// Isolation is corral's extension: the isolation tier the sandbox
	// runs in (Isolation* values; docs/isolation.md). Empty until its
	// runtime has made it.
	Isolation string `json:"isolation,omitempty"`
}

// The isolation tiers GET /sandboxes/{id} reports.
const (
	// IsolationRuncUserns: runc, in a user namespace of its own whose
	// root is an unprivileged host user (the native runtime's default).
	IsolationRuncUserns = "runc-userns"
	// IsolationRunc: runc without a user namespace: root in the sandbox
	// is root on the host, held in by capabilities and seccomp.
	IsolationRunc = "runc"
	// IsolationRunsc: gVisor's runsc: the sandbox's system calls are
	// served by a user-space kernel (the Sentry), not the host's.
	IsolationRunsc = "runsc"
	// IsolationPod: a Kubernetes pod, as the cluster's runtime class and
	// the controller's settings make it.
	IsolationPod = "pod"
)

// ExtensionIsolation is the create extension that chooses a sandbox's
// isolation tier, IsolationRunc or IsolationRunsc, among those the
// server allows (corral serve --isolation); without it, the server's
// first allowed tier. IsolationRunc means runc in a user namespace where
// the runtime gives one (reported as IsolationRuncUserns).
const ExtensionIsolation = "corral.dev/isolation"

// CreateSandboxResponse is the body of a successful POST /sandboxes.
type CreateSandboxResponse struct {
	ID         string            `json:"id"`
	Status     SandboxStatus     `json:"status"`
	Metadata   map[string]string `json:"metadata,omitempty"`
	Platform   *PlatformSpec     `json:"platform,omitempty"`
	ExpiresAt  *time.Time        `json:"expiresAt,omitempty"`
	CreatedAt  time.Time         `json:"createdAt"`
	Entrypoint []string          `json:"entrypoint"`
}

// PaginationInfo describes one page of a list.
type PaginationInfo struct {
	Page        int  `json:"page"`
	PageSize    int  `json:"pageSize"`
	TotalItems  int  `json:"totalItems"`
	TotalPages  int  `json:"totalPages"`
	HasNextPage bool `json:"hasNextPage"`
}

// ListSandboxesResponse is the body of GET /sandboxes.
type ListSandboxesResponse struct {
	Items      []Sandbox      `json:"items"`
	Pagination PaginationInfo `json:"pagination"`
}

// RenewSandboxExpirationRequest is the body of POST .../renew-expiration.
type RenewSandboxExpirationRequest struct {
	ExpiresAt time.Time `json:"expiresAt"`
}

// RenewSandboxExpirationResponse answers a renew.
type RenewSandboxExpirationResponse struct {
	ExpiresAt time.Time `json:"expiresAt"`
}

// Endpoint tells a client how to reach a port of a sandbox. Endpoint has no
// scheme: host[:port][/path].
type Endpoint struct {
	Endpoint string            `json:"endpoint"`
	Headers  map[string]string `json:"headers,omitempty"`
}

// CreateSnapshotRequest is the optional body of POST .../snapshots.
type CreateSnapshotRequest struct {
	Name string `json:"name,omitempty"`
}

// ForkRequest is the body of POST /sandboxes/{id}/fork (corral's own
// route): Count new sandboxes from the file system the sandbox has now.
type ForkRequest struct {
	// Count is 1 to 100 (default 1).
	Count int `json:"count,omitempty"`
	// Metadata replaces the source's in the forks when set.
	Metadata map[string]string `json:"metadata,omitempty"`
	// Env is the forks' environment; the server does not keep the
	// source's.
	Env map[string]string `json:"env,omitempty"`
	// Timeout is each fork's time to live in seconds (default: the
	// source's).
	Timeout *int64 `json:"timeout,omitempty"`
}

// ForkResponse lists the forks, all Running.
type ForkResponse struct {
	// SnapshotID is the snapshot they were made from, deleted once they
	// run.
	SnapshotID string    `json:"snapshotId"`
	Sandboxes  []Sandbox `json:"sandboxes"`
}

// SnapshotStatus is a snapshot's state with its explanation.
type SnapshotStatus struct {
	State            string     `json:"state"`
	Reason           string     `json:"reason,omitempty"`
	Message          string     `json:"message,omitempty"`
	LastTransitionAt *time.Time `json:"lastTransitionAt,omitempty"`
}

// Snapshot is a point-in-time capture of a sandbox.
type Snapshot struct {
	ID        string         `json:"id"`
	SandboxID string         `json:"sandboxId"`
	Name      string         `json:"name,omitempty"`
	Status    SnapshotStatus `json:"status"`
	CreatedAt time.Time      `json:"createdAt"`
}

// ListSnapshotsResponse is the body of GET /snapshots.
type ListSnapshotsResponse struct {
	Items      []Snapshot     `json:"items"`
	Pagination PaginationInfo `json:"pagination"`
}

// Health is the body of GET /health.
type Health struct {
	Status string `json:"status"`
	// Warnings (a corral extension, for admin keys only) say what is
	// wrong with the server's setup, such as an OCI runtime open to known
	// container escapes.
	Warnings []string `json:"warnings,omitempty"`
}

// A browser cannot set headers on a WebSocket, so a client may carry a
// proxy route's token (the endpoint headers' value for
// use_server_proxy=true) as a WebSocket subprotocol instead: it offers
// WSProtocol and WSTokenPrefix+TOKEN, and the server, having checked the
// token and kept it from the sandbox, answers with WSProtocol.
const (
	WSProtocol    = "corral"
	WSTokenPrefix = "corral.token."
)

// ValidRequestID reports whether a client-chosen X-Request-ID is safe to
// echo and log: 1 to 128 printable ASCII characters without spaces.
func ValidRequestID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; c <= ' ' || c > '~' {
			return false
		}
	}
	return true
}

// CodeSandboxAutoResumeFailed is the code of a 503 to a request that
// reached a paused sandbox through the server when the sandbox could not
// be resumed for it (the message says why).
const CodeSandboxAutoResumeFailed = "SANDBOX::AUTO_RESUME_FAILED"
