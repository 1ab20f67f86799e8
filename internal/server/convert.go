// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/errdefs"
	"github.com/corral-dev/corral/internal/driver"
	"github.com/corral-dev/corral/internal/egress/policy"
	"github.com/corral-dev/corral/internal/lifecycle"
	"github.com/corral-dev/corral/internal/sandbox"
)

// Bounds on a create's timeout, in seconds.
const (
	minTimeout = 60
	maxTimeout = 10 * 365 * 24 * 3600
)

func invalid(format string, args ...any) error {
	return errdefs.Invalid(api.CodeInvalidParameter, format, args...)
}

func hasControl(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < ' ' || s[i] == 0x7f {
			return true
		}
	}
	return false
}

// createRequest validates a create body and turns it into a lifecycle
// request. Every rule that a user can break is checked here, with a
// message that says what to change: one step per part of the body, in
// the body's order.
func createRequest(tenant string, in *api.CreateSandboxRequest, body []byte, idemKey string) (lifecycle.CreateRequest, error) {
	out := lifecycle.CreateRequest{Tenant: tenant}
	for _, step := range []func(*api.CreateSandboxRequest, *lifecycle.CreateRequest) error{
		createPool, createSource, createPlatform, createTimeout, createResources, createEnv, createMetadata,
		createEntrypoint, createNetwork, createUnsupported, createVolumes, createExtensions,
	} {
		if err := step(in, &out); err != nil {
			return out, err
		}
	}
	if idemKey != "" {
		if len(idemKey) > 255 || hasControl(idemKey) {
			return out, invalid("Idempotency-Key must be 1 to 255 printable characters")
		}
		sum := sha256.Sum256(body)
		out.IdempotencyKey, out.RequestHash = idemKey, hex.EncodeToString(sum[:])
	}
	return out, nil
}

func createPool(in *api.CreateSandboxRequest, _ *lifecycle.CreateRequest) error {
	if _, ok := in.Extensions["poolRef"]; ok {
		return errdefs.New(errdefs.ErrInvalidArgument, api.CodeUnsupportedPoolRef, "extensions.poolRef needs the kubernetes runtime with pools")
	}
	return nil
}

// createSource: an image, or a snapshot to restore.
func createSource(in *api.CreateSandboxRequest, out *lifecycle.CreateRequest) error {
	switch {
	case in.Image != nil && in.SnapshotID != "":
		return invalid("give either image or snapshotId, not both")
	case in.Image == nil && in.SnapshotID == "":
		return invalid("image (or snapshotId) is required")
	case in.Image == nil:
		out.SnapshotID = in.SnapshotID
		return nil
	}
	uri := strings.TrimSpace(in.Image.URI)
	if uri == "" || uri != in.Image.URI || hasControl(uri) || strings.ContainsAny(uri, " \t") || len(uri) > 1024 {
		return invalid("image.uri %q is not a valid image reference", in.Image.URI)
	}
	out.Image = &sandbox.Image{URI: uri}
	if in.Image.Auth != nil {
		out.ImageAuth = &driver.Image{URI: uri, Username: in.Image.Auth.Username, Password: in.Image.Auth.Password}
	}
	return nil
}

func createPlatform(in *api.CreateSandboxRequest, out *lifecycle.CreateRequest) error {
	if in.Platform == nil {
		return nil
	}
	os, arch := strings.ToLower(in.Platform.OS), strings.ToLower(in.Platform.Arch)
	if os != "linux" && os != "windows" {
		return invalid("platform.os %q: must be linux or windows", in.Platform.OS)
	}
	if arch != "amd64" && arch != "arm64" {
		return invalid("platform.arch %q: must be amd64 or arm64", in.Platform.Arch)
	}
	if os == "windows" {
		return errdefs.New(errdefs.ErrInvalidArgument, api.CodeAPINotSupported, "windows sandboxes are not supported")
	}
	out.Platform = &sandbox.Platform{OS: os, Arch: arch}
	return nil
}

func createTimeout(in *api.CreateSandboxRequest, out *lifecycle.CreateRequest) error {
	if in.Timeout == nil {
		return nil
	}
	t := *in.Timeout
	if t < minTimeout || t > maxTimeout {
		return invalid("timeout %d: must be at least %d seconds (omit it for a sandbox you delete yourself)", t, minTimeout)
	}
	out.Timeout = time.Duration(t) * time.Second
	return nil
}

func createResources(in *api.CreateSandboxRequest, out *lifecycle.CreateRequest) (err error) {
	out.Resources, err = sandbox.ParseResources(in.ResourceLimits)
	return err
}

func createEnv(in *api.CreateSandboxRequest, out *lifecycle.CreateRequest) error {
	if len(in.Env) == 0 {
		return nil
	}
	out.Env = make(map[string]string, len(in.Env))
	for k, v := range in.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return invalid("env key %q: must be non-empty and contain no '=' or NUL", k)
		}
		if v == nil {
			continue
		}
		if strings.ContainsRune(*v, 0) {
			return invalid("env %s: the value contains a NUL byte", k)
		}
		out.Env[k] = *v
	}
	return nil
}

func createMetadata(in *api.CreateSandboxRequest, out *lifecycle.CreateRequest) error {
	if err := sandbox.ValidateMetadata(in.Metadata); err != nil {
		return err
	}
	out.Metadata = in.Metadata
	return nil
}

func createEntrypoint(in *api.CreateSandboxRequest, out *lifecycle.CreateRequest) error {
	if in.Entrypoint == nil {
		return nil
	}
	if len(in.Entrypoint) == 0 || in.Entrypoint[0] == "" {
		return invalid("entrypoint must have at least one element, the program to run")
	}
	for _, a := range in.Entrypoint {
		if strings.ContainsRune(a, 0) {
			return invalid("entrypoint contains a NUL byte")
		}
	}
	out.Entrypoint = in.Entrypoint
	return nil
}

