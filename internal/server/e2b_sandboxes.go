// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/errdefs"
	"github.com/corral-dev/corral/internal/e2b"
	"github.com/corral-dev/corral/internal/lifecycle"
	"github.com/corral-dev/corral/internal/sandbox"
)

// Extensions an E2B create keeps on the sandbox.
const (
	extE2BTemplate = "corral.dev/e2b-template"
	extE2BAlias    = "corral.dev/e2b-alias"
	// extE2BPublic: the sandbox's ports other than envd's open without
	// its traffic token (network.allowPublicTraffic: true).
	extE2BPublic = "corral.dev/e2b-public-traffic"
)

// Timeouts of an E2B create, in seconds: v1's default, v2's default.
const (
	e2bDefaultTimeoutV1 = 15
	e2bDefaultTimeoutV2 = 300
)

func (s *Server) e2bCreate(w http.ResponseWriter, r *http.Request) {
	var in e2b.NewSandbox
	if _, err := decodeJSON(r, &in, false); err != nil {
		s.e2bError(w, r, err)
		return
	}
	req, err := s.e2bCreateRequest(r, &in, strings.HasPrefix(r.URL.Path, "/v2/"))
	if err != nil {
		s.e2bError(w, r, err)
		return
	}
	body, _ := json.Marshal(req)
	tmpl, err := s.fromTemplate(r, req, body)
	if err != nil {
		s.e2bError(w, r, err)
		return
	}
	creq, err := createRequest(tenant(r), req, body, r.Header.Get(api.HeaderIdempotencyKey))
	if err != nil {
		s.e2bError(w, r, err)
		return
	}
	if tmpl != nil && tmpl.WarmPool > 0 {
		creq.Pool = tmpl.PoolKey()
	}
	start := time.Now()
	sb, err := s.mgr.Create(r.Context(), creq)
	s.metrics.observeCreate(time.Since(start), err)
	if err != nil {
		s.e2bError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, s.e2bSandboxOut(sb))
}

// e2bCreateRequest turns an E2B create into corral's. What corral cannot
// honour is a 400 naming the field.
func (s *Server) e2bCreateRequest(r *http.Request, in *e2b.NewSandbox, v2 bool) (*api.CreateSandboxRequest, error) {
	if strings.TrimSpace(in.TemplateID) == "" {
		return nil, e2bInvalid("templateID is required")
	}
	switch {
	case in.AutoPause != nil && *in.AutoPause:
		return nil, e2bInvalid("autoPause: corral ends a sandbox at its timeout; it cannot pause it instead (pause it yourself, or use an idle timeout: docs/e2b.md)")
	case in.AutoPauseMemory != nil && *in.AutoPauseMemory:
		return nil, e2bInvalid("autoPauseMemory: corral does not pause at a timeout")
	case len(in.MCP) > 0 && string(in.MCP) != "null":
		return nil, e2bInvalid("mcp: corral runs no MCP gateway in a sandbox")
	case len(in.IAM) > 0 && string(in.IAM) != "null":
		return nil, e2bInvalid("iam: corral issues no identity tokens to sandboxes; use its credential vault (docs/secrets.md)")
	}
	timeout := int64(e2bDefaultTimeoutV1)
	if v2 {
		timeout = e2bDefaultTimeoutV2
	}
	if in.Timeout != nil {
		timeout = *in.Timeout
	}
	if timeout < 1 {
		return nil, e2bInvalid("timeout %d: must be at least 1 second", timeout)
	}
	out := &api.CreateSandboxRequest{Timeout: &timeout, Metadata: in.Metadata, Extensions: map[string]string{extE2BTemplate: in.TemplateID}}
	if in.Alias != "" {
		out.Extensions[extE2BAlias] = in.Alias
	}
	if len(in.EnvVars) > 0 {
		out.Env = make(map[string]*string, len(in.EnvVars))
		for k, v := range in.EnvVars {
			out.Env[k] = &v
		}
	}
	// The template: a snapshot of the tenant's, a template of the
	// tenant's, or an id the server maps to an image.
	switch {
	case s.e2bSnapshotExists(r, in.TemplateID):
		out.SnapshotID = in.TemplateID
	case s.e2bTemplateExists(r, in.TemplateID):
		out.Extensions[api.ExtensionTemplate] = in.TemplateID
	default:
		img, ok := s.e2bTemplates()[in.TemplateID]
		if !ok {
			known := slices.Sorted(maps.Keys(s.e2bTemplates()))
			return nil, errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeTemplateNotFound,
				"template %q not found: it is neither a template or snapshot of yours nor one this server maps (%s)", in.TemplateID, strings.Join(known, ", "))
		}
		out.Image = &api.ImageSpec{URI: img}
	}
	pol, err := e2bPolicy(in)
	if err != nil {
		return nil, err
	}
	out.NetworkPolicy = pol
	if n := in.Network; n != nil && n.AllowPublicTraffic != nil && *n.AllowPublicTraffic {
		out.Extensions[extE2BPublic] = "true"
	}
	if in.AutoResume != nil && !in.AutoResume.Enabled {
		out.Extensions[sandbox.ExtensionAutoResume] = "false"
	}
	for i, v := range in.VolumeMounts {
		create := true
		out.Volumes = append(out.Volumes, api.Volume{Name: fmt.Sprintf("e2b-%d", i), MountPath: v.Path,
			PVC: &api.PVCVolume{ClaimName: v.Name, CreateIfNotExists: &create}})
	}
	return out, nil
}

