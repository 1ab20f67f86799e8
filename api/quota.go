// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package api

import (
	"encoding/json"
	"time"
)

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
	VolumeBytes         *string `json:"volumeBytes,omitempty"`
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
	VolumeBytes         string `json:"volumeBytes,omitempty"`
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
	VolumeBytes       string `json:"volumeBytes,omitempty"`
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

// ExtensionTemplate names the template a create starts from (a corral
// extension): the template's spec, with the fields the template lets a
// create override taken from the create.
const ExtensionTemplate = "corral.dev/template"

// Template is a named create preset (POST/PUT /v1/templates). Spec is a
// create body (image, entrypoint, env, resourceLimits, networkPolicy,
// volumes, timeout, extensions, metadata, platform); AllowOverride names
// the fields of it a create may give (default env and metadata). A
// public template is an admin's, visible to every tenant; a tenant's own
// template of the same name comes first for that tenant.
type Template struct {
	Name          string          `json:"name"`
	Description   string          `json:"description,omitempty"`
	Public        bool            `json:"public,omitempty"`
	Spec          json.RawMessage `json:"spec"`
	AllowOverride []string        `json:"allowOverride,omitempty"`
	// WarmPool is how many sandboxes of the template the server keeps
	// started ahead of time for its creates (0: none).
	WarmPool int `json:"warmPool,omitempty"`
	// WarmReady is how many are ready now (answers only).
	WarmReady int       `json:"warmReady,omitempty"`
	CreatedAt time.Time `json:"createdAt,omitempty"`
	UpdatedAt time.Time `json:"updatedAt,omitempty"`
}

// TemplateList answers GET /v1/templates: the tenant's own, then the
// public ones.
type TemplateList struct {
	Items []Template `json:"items"`
}

// Error codes of templates.
const (
	CodeTemplateNotFound = "TEMPLATE::NOT_FOUND"
	CodeTemplateInvalid  = "TEMPLATE::INVALID"
	CodeTemplateOverride = "TEMPLATE::OVERRIDE_NOT_ALLOWED"
	CodeTemplateExists   = "TEMPLATE::ALREADY_EXISTS"
	CodeTemplateLimit    = "TEMPLATE::LIMIT_EXCEEDED"
)