// createNetwork: the egress policy, and the credential proxy it carries.
func createNetwork(in *api.CreateSandboxRequest, out *lifecycle.CreateRequest) error {
	if in.NetworkPolicy != nil {
		if err := validatePolicy(in.NetworkPolicy); err != nil {
			return err
		}
		out.NetworkPolicy, _ = json.Marshal(in.NetworkPolicy)
	}
	if in.CredentialProxy != nil && in.CredentialProxy.Enabled {
		if in.NetworkPolicy == nil {
			return invalid("credentialProxy.enabled needs a networkPolicy")
		}
		out.CredentialProxy = true
	}
	return nil
}

// createUnsupported refuses what the contract has and corral does not.
func createUnsupported(in *api.CreateSandboxRequest, _ *lifecycle.CreateRequest) error {
	if in.SecureAccess {
		return errdefs.New(errdefs.ErrInvalidArgument, api.CodeAPINotSupported,
			"secureAccess needs an ingress gateway; corral authenticates every endpoint with per-sandbox tokens instead")
	}
	return nil
}

// createVolumes: the volumes' form; the lifecycle checks host paths.
func createVolumes(in *api.CreateSandboxRequest, out *lifecycle.CreateRequest) (err error) {
	out.Volumes, err = sandbox.ParseVolumes(in.Volumes)
	return err
}

func createExtensions(in *api.CreateSandboxRequest, out *lifecycle.CreateRequest) error {
	if v, ok := in.Extensions[sandbox.ExtensionRenewOnAccess]; ok {
		if _, err := sandbox.ParseRenewOnAccess(v); err != nil {
			return invalid("%v", err)
		}
	}
	if _, err := sandbox.ParseIdle(in.Extensions, sandbox.IdlePolicy{}); err != nil {
		return invalid("%v", err)
	}
	out.Extensions = in.Extensions
	return nil
}

// validatePolicy compiles the policy the way the egress enforcer will, so
// a rule it could not apply is a 400 naming that rule.
func validatePolicy(p *api.NetworkPolicy) error {
	rules := make([]policy.Rule, len(p.Egress))
	for i, r := range p.Egress {
		if hasControl(r.Target) {
			return invalid("networkPolicy.egress[%d].target %q: control characters are not allowed", i, r.Target)
		}
		rules[i] = policy.Rule{Action: r.Action, Target: r.Target}
	}
	if _, err := policy.Compile(policy.Policy{DefaultAction: p.DefaultAction, Egress: rules}, policy.Options{}); err != nil {
		return invalid("%s", err.Error())
	}
	return nil
}

// wireTime is a timestamp as the API sends it: UTC with microseconds, the
// precision every client library parses.
func wireTime(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

func wireTimePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	w := wireTime(t)
	return &w
}

func toStatus(st sandbox.Status) api.SandboxStatus {
	return api.SandboxStatus{State: st.State.String(), Reason: st.Reason, Message: st.Message, LastTransitionAt: wireTimePtr(st.LastTransitionAt)}
}

func toPlatform(p *sandbox.Platform) *api.PlatformSpec {
	if p == nil {
		return nil
	}
	return &api.PlatformSpec{OS: p.OS, Arch: p.Arch}
}

func toSandbox(sb *sandbox.Sandbox) api.Sandbox {
	out := api.Sandbox{
		ID: sb.ID, SnapshotID: sb.SnapshotID, Platform: toPlatform(sb.Platform), Status: toStatus(sb.Status),
		Metadata: sb.Metadata, Entrypoint: sb.Entrypoint, ExpiresAt: wireTimePtr(sb.ExpiresAt), CreatedAt: wireTime(sb.CreatedAt),
	}
	if sb.Image != nil {
		out.Image = &api.ImageSpec{URI: sb.Image.URI}
	}
	if out.Entrypoint == nil {
		out.Entrypoint = []string{}
	}
	return out
}

// toSandbox is toSandbox with the isolation tier the runtime reports.
func (s *Server) toSandbox(sb *sandbox.Sandbox) api.Sandbox {
	out := toSandbox(sb)
	out.Isolation = s.mgr.Isolation(sb)
	return out
}

func toCreateResponse(sb *sandbox.Sandbox) api.CreateSandboxResponse {
	full := toSandbox(sb)
	return api.CreateSandboxResponse{
		ID: full.ID, Status: full.Status, Metadata: full.Metadata, Platform: full.Platform,
		ExpiresAt: full.ExpiresAt, CreatedAt: full.CreatedAt, Entrypoint: full.Entrypoint,
	}
}

func toSnapshot(sn *sandbox.Snapshot) api.Snapshot {
	return api.Snapshot{
		ID: sn.ID, SandboxID: sn.SandboxID, Name: sn.Name, CreatedAt: wireTime(sn.CreatedAt),
		Status: api.SnapshotStatus{State: sn.State.String(), Reason: sn.Reason, Message: sn.Message, LastTransitionAt: wireTimePtr(sn.LastTransitionAt)},
	}
}

func pagination(page, size, total int) api.PaginationInfo {
	pages := 0
	if total > 0 {
		pages = (total + size - 1) / size
	}
	return api.PaginationInfo{Page: page, PageSize: size, TotalItems: total, TotalPages: pages, HasNextPage: page < pages}
}

// parseTime reads an RFC 3339 timestamp; one without a zone is UTC.
func parseTime(s string) (time.Time, error) {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.999999999", "2006-01-02 15:04:05.999999999Z07:00"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is not an RFC 3339 timestamp", s)
}
