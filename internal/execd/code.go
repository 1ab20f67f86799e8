// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package execd

import (
	"net/http"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/errdefs"
)

func notSupportedLanguage(lang string) error {
	return errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeExecdNotSupported,
		"language %q needs a code interpreter kernel, which this sandbox does not run yet; run code without a language (as a shell command) or use /command", lang)
}

// runCode runs code without a language as a shell command, as OpenSandbox
// does; languages that need a Jupyter kernel are refused clearly.
func (s *Server) runCode(w http.ResponseWriter, r *http.Request) {
	var req api.RunCodeRequest
	if err := decode(r, &req, false); err != nil {
		writeError(w, err)
		return
	}
	if req.Context != nil && req.Context.Language != "" && req.Context.Language != "command" {
		writeError(w, notSupportedLanguage(req.Context.Language))
		return
	}
	c, err := s.startCommand(api.RunCommandRequest{Command: req.Code})
	if err != nil {
		writeError(w, err)
		return
	}
	s.serveCommand(w, r, c, c.ID, cursors{}, false)
}

func (s *Server) interruptCode(w http.ResponseWriter, r *http.Request) {
	id, err := query(r, "id")
	if err != nil {
		writeError(w, err)
		return
	}
	c, ok := s.table.Get(id)
	if !ok {
		writeError(w, errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeExecdContextNotFound, "no running code with id %s", id))
		return
	}
	if err := c.Interrupt(r.Context(), s.cfg.InterruptGrace); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusOK)
}

func (s *Server) createContext(w http.ResponseWriter, r *http.Request) {
	var req api.CodeContextRequest
	if err := decode(r, &req, false); err != nil {
		writeError(w, err)
		return
	}
	writeError(w, notSupportedLanguage(req.Language))
}

// listContexts answers an empty list: no kernel contexts exist yet.
func (s *Server) listContexts(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, []api.CodeContext{})
}

func (s *Server) deleteContexts(w http.ResponseWriter, r *http.Request) {
	if _, err := query(r, "language"); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusOK)
}

func (s *Server) contextNotFound(w http.ResponseWriter, r *http.Request) {
	writeError(w, errdefs.Newf(errdefs.ErrNotFound, api.CodeExecdContextNotFound, "context %s not found", r.PathValue("id")))
}
