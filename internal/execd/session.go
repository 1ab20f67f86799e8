// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package execd

import (
	"net/http"
	"os"
	"time"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/errdefs"
)

// defaultSessionTimeout bounds a session run without a timeout.
const defaultSessionTimeout = 24 * time.Hour

func (s *Server) createSession(w http.ResponseWriter, r *http.Request) {
	var req api.CreateSessionRequest
	if err := decode(r, &req, true); err != nil {
		writeError(w, err)
		return
	}
	dir, err := s.resolveWorkdir(req.Cwd)
	if err != nil {
		writeError(w, err)
		return
	}
	sess := s.sessions.Create(dir, s.env(nil, os.Geteuid()))
	writeJSON(w, http.StatusOK, api.CreateSessionResponse{SessionID: sess.ID})
}

func (s *Server) runInSession(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	sess, ok := s.sessions.Get(id)
	if !ok {
		// The contract lists no 404 for this route.
		writeErrorStatus(w, http.StatusBadRequest, errdefs.Newf(errdefs.ErrNotFound, api.CodeExecdSessionNotFound, "session %s not found", id))
		return
	}
	var req api.RunInSessionRequest
	if err := decode(r, &req, false); err != nil {
		writeError(w, err)
		return
	}
	if req.Command == "" {
		writeError(w, badRequest("command is required"))
		return
	}
	if req.Timeout != nil && *req.Timeout < 0 {
		writeError(w, badRequest("timeout is in milliseconds and must not be negative"))
		return
	}
	dir := ""
	if req.Cwd != "" {
		var err error
		if dir, err = s.resolveWorkdir(req.Cwd); err != nil {
			writeError(w, err)
			return
		}
	}
	timeout := defaultSessionTimeout
	if req.Timeout != nil && *req.Timeout > 0 {
		timeout = time.Duration(*req.Timeout) * time.Millisecond
	}
	c, err := s.sessions.Run(r.Context(), sess, req.Command, dir, timeout)
	if err != nil {
		writeError(w, err)
		return
	}
	mode := modeOf(w, r)
	es := newEventStream(w)
	if err := es.write(api.ServerStreamEvent{Type: api.EventInit, Text: sess.ID}); err != nil {
		return
	}
	if err := s.streamOutput(r.Context(), es, c, cursors{}, mode); err != nil && r.Context().Err() == nil {
		s.log.WarnContext(r.Context(), "session stream ended early", "session_id", sess.ID, "err", err)
	}
}

func (s *Server) deleteSession(w http.ResponseWriter, r *http.Request) {
	if !s.sessions.Delete(r.PathValue("id")) {
		writeError(w, errdefs.Newf(errdefs.ErrNotFound, api.CodeExecdSessionNotFound, "session %s not found", r.PathValue("id")))
		return
	}
	w.WriteHeader(http.StatusOK)
}
