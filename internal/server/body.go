// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"time"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/internal/sandbox"
)

// sandboxBody is api.Sandbox as the server writes it, in the same JSON,
// but with its times formatted once as strings: encoding/json re-scans
// the output of every MarshalJSON (a time.Time's), which was a tenth of
// the CPU of GET /v1/sandboxes/{id}. TestSandboxBodyIsTheWireShape keeps
// the two alike, field by field and byte by byte.
type sandboxBody struct {
	ID         string            `json:"id"`
	Image      *api.ImageSpec    `json:"image,omitempty"`
	SnapshotID string            `json:"snapshotId,omitempty"`
	Platform   *api.PlatformSpec `json:"platform,omitempty"`
	Status     statusBody        `json:"status"`
	Metadata   map[string]string `json:"metadata,omitempty"`
	Entrypoint []string          `json:"entrypoint"`
	ExpiresAt  string            `json:"expiresAt,omitempty"`
	CreatedAt  string            `json:"createdAt"`
	Isolation  string            `json:"isolation,omitempty"`
}

// statusBody is api.SandboxStatus as sandboxBody writes it.
type statusBody struct {
	State            string `json:"state"`
	Reason           string `json:"reason,omitempty"`
	Message          string `json:"message,omitempty"`
	LastTransitionAt string `json:"lastTransitionAt,omitempty"`
}

// listBody is api.ListSandboxesResponse with sandboxBody items.
type listBody struct {
	Items      []sandboxBody      `json:"items"`
	Pagination api.PaginationInfo `json:"pagination"`
}

// bodyTime is what a time.Time's MarshalJSON writes for wireTime(t),
// without the quotes; "" for the zero time (an omitted field).
func bodyTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return wireTime(t).Format(time.RFC3339Nano)
}

// body is the sandbox's answer with the isolation tier its runtime
// reports.
func (s *Server) body(sb *sandbox.Sandbox) sandboxBody {
	out := sandboxBody{
		ID: sb.ID, SnapshotID: sb.SnapshotID, Platform: toPlatform(sb.Platform),
		Status: statusBody{State: sb.Status.State.String(), Reason: sb.Status.Reason, Message: sb.Status.Message,
			LastTransitionAt: bodyTime(sb.Status.LastTransitionAt)},
		Metadata: sb.Metadata, Entrypoint: sb.Entrypoint, ExpiresAt: bodyTime(sb.ExpiresAt),
		CreatedAt: wireTime(sb.CreatedAt).Format(time.RFC3339Nano), Isolation: s.mgr.Isolation(sb),
	}
	if sb.Image != nil {
		out.Image = &api.ImageSpec{URI: sb.Image.URI}
	}
	if out.Entrypoint == nil {
		out.Entrypoint = []string{}
	}
	return out
}
