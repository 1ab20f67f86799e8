// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package api

// QuotaRequest sets a tenant's quotas (PUT /v1/admin/quotas/{tenant}):
// each field given replaces the server's default for that tenant (0: no
// bound); a field left out takes the default. It replaces the tenant's
// previous values whole.
type QuotaRequest struct {
	Running             *int64  `json:"running,omitempty"`
	Sandboxes           *int64  `json:"sandboxes,omitempty"`
	CPU                 *string `json:"cpu,omitempty"`
	Memory              *string `json:"memory,omitempty"`
	CreatesPerMinute    *int64  `json:"createsPerMinute,omitempty"`
	Snapshots           *int64  `json:"snapshots,omitempty"`
	SnapshotBytes       *string `json:"snapshotBytes,omitempty"`
	Policy              *string `json:"policy,omitempty"`
	QueueTimeoutSeconds *int64  `json:"queueTimeoutSeconds,omitempty"`
}

// QuotaLimits are a tenant's effective quotas (0 or empty: no bound).
type QuotaLimits struct {
	Running             int64  `json:"running"`
	Sandboxes           int64  `json:"sandboxes"`
	CPU                 string `json:"cpu,omitempty"`
	Memory              string `json:"memory,omitempty"`
	CreatesPerMinute    int64  `json:"createsPerMinute"`
	Snapshots           int64  `json:"snapshots"`
	SnapshotBytes       string `json:"snapshotBytes,omitempty"`
	Policy              string `json:"policy"`
	QueueTimeoutSeconds int64  `json:"queueTimeoutSeconds"`
}

// QuotaUsage is what a tenant holds now.
type QuotaUsage struct {
	Running           int64  `json:"running"`
	Sandboxes         int64  `json:"sandboxes"`
	CPU               string `json:"cpu,omitempty"`
	Memory            string `json:"memory,omitempty"`
	CreatesLastMinute int64  `json:"createsLastMinute"`
	Queued            int64  `json:"queued"`
}

// QuotaStatus answers GET /v1/quota (the caller's tenant) and GET
// /v1/admin/quotas[/{tenant}]: the effective limits, what the tenant set
// apart from the server's defaults, and its use.
type QuotaStatus struct {
	Tenant    string       `json:"tenant"`
	Limits    QuotaLimits  `json:"limits"`
	Overrides QuotaRequest `json:"overrides"`
	Usage     QuotaUsage   `json:"usage"`
}

// QuotaStatusList answers GET /v1/admin/quotas: every tenant with
// overrides or sandboxes.
type QuotaStatusList struct {
	Items []QuotaStatus `json:"items"`
}

// Quota refusals: the headers of a 429 name the limit passed, its value
// and the use, beside Retry-After.
const (
	HeaderQuotaLimit = "Corral-Quota-Limit"
	HeaderQuotaMax   = "Corral-Quota-Max"
	HeaderQuotaUsed  = "Corral-Quota-Used"

	CodeQuotaExceeded         = "QUOTA::EXCEEDED"
	CodeQuotaQueueTimeout     = "QUOTA::QUEUE_TIMEOUT"
	CodeQuotaQueueInterrupted = "QUOTA::QUEUE_INTERRUPTED"
	EventQuotaRefused         = "quota.refused"
	EventQuotaQueued          = "quota.queued"
)