// e2bPolicy maps allow_internet_access and network.allowOut/denyOut to an
// egress policy: allowOut entries are let through first, denyOut ones
// refused, and the rest is allowed unless the internet is off or only
// allowOut was given (an allow-list).
func e2bPolicy(in *e2b.NewSandbox) (*api.NetworkPolicy, error) {
	n := in.Network
	internet := in.AllowInternetAccess == nil || *in.AllowInternetAccess
	if n != nil {
		switch {
		case len(n.Rules) > 0 && string(n.Rules) != "null":
			return nil, e2bInvalid("network.rules: corral does not rewrite a sandbox's requests by host; its credential vault injects credentials instead (docs/secrets.md)")
		case len(n.EgressProxy) > 0 && string(n.EgressProxy) != "null":
			return nil, e2bInvalid("network.egressProxy: corral does not send a sandbox's traffic through another proxy")
		case n.MaskRequestHost != nil:
			return nil, e2bInvalid("network.maskRequestHost: corral does not rewrite the Host of requests to sandbox ports")
		case len(n.HTTPSPorts) > 0:
			return nil, e2bInvalid("network.httpsPorts: corral serves sandbox ports as they answer")
		}
	}
	if internet && (n == nil || len(n.AllowOut) == 0 && len(n.DenyOut) == 0) {
		return nil, nil
	}
	p := &api.NetworkPolicy{DefaultAction: "allow"}
	if !internet || n != nil && len(n.AllowOut) > 0 && len(n.DenyOut) == 0 {
		p.DefaultAction = "deny"
	}
	if n != nil {
		for _, t := range n.AllowOut {
			p.Egress = append(p.Egress, api.NetworkRule{Action: "allow", Target: t})
		}
		for _, t := range n.DenyOut {
			if t == "0.0.0.0/0" || t == "::/0" {
				p.DefaultAction = "deny"
				continue
			}
			p.Egress = append(p.Egress, api.NetworkRule{Action: "deny", Target: t})
		}
	}
	if err := validatePolicy(p); err != nil {
		return nil, e2bInvalid("network: %s", userText(err))
	}
	return p, nil
}

func (s *Server) e2bTemplates() map[string]string {
	if s.cfg.E2B != nil && s.cfg.E2B.Templates != nil {
		return s.cfg.E2B.Templates
	}
	return DefaultE2BTemplates()
}

func (s *Server) e2bTemplateExists(r *http.Request, name string) bool {
	if s.cfg.Templates == nil {
		return false
	}
	_, err := s.findTemplate(r.Context(), tenant(r), name)
	return err == nil
}

func (s *Server) e2bSnapshotExists(r *http.Request, id string) bool {
	_, err := s.mgr.GetSnapshot(r.Context(), tenant(r), id)
	return err == nil
}

// e2bSandboxOut is a sandbox as create and connect answer it.
func (s *Server) e2bSandboxOut(sb *sandbox.Sandbox) e2b.Sandbox {
	id, _ := e2b.FromCorralID(sb.ID)
	traffic := e2b.TrafficToken(string(sb.ExecdToken), sb.ID)
	out := e2b.Sandbox{SandboxID: id, TemplateID: sb.Extensions[extE2BTemplate], Alias: sb.Extensions[extE2BAlias], ClientID: e2b.ClientID,
		EnvdVersion: e2b.EnvdVersion, EnvdAccessToken: e2b.AccessToken(string(sb.ExecdToken), sb.ID), TrafficAccessToken: &traffic}
	if d := s.e2bDomain(); d != "" {
		out.Domain = &d
	}
	return out
}

