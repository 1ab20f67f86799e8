// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/errdefs"
	"github.com/corral-dev/corral/internal/lifecycle"
	"github.com/corral-dev/corral/internal/sandbox"
)

// maxPageSize bounds list pages.
const maxPageSize = 200

func (s *Server) createSandbox(w http.ResponseWriter, r *http.Request) {
	var in api.CreateSandboxRequest
	body, err := decodeJSON(r, &in, false)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	tmpl, err := s.fromTemplate(r, &in, body)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	// The idempotency hash is of the body as sent: a retry matches it
	// even if the template changed in between.
	req, err := createRequest(tenant(r), &in, body, r.Header.Get(api.HeaderIdempotencyKey))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if tmpl != nil && tmpl.WarmPool > 0 {
		req.Pool = tmpl.PoolKey()
	}
	start := time.Now()
	sb, err := s.mgr.Create(r.Context(), req)
	s.metrics.observeCreate(time.Since(start), err)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Location", "/v1/sandboxes/"+sb.ID)
	writeJSON(w, http.StatusAccepted, toCreateResponse(sb))
}

func (s *Server) getSandbox(w http.ResponseWriter, r *http.Request) {
	sb, err := s.mgr.Shared(r.Context(), tenant(r), r.PathValue("id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	body, ok := s.bodies.get(sb)
	if !ok {
		// As writeJSON writes it, with its line end.
		if body, err = json.Marshal(s.body(sb)); err != nil {
			s.writeError(w, r, err)
			return
		}
		body = append(body, '\n')
		s.bodies.put(sb, body)
	}
	writeJSONBody(w, http.StatusOK, body)
}

// pageParams reads page and pageSize.
func pageParams(q url.Values) (page, size int, err error) {
	page, size = 1, 20
	if v := q.Get("page"); v != "" {
		if page, err = strconv.Atoi(v); err != nil || page < 1 {
			return 0, 0, invalid("page %q: must be a whole number of at least 1", v)
		}
	}
	if v := q.Get("pageSize"); v != "" {
		if size, err = strconv.Atoi(v); err != nil || size < 1 || size > maxPageSize {
			return 0, 0, invalid("pageSize %q: must be a whole number from 1 to %d", v, maxPageSize)
		}
	}
	return page, size, nil
}

// repeated returns a repeated query parameter, also split on commas.
func repeated(q url.Values, name string) []string {
	var out []string
	for _, v := range q[name] {
		for _, part := range strings.Split(v, ",") {
			if part = strings.TrimSpace(part); part != "" {
				out = append(out, part)
			}
		}
	}
	return out
}

func (s *Server) listSandboxes(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	page, size, err := pageParams(q)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	f := lifecycle.Filter{Page: page, PageSize: size}
	for _, name := range repeated(q, "state") {
		st, err := sandbox.ParseState(name)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		f.States = append(f.States, st)
	}
	if f.Metadata, err = sandbox.ParseMetadataQuery(q.Get("metadata")); err != nil {
		s.writeError(w, r, err)
		return
	}
	items, total := s.mgr.List(r.Context(), tenant(r), f)
	out := listBody{Items: make([]sandboxBody, 0, len(items)), Pagination: pagination(page, size, total)}
	for _, sb := range items {
		out.Items = append(out.Items, s.body(sb))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) deleteSandbox(w http.ResponseWriter, r *http.Request) {
	if err := s.mgr.Delete(r.Context(), tenant(r), r.PathValue("id")); err != nil {
		s.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) patchMetadata(w http.ResponseWriter, r *http.Request) {
	var patch map[string]*string
	if _, err := decodeJSON(r, &patch, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	sb, err := s.mgr.PatchMetadata(r.Context(), tenant(r), r.PathValue("id"), patch)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, s.body(sb))
}

func (s *Server) pauseSandbox(w http.ResponseWriter, r *http.Request) {
	if err := s.mgr.Pause(r.Context(), tenant(r), r.PathValue("id")); err != nil {
		s.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusAccepted)
}

func (s *Server) resumeSandbox(w http.ResponseWriter, r *http.Request) {
	if err := s.mgr.Resume(r.Context(), tenant(r), r.PathValue("id")); err != nil {
		s.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusAccepted)
}

// listEvents pages through a sandbox's event log: ?after=SEQ,
// ?limit=N (1–1000, default 100), ?type=PREFIX (such as "egress").
func (s *Server) listEvents(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	after := int64(0)
	if v := q.Get("after"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			s.writeError(w, r, invalid("after %q: must be a non-negative event number", v))
			return
		}
		after = n
	}
	limit, err := queryInt(r, "limit", 100, 1, 1000)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	evs, err := s.mgr.Events(r.Context(), tenant(r), r.PathValue("id"), after, limit, q.Get("type"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := api.SandboxEventList{Items: make([]api.SandboxEvent, 0, len(evs)), Next: after}
	for _, ev := range evs {
		out.Items = append(out.Items, api.SandboxEvent{Seq: ev.Seq, Time: wireTime(ev.At), Type: ev.Type, State: ev.State,
			Reason: ev.Reason, Message: ev.Message, Detail: json.RawMessage(ev.Detail)})
		out.Next = ev.Seq
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) renewSandbox(w http.ResponseWriter, r *http.Request) {
	var in struct {
		ExpiresAt *string `json:"expiresAt"`
	}
	if _, err := decodeJSON(r, &in, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	if in.ExpiresAt == nil {
		s.writeError(w, r, invalid("expiresAt is required"))
		return
	}
	at, err := parseTime(*in.ExpiresAt)
	if err != nil {
		s.writeError(w, r, errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeInvalidExpiration, "expiresAt: %v", err))
		return
	}
	got, err := s.mgr.Renew(r.Context(), tenant(r), r.PathValue("id"), at)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, api.RenewSandboxExpirationResponse{ExpiresAt: wireTime(got)})
}

func (s *Server) createSnapshot(w http.ResponseWriter, r *http.Request) {
	var in api.CreateSnapshotRequest
	if _, err := decodeJSON(r, &in, true); err != nil {
		s.writeError(w, r, err)
		return
	}
	if in.Name != "" && (len(in.Name) > 256 || hasControl(in.Name)) {
		s.writeError(w, r, invalid("name must be 1 to 256 printable characters"))
		return
	}
	sn, err := s.mgr.CreateSnapshot(r.Context(), tenant(r), r.PathValue("id"), in.Name)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Location", "/v1/snapshots/"+sn.ID)
	writeJSON(w, http.StatusAccepted, toSnapshot(sn))
}

// forkSandbox is corral's POST /sandboxes/{id}/fork: Count sandboxes from
// the sandbox's file system as it is now, all Running when it answers.
func (s *Server) forkSandbox(w http.ResponseWriter, r *http.Request) {
	var in api.ForkRequest
	if _, err := decodeJSON(r, &in, true); err != nil {
		s.writeError(w, r, err)
		return
	}
	req, err := forkRequest(&in)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	req.Tenant, req.SandboxID = tenant(r), r.PathValue("id")
	res, err := s.mgr.Fork(r.Context(), req)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := api.ForkResponse{SnapshotID: res.SnapshotID, Sandboxes: make([]api.Sandbox, len(res.Sandboxes))}
	for i, sb := range res.Sandboxes {
		out.Sandboxes[i] = s.toSandbox(sb)
	}
	writeJSON(w, http.StatusCreated, out)
}

// forkRequest checks a fork's body as a create's parts are checked (the
// lifecycle checks the count).
func forkRequest(in *api.ForkRequest) (lifecycle.ForkRequest, error) {
	out := lifecycle.ForkRequest{Count: in.Count, Metadata: in.Metadata}
	if in.Count == 0 {
		out.Count = 1
	}
	c := &api.CreateSandboxRequest{Timeout: in.Timeout, Metadata: in.Metadata}
	if len(in.Env) > 0 {
		c.Env = make(map[string]*string, len(in.Env))
		for k, v := range in.Env {
			c.Env[k] = &v
		}
	}
	var cr lifecycle.CreateRequest
	for _, part := range []func(*api.CreateSandboxRequest, *lifecycle.CreateRequest) error{createTimeout, createEnv, createMetadata} {
		if err := part(c, &cr); err != nil {
			return out, err
		}
	}
	out.Env, out.Timeout = cr.Env, cr.Timeout
	return out, nil
}

func (s *Server) getSnapshot(w http.ResponseWriter, r *http.Request) {
	sn, err := s.mgr.GetSnapshot(r.Context(), tenant(r), r.PathValue("id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, toSnapshot(sn))
}

func (s *Server) listSnapshots(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	page, size, err := pageParams(q)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	f := lifecycle.SnapshotFilter{SandboxID: q.Get("sandboxId"), Page: page, PageSize: size}
	for _, name := range repeated(q, "state") {
		st, err := sandbox.ParseSnapshotState(name)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		f.States = append(f.States, st)
	}
	items, total := s.mgr.ListSnapshots(r.Context(), tenant(r), f)
	out := api.ListSnapshotsResponse{Items: make([]api.Snapshot, 0, len(items)), Pagination: pagination(page, size, total)}
	for _, sn := range items {
		out.Items = append(out.Items, toSnapshot(sn))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) deleteSnapshot(w http.ResponseWriter, r *http.Request) {
	if err := s.mgr.DeleteSnapshot(r.Context(), tenant(r), r.PathValue("id")); err != nil {
		s.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
