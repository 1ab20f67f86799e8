// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

// Package codeinterp serves E2B's code-interpreter protocol (what E2B's
// template serves on port 49999: POST /execute answering one JSON object
// per line, and /contexts) from execd's own kernel layer, the same
// kernels and contexts OpenSandbox's /code routes use. The line protocol
// is small and has no library; it is written here. Only internal/execd
// imports it.
package codeinterp

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/errdefs/errhttp"
	"github.com/corral-dev/corral/internal/execd/code"
	"github.com/corral-dev/corral/internal/logctx"
)

// Service serves the protocol over a code.Manager.
type Service struct {
	code *code.Manager
	log  *slog.Logger
	mux  *http.ServeMux
	// wait is how long a queued execution waits between checks that its
	// client is still there.
	wait time.Duration
}

// New prepares a Service.
func New(m *code.Manager, log *slog.Logger) *Service {
	if log == nil {
		log = logctx.Discard()
	}
	s := &Service{code: m, log: log, mux: http.NewServeMux(), wait: time.Second}
	s.mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`"OK"`))
	})
	s.mux.HandleFunc("POST /execute", s.execute)
	s.mux.HandleFunc("POST /contexts", s.createContext)
	s.mux.HandleFunc("GET /contexts", s.listContexts)
	s.mux.HandleFunc("POST /contexts/{id}/restart", s.restartContext)
	s.mux.HandleFunc("DELETE /contexts/{id}", s.deleteContext)
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("the code interpreter has no route for %s %s", r.Method, r.URL.Path))
	})
	return s
}

// Handler serves the protocol's routes.
func (s *Service) Handler() http.Handler { return s.mux }

// writeError answers {"code", "message"} with code equal to the status.
func writeError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"code": status, "message": msg})
}

// writeErr answers a corral error with its status.
func writeErr(w http.ResponseWriter, err error) {
	status, _, msg := errhttp.FromError(err)
	if status == 499 {
		status = http.StatusBadRequest
	}
	writeError(w, status, msg)
}

// language normalizes a language name as E2B's clients give it.
func language(l string) string {
	switch l = strings.ToLower(strings.TrimSpace(l)); l {
	case "js":
		return "javascript"
	case "ts":
		return "typescript"
	case "":
		return "python"
	}
	return l
}

// contextInfo is E2B's Context.
type contextInfo struct {
	ID       string `json:"id"`
	Language string `json:"language"`
	Cwd      string `json:"cwd"`
}

func info(c *code.Context) contextInfo {
	return contextInfo{ID: c.ID, Language: c.Language, Cwd: c.Cwd}
}

func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, code.MaxCode+1<<20))
	if err := dec.Decode(v); err != nil {
		writeError(w, http.StatusBadRequest, "the request body is not valid JSON for this route: "+err.Error())
		return false
	}
	return true
}

func (s *Service) createContext(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Language string `json:"language"`
		Cwd      string `json:"cwd"`
	}
	if r.ContentLength != 0 && !decode(w, r, &in) {
		return
	}
	c, err := s.code.Create(r.Context(), language(in.Language), in.Cwd)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, info(c))
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func (s *Service) listContexts(w http.ResponseWriter, _ *http.Request) {
	out := []contextInfo{}
	for _, c := range s.code.List("") {
		out = append(out, info(c))
	}
	writeJSON(w, out)
}