// e2bState is a sandbox's state as E2B names it; ok is false for one E2B
// would not show (ended, failed).
func e2bState(st sandbox.State) (string, bool) {
	switch st {
	case sandbox.StatePending, sandbox.StateRunning, sandbox.StateResuming:
		return "running", true
	case sandbox.StatePaused, sandbox.StatePausing:
		return "paused", true
	}
	return "", false
}

// e2bDetail is a sandbox as GET /sandboxes/{id} and the lists answer it.
func (s *Server) e2bDetail(sb *sandbox.Sandbox, full bool) (e2b.SandboxDetail, bool) {
	id, ok := e2b.FromCorralID(sb.ID)
	state, shown := e2bState(sb.Status.State)
	if !ok || !shown {
		return e2b.SandboxDetail{}, false
	}
	end := sb.ExpiresAt
	if end.IsZero() {
		end = sb.CreatedAt.Add(100 * 365 * 24 * time.Hour)
	}
	out := e2b.SandboxDetail{SandboxID: id, TemplateID: sb.Extensions[extE2BTemplate], Alias: sb.Extensions[extE2BAlias], ClientID: e2b.ClientID,
		StartedAt: sb.CreatedAt.UTC(), EndAt: end.UTC(), State: state, Metadata: sb.Metadata, EnvdVersion: e2b.EnvdVersion,
		CPUCount: max(1, int((sb.Resources.CPUMillis+999)/1000)), MemoryMB: int(sb.Resources.MemoryBytes >> 20), DiskSizeMB: int(sb.Resources.DiskBytes >> 20)}
	if out.TemplateID == "" && sb.Image != nil {
		out.TemplateID = sb.Image.URI
	}
	if out.Metadata == nil {
		out.Metadata = map[string]string{}
	}
	if full {
		out.EnvdAccessToken = e2b.AccessToken(string(sb.ExecdToken), sb.ID)
		internet := len(sb.NetworkPolicy) == 0
		if !internet {
			var p api.NetworkPolicy
			if json.Unmarshal(sb.NetworkPolicy, &p) == nil {
				internet = p.DefaultAction != "deny"
				n := &e2b.Network{}
				for _, rule := range p.Egress {
					if rule.Action == "allow" {
						n.AllowOut = append(n.AllowOut, rule.Target)
					} else {
						n.DenyOut = append(n.DenyOut, rule.Target)
					}
				}
				out.Network = n
			}
		}
		out.AllowInternetAccess = &internet
		out.Lifecycle = &e2b.Lifecycle{OnTimeout: "kill", AutoResume: sb.AutoResume()}
		if d := s.e2bDomain(); d != "" {
			out.Domain = &d
		}
	}
	return out, true
}

