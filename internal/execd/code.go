// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package execd

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/errdefs"
	"github.com/corral-dev/corral/internal/execd/code"
	"github.com/corral-dev/corral/internal/execd/files"
)

// shellLanguage is the /code language that runs code as a shell command
// (as does no language at all), as OpenSandbox does.
const shellLanguage = "command"

// runCode runs code in a context's kernel: the one named by context.id,
// or the language's default context. Code without a language runs as a
// shell command. Failures before the stream starts are JSON errors; the
// stream is init, the kernel's output, then error or
// execution_complete. A client that goes away interrupts its execution.
func (s *Server) runCode(w http.ResponseWriter, r *http.Request) {
	var req api.RunCodeRequest
	if err := decode(r, &req, false); err != nil {
		writeError(w, err)
		return
	}
	var id, lang string
	if req.Context != nil {
		id, lang = strings.TrimSpace(req.Context.ID), strings.TrimSpace(req.Context.Language)
	}
	if id == "" && (lang == "" || lang == shellLanguage) {
		c, err := s.startCommand(api.RunCommandRequest{Command: req.Code})
		if err != nil {
			writeError(w, err)
			return
		}
		s.serveCommand(w, r, c, c.ID, cursors{}, false)
		return
	}
	if len(req.Code) > code.MaxCode {
		writeError(w, badRequest("code is %d bytes; at most %d are accepted", len(req.Code), code.MaxCode))
		return
	}
	var cx *code.Context
	var err error
	if id != "" {
		cx, err = s.code.Get(id)
	} else {
		cx, err = s.code.Default(r.Context(), lang)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	turn, err := cx.Queue()
	if err != nil {
		writeError(w, err)
		return
	}
	defer turn.Done()
	es := newEventStream(w)
	if err := es.write(api.ServerStreamEvent{Type: api.EventInit, Text: cx.ID}); err != nil {
		return
	}
	// Queued behind another execution: keep the stream alive.
	for {
		ok, err := turn.Wait(r.Context(), s.cfg.PingInterval)
		if err != nil {
			if r.Context().Err() == nil {
				_ = es.write(api.ServerStreamEvent{Type: api.EventError, Error: &api.ExecError{EName: "ContextDeleted", EValue: err.Error(), Traceback: []string{}}})
			}
			return
		}
		if ok {
			break
		}
		if es.write(pingEvent()) != nil {
			return
		}
	}
	pings := s.pingWhileQuiet(r.Context(), es)
	defer pings()
	turn.Run(r.Context(), req.Code, es.writeLocked)
}

// pingWhileQuiet sends a ping whenever the stream has been quiet for
// PingInterval, until the returned function is called.
func (s *Server) pingWhileQuiet(ctx context.Context, es *eventStream) func() {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(s.cfg.PingInterval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if es.quietFor() >= s.cfg.PingInterval && es.writeLocked(pingEvent()) != nil {
					return
				}
			}
		}
	}()
	return func() { cancel(); <-done }
}

// interruptCode interrupts a context's running execution (the id is the
// init event's text, the context id), or a running command.
func (s *Server) interruptCode(w http.ResponseWriter, r *http.Request) {
	id, err := query(r, "id")
	if err != nil {
		writeError(w, err)
		return
	}
	if _, err := s.code.Get(id); err == nil {
		if err := s.code.Interrupt(r.Context(), id); err != nil {
			writeError(w, err)
			return
		}
		w.WriteHeader(http.StatusOK)
		return
	}
	c, ok := s.table.Get(id)
	if !ok {
		writeError(w, errdefs.Newf(errdefs.ErrNotFound, api.CodeExecdContextNotFound, "no context or running code with id %s", id))
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
	cwd := req.Cwd
	if cwd != "" {
		abs, err := files.Resolve(cwd)
		if err != nil {
			writeError(w, err)
			return
		}
		cwd = abs
	}
	c, err := s.code.Create(r.Context(), req.Language, cwd)
	if err != nil {
		writeCodeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, c.Info())
}

// writeCodeError answers err, or nothing when the client has gone.
func writeCodeError(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
		return
	}
	writeError(w, err)
}

// listContexts lists the contexts of ?language= (all when it is missing
// or empty, as OpenSandbox's clients expect).
func (s *Server) listContexts(w http.ResponseWriter, r *http.Request) {
	out := []api.CodeContext{}
	for _, c := range s.code.List(r.URL.Query().Get("language")) {
		out = append(out, c.Info())
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) getContext(w http.ResponseWriter, r *http.Request) {
	c, err := s.code.Get(r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, c.Info())
}

func (s *Server) deleteContext(w http.ResponseWriter, r *http.Request) {
	if err := s.code.Delete(r.PathValue("id")); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// restartContext (a corral extension) gives a context a fresh kernel:
// the way back from a dead one.
func (s *Server) restartContext(w http.ResponseWriter, r *http.Request) {
	c, err := s.code.Restart(r.Context(), r.PathValue("id"))
	if err != nil {
		writeCodeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, c.Info())
}

// deleteContexts deletes every context of ?language=, the default one
// included; none is not an error.
func (s *Server) deleteContexts(w http.ResponseWriter, r *http.Request) {
	lang, err := query(r, "language")
	if err != nil {
		writeError(w, err)
		return
	}
	s.code.DeleteLanguage(lang)
	w.WriteHeader(http.StatusOK)
}