func (s *Service) restartContext(w http.ResponseWriter, r *http.Request) {
	if _, err := s.code.Restart(r.Context(), r.PathValue("id")); err != nil {
		writeErr(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Service) deleteContext(w http.ResponseWriter, r *http.Request) {
	if err := s.code.Delete(r.PathValue("id")); err != nil {
		writeErr(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// executeRequest is POST /execute's body.
type executeRequest struct {
	Code      string            `json:"code"`
	ContextID string            `json:"context_id"`
	Language  string            `json:"language"`
	EnvVars   map[string]string `json:"env_vars"`
}

func (s *Service) execute(w http.ResponseWriter, r *http.Request) {
	var in executeRequest
	if !decode(w, r, &in) {
		return
	}
	if in.ContextID != "" && in.Language != "" {
		writeError(w, http.StatusBadRequest, "give context_id or language, not both")
		return
	}
	if len(in.EnvVars) > 0 {
		writeError(w, http.StatusBadRequest, "env_vars: corral's code interpreter does not set environment variables for one execution; set them on the sandbox (envs at create) instead")
		return
	}
	if len(in.Code) > code.MaxCode {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("code is %d bytes; at most %d are accepted", len(in.Code), code.MaxCode))
		return
	}
	var cx *code.Context
	var err error
	if in.ContextID != "" {
		cx, err = s.code.Get(in.ContextID)
	} else {
		cx, err = s.code.Default(r.Context(), language(in.Language))
	}
	if err != nil {
		writeErr(w, err)
		return
	}
	turn, err := cx.Queue()
	if err != nil {
		writeErr(w, err)
		return
	}
	defer turn.Done()
	// The answer starts at once: the client's request timeout covers only
	// its headers, and an execution may wait behind another.
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	out := &lineWriter{w: w, rc: http.NewResponseController(w)}
	_ = out.rc.Flush()
	for {
		ok, err := turn.Wait(r.Context(), s.wait)
		if err != nil {
			if r.Context().Err() == nil {
				_ = out.write(errorLine("ContextDeleted", err.Error(), ""))
			}
			return
		}
		if ok {
			break
		}
	}
	turn.Run(r.Context(), in.Code, func(evs ...api.ServerStreamEvent) error {
		var lines []any
		for _, ev := range evs {
			if l := convert(ev); l != nil {
				lines = append(lines, l)
			}
		}
		return out.write(lines...)
	})
	_ = out.write(map[string]string{"type": "end_of_execution"})
}

// lineWriter writes JSON lines and flushes after each batch.
type lineWriter struct {
	mu sync.Mutex
	w  http.ResponseWriter
	rc *http.ResponseController
}

func (l *lineWriter) write(lines ...any) error {
	if len(lines) == 0 {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	var b []byte
	for _, line := range lines {
		j, err := json.Marshal(line)
		if err != nil {
			return err
		}
		b = append(append(b, j...), '\n')
	}
	if _, err := l.w.Write(b); err != nil {
		return err
	}
	return l.rc.Flush()
}

func errorLine(name, value, traceback string) map[string]any {
	return map[string]any{"type": "error", "name": name, "value": value, "traceback": traceback}
}

// mimeFields maps a MIME type to its field of a result line.
var mimeFields = map[string]string{
	"text/plain": "text", "text/html": "html", "text/markdown": "markdown", "image/svg+xml": "svg",
	"image/png": "png", "image/jpeg": "jpeg", "application/pdf": "pdf", "text/latex": "latex",
	"application/json": "json", "application/javascript": "javascript", "e2b/data": "data", "e2b/chart": "chart",
}

// jsonFields are the fields whose values are JSON, not text.
var jsonFields = map[string]bool{"json": true, "data": true, "chart": true}

// convert turns one of the kernel layer's events into a line (nil for
// none).
func convert(ev api.ServerStreamEvent) any {
	now := time.Now().UnixNano()
	switch ev.Type {
	case api.EventStdout, api.EventStderr:
		return map[string]any{"type": ev.Type, "text": ev.Text, "timestamp": now}
	case api.EventExecutionCount:
		return map[string]any{"type": "number_of_executions", "execution_count": ev.ExecutionCount}
	case api.EventError:
		if ev.Error == nil {
			return nil
		}
		tb := ev.Error.TracebackText
		if tb == "" {
			tb = strings.Join(ev.Error.Traceback, "\n")
		}
		return errorLine(ev.Error.EName, ev.Error.EValue, tb)
	case api.EventResult:
		line := map[string]any{"type": "result", "is_main_result": ev.MainResult}
		extra := map[string]any{}
		for mime, v := range ev.Results {
			if mime == "text" {
				continue
			}
			field, known := mimeFields[mime]
			s, _ := v.(string)
			if !known {
				if mime == api.CodeFilesKey {
					extra["corral_files"] = json.RawMessage(s)
					continue
				}
				extra[mime] = v
				continue
			}
			if jsonFields[field] {
				var j any
				if json.Unmarshal([]byte(s), &j) == nil {
					line[field] = j
					continue
				}
			}
			line[field] = v
		}
		if len(extra) > 0 {
			line["extra"] = extra
		}
		return line
	}
	return nil
}