func (s *Server) e2bGet(w http.ResponseWriter, r *http.Request) {
	sb, err := s.e2bSandbox(r, r.PathValue("id"))
	if err != nil {
		s.e2bError(w, r, err)
		return
	}
	out, ok := s.e2bDetail(sb, true)
	if !ok {
		writeE2BError(w, http.StatusNotFound, fmt.Sprintf("sandbox %q not found (it is %s)", r.PathValue("id"), sb.Status.State))
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// e2bList answers a tenant's sandboxes in the given states whose metadata
// match, newest first.
func (s *Server) e2bList(r *http.Request, states []string, meta map[string]string) []e2b.SandboxDetail {
	f := lifecycle.Filter{Metadata: meta, Page: 1, PageSize: 1 << 30}
	items, _ := s.mgr.List(r.Context(), tenant(r), f)
	out := []e2b.SandboxDetail{}
	for _, sb := range items {
		d, ok := s.e2bDetail(sb, false)
		if ok && slices.Contains(states, d.State) {
			out = append(out, d)
		}
	}
	return out
}

func (s *Server) e2bListV1(w http.ResponseWriter, r *http.Request) {
	meta, err := e2b.ParseMetadataFilter(r.URL.Query().Get("metadata"))
	if err != nil {
		writeE2BError(w, http.StatusBadRequest, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, s.e2bList(r, []string{"running"}, meta))
}

// e2bPageSize bounds a v2 list page.
const e2bPageSize = 100

func (s *Server) e2bListV2(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	meta, err := e2b.ParseMetadataFilter(q.Get("metadata"))
	if err != nil {
		writeE2BError(w, http.StatusBadRequest, err.Error())
		return
	}
	states := []string{"running", "paused"}
	if v := q.Get("state"); v != "" {
		states = nil
		for _, st := range strings.Split(v, ",") {
			st = strings.TrimSpace(st)
			if st != "running" && st != "paused" {
				writeE2BError(w, http.StatusBadRequest, fmt.Sprintf("state %q: must be running or paused", st))
				return
			}
			states = append(states, st)
		}
	}
	limit := e2bPageSize
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > e2bPageSize {
			writeE2BError(w, http.StatusBadRequest, fmt.Sprintf("limit %q: must be a whole number from 1 to %d", v, e2bPageSize))
			return
		}
		limit = n
	}
	offset := 0
	if v := q.Get("nextToken"); v != "" {
		b, err := base64.RawURLEncoding.DecodeString(v)
		n, aerr := strconv.Atoi(strings.TrimPrefix(string(b), "o:"))
		if err != nil || aerr != nil || !strings.HasPrefix(string(b), "o:") || n < 0 {
			writeE2BError(w, http.StatusBadRequest, "nextToken is not one this server gave")
			return
		}
		offset = n
	}
	all := s.e2bList(r, states, meta)
	if v := q.Get("template"); v != "" {
		all = slices.DeleteFunc(all, func(d e2b.SandboxDetail) bool { return d.TemplateID != v })
	}
	if v := q.Get("startedAfter"); v != "" {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			writeE2BError(w, http.StatusBadRequest, fmt.Sprintf("startedAfter %q: must be an RFC 3339 time", v))
			return
		}
		all = slices.DeleteFunc(all, func(d e2b.SandboxDetail) bool { return !d.StartedAt.After(t) })
	}
	switch q.Get("order") {
	case "", "desc":
	case "asc":
		slices.Reverse(all)
	default:
		writeE2BError(w, http.StatusBadRequest, fmt.Sprintf("order %q: must be asc or desc", q.Get("order")))
		return
	}
	page := all[min(offset, len(all)):]
	if len(page) > limit {
		page = page[:limit]
		w.Header().Set(e2b.HeaderNextToken, base64.RawURLEncoding.EncodeToString([]byte("o:"+strconv.Itoa(offset+limit))))
	}
	writeJSON(w, http.StatusOK, page)
}

func (s *Server) e2bKill(w http.ResponseWriter, r *http.Request) {
	sb, err := s.e2bSandbox(r, r.PathValue("id"))
	if err == nil {
		err = s.mgr.Delete(r.Context(), tenant(r), sb.ID)
	}
	if err != nil {
		s.e2bError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// e2bTimeoutBody reads {timeout} (seconds); required says whether it must
// be there.
func e2bTimeoutBody(r *http.Request, required bool) (int64, bool, error) {
	var in struct {
		Timeout *int64 `json:"timeout"`
	}
	if _, err := decodeJSON(r, &in, !required); err != nil {
		return 0, false, err
	}
	if in.Timeout == nil {
		if required {
			return 0, false, e2bInvalid("timeout is required (seconds)")
		}
		return 0, false, nil
	}
	if *in.Timeout < 1 {
		return 0, false, e2bInvalid("timeout %d: must be at least 1 second", *in.Timeout)
	}
	return *in.Timeout, true, nil
}

func (s *Server) e2bSetTimeout(w http.ResponseWriter, r *http.Request) {
	secs, _, err := e2bTimeoutBody(r, true)
	if err != nil {
		s.e2bError(w, r, err)
		return
	}
	sb, err := s.e2bSandbox(r, r.PathValue("id"))
	if err == nil {
		_, err = s.mgr.Renew(r.Context(), tenant(r), sb.ID, time.Now().Add(time.Duration(secs)*time.Second))
	}
	if err != nil {
		s.e2bError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) e2bPause(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Memory *bool `json:"memory"`
	}
	if _, err := decodeJSON(r, &in, true); err != nil {
		s.e2bError(w, r, err)
		return
	}
	sb, err := s.e2bSandbox(r, r.PathValue("id"))
	if err != nil {
		s.e2bError(w, r, err)
		return
	}
	if st, _ := e2bState(sb.Status.State); st == "paused" {
		writeE2BError(w, http.StatusConflict, fmt.Sprintf("sandbox %q is already paused", r.PathValue("id")))
		return
	}
	if err := s.mgr.Pause(r.Context(), tenant(r), sb.ID); err != nil {
		s.e2bError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// e2bConnect answers connect (and the older resume): a running sandbox's
// timeout is moved to at least now + timeout (200); a paused one is
// resumed (201).
func (s *Server) e2bConnect(w http.ResponseWriter, r *http.Request) {
	secs, given, err := e2bTimeoutBody(r, false)
	if err != nil {
		s.e2bError(w, r, err)
		return
	}
	sb, err := s.e2bSandbox(r, r.PathValue("id"))
	if err != nil {
		s.e2bError(w, r, err)
		return
	}
	status := http.StatusOK
	if st, ok := e2bState(sb.Status.State); !ok {
		writeE2BError(w, http.StatusNotFound, fmt.Sprintf("sandbox %q not found (it is %s)", r.PathValue("id"), sb.Status.State))
		return
	} else if st == "paused" {
		if err := s.mgr.Resume(r.Context(), tenant(r), sb.ID); err != nil {
			s.e2bError(w, r, err)
			return
		}
		status = http.StatusCreated
	}
	if given {
		at := time.Now().Add(time.Duration(secs) * time.Second)
		if cur, err := s.mgr.Get(r.Context(), tenant(r), sb.ID); err == nil && !cur.ExpiresAt.IsZero() && cur.ExpiresAt.Before(at) {
			if _, err := s.mgr.Renew(r.Context(), tenant(r), sb.ID, at); err != nil {
				s.e2bError(w, r, err)
				return
			}
		}
	}
	sb, err = s.mgr.Get(r.Context(), tenant(r), sb.ID)
	if err != nil {
		s.e2bError(w, r, err)
		return
	}
	writeJSON(w, status, s.e2bSandboxOut(sb))
}

func (s *Server) e2bMetrics(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	for _, name := range []string{"start", "end"} {
		if v := q.Get(name); v != "" {
			if _, err := strconv.ParseInt(v, 10, 64); err != nil {
				writeE2BError(w, http.StatusBadRequest, fmt.Sprintf("%s %q: must be a unix time in seconds", name, v))
				return
			}
		}
	}
	sb, err := s.e2bSandbox(r, r.PathValue("id"))
	if err != nil {
		s.e2bError(w, r, err)
		return
	}
	m, err := s.sandboxMetrics(r, sb)
	if err != nil {
		s.e2bError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, []e2b.SandboxMetric{m})
}

func (s *Server) e2bUpdateNetwork(w http.ResponseWriter, r *http.Request) {
	if _, err := s.e2bSandbox(r, r.PathValue("id")); err != nil {
		s.e2bError(w, r, err)
		return
	}
	writeE2BError(w, http.StatusBadRequest, "updating a running sandbox's network is not supported by corral's E2B API: set network at create, or use the sandbox's egress API (docs/egress.md)")
}

func (s *Server) e2bSnapshot(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Name string `json:"name"`
	}
	if _, err := decodeJSON(r, &in, true); err != nil {
		s.e2bError(w, r, err)
		return
	}
	sb, err := s.e2bSandbox(r, r.PathValue("id"))
	if err != nil {
		s.e2bError(w, r, err)
		return
	}
	sn, err := s.mgr.CreateSnapshot(r.Context(), tenant(r), sb.ID, in.Name)
	if err != nil {
		s.e2bError(w, r, err)
		return
	}
	// E2B's snapshot is ready when create answers: wait for it.
	for sn.State == sandbox.SnapshotCreating {
		select {
		case <-r.Context().Done():
			return
		case <-time.After(100 * time.Millisecond):
		}
		if sn, err = s.mgr.GetSnapshot(r.Context(), tenant(r), sn.ID); err != nil {
			s.e2bError(w, r, err)
			return
		}
	}
	if sn.State != sandbox.SnapshotReady {
		writeE2BError(w, http.StatusInternalServerError, fmt.Sprintf("snapshot %s failed: %s", sn.ID, sn.Message))
		return
	}
	writeJSON(w, http.StatusCreated, e2b.SnapshotInfo{SnapshotID: sn.ID, Names: snapshotNames(sn)})
}

func snapshotNames(sn *sandbox.Snapshot) []string {
	if sn.Name == "" {
		return []string{}
	}
	return []string{sn.Name}
}

func (s *Server) e2bListSnapshots(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := lifecycle.SnapshotFilter{Page: 1, PageSize: 1 << 30}
	if v := q.Get("sandboxID"); v != "" {
		id, ok := e2b.ToCorralID(v)
		if !ok {
			writeJSON(w, http.StatusOK, []e2b.SnapshotInfo{})
			return
		}
		f.SandboxID = id
	}
	items, _ := s.mgr.ListSnapshots(r.Context(), tenant(r), f)
	out := []e2b.SnapshotInfo{}
	for _, sn := range items {
		if name := q.Get("name"); name != "" && sn.Name != name {
			continue
		}
		out = append(out, e2b.SnapshotInfo{SnapshotID: sn.ID, Names: snapshotNames(sn)})
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			writeE2BError(w, http.StatusBadRequest, fmt.Sprintf("limit %q: must be a whole number of at least 1", v))
			return
		}
		out = out[:min(n, len(out))]
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) e2bDeleteSnapshot(w http.ResponseWriter, r *http.Request) {
	if err := s.mgr.DeleteSnapshot(r.Context(), tenant(r), r.PathValue("id")); err != nil {
		if errors.Is(err, errdefs.ErrNotFound) {
			writeE2BError(w, http.StatusNotFound, fmt.Sprintf("template or snapshot %q not found (corral deletes only snapshots here)", r.PathValue("id")))
			return
		}
		s.e2bError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// e2bMaxForks bounds one fork request.
const e2bMaxForks = 16

func (s *Server) e2bFork(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Timeout *int64 `json:"timeout"`
		Count   *int   `json:"count"`
	}
	if _, err := decodeJSON(r, &in, true); err != nil {
		s.e2bError(w, r, err)
		return
	}
	count := 1
	if in.Count != nil {
		count = *in.Count
	}
	if count < 1 || count > e2bMaxForks {
		writeE2BError(w, http.StatusBadRequest, fmt.Sprintf("count %d: must be from 1 to %d", count, e2bMaxForks))
		return
	}
	sb, err := s.e2bSandbox(r, r.PathValue("id"))
	if err != nil {
		s.e2bError(w, r, err)
		return
	}
	req := lifecycle.ForkRequest{Tenant: tenant(r), SandboxID: sb.ID, Count: count}
	if in.Timeout != nil {
		if *in.Timeout < 1 {
			writeE2BError(w, http.StatusBadRequest, fmt.Sprintf("timeout %d: must be at least 1 second", *in.Timeout))
			return
		}
		req.Timeout = time.Duration(*in.Timeout) * time.Second
	}
	res, err := s.mgr.Fork(r.Context(), req)
	if err != nil {
		s.e2bError(w, r, err)
		return
	}
	out := make([]e2b.ForkResult, 0, len(res.Sandboxes))
	for _, f := range res.Sandboxes {
		sbo := s.e2bSandboxOut(f)
		if sbo.TemplateID == "" {
			sbo.TemplateID = sb.Extensions[extE2BTemplate]
		}
		out = append(out, e2b.ForkResult{Sandbox: &sbo})
	}
	writeJSON(w, http.StatusCreated, out)
}

// sandboxMetrics samples a running sandbox's use from its execd.
func (s *Server) sandboxMetrics(r *http.Request, sb *sandbox.Sandbox) (e2b.SandboxMetric, error) {
	now := time.Now().UTC()
	out := e2b.SandboxMetric{Timestamp: now, TimestampUnix: now.Unix(), CPUCount: max(1, int((sb.Resources.CPUMillis+999)/1000))}
	if sb.Status.State != sandbox.StateRunning {
		return out, nil
	}
	addr, sb, err := s.mgr.Endpoint(r.Context(), sb.Tenant, sb.ID, api.ExecdPort)
	if err != nil {
		return out, err
	}
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr.String()+"/metrics", nil)
	if err != nil {
		return out, err
	}
	req.Header.Set(api.HeaderExecdToken, string(sb.ExecdToken))
	res, err := s.proxy.rp.Transport.RoundTrip(req)
	if err != nil {
		return out, errdefs.Wrap(errdefs.ErrUnavailable, api.CodeProxyUpstream, "the sandbox's daemon did not answer for its metrics", err)
	}
	defer res.Body.Close()
	var m api.Metrics
	if res.StatusCode != http.StatusOK || json.NewDecoder(io.LimitReader(res.Body, 1<<20)).Decode(&m) != nil {
		return out, errdefs.Newf(errdefs.ErrUnavailable, api.CodeProxyUpstream, "the sandbox's daemon answered its metrics with status %d", res.StatusCode)
	}
	out.CPUCount = max(1, int(m.CPUCount+0.5))
	out.CPUUsedPct = m.CPUUsedPct
	out.MemUsed, out.MemTotal = int64(m.MemUsedMiB*(1<<20)), int64(m.MemTotalMiB*(1<<20))
	return out, nil
}
