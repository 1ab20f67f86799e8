// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package execd

import (
	"net/http"
	"time"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/errdefs"
)

func (s *Server) routes() {
	m := s.mux
	m.HandleFunc("GET /ping", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	m.HandleFunc("GET "+api.PathExecdActivity, s.activity)

	m.HandleFunc("POST /command", s.runCommand)
	m.HandleFunc("DELETE /command", s.interruptCommand)
	// /command/status/{id}, /command/{id}/logs and /command/{id}/stream
	// overlap as mux patterns, so one handler tells them apart.
	m.HandleFunc("GET /command/{a}/{b}", s.commandRead)
	m.HandleFunc("GET "+api.PathExecdCommands, s.listCommands)

	m.HandleFunc("POST /session", s.createSession)
	m.HandleFunc("POST /session/{id}/run", s.runInSession)
	m.HandleFunc("DELETE /session/{id}", s.deleteSession)

	m.HandleFunc("POST /code", s.runCode)
	m.HandleFunc("DELETE /code", s.interruptCode)
	m.HandleFunc("POST /code/context", s.createContext)
	m.HandleFunc("GET /code/contexts", s.listContexts)
	m.HandleFunc("DELETE /code/contexts", s.deleteContexts)
	m.HandleFunc("GET /code/contexts/{id}", s.getContext)
	m.HandleFunc("DELETE /code/contexts/{id}", s.deleteContext)
	m.HandleFunc("POST /code/contexts/{id}/restart", s.restartContext)

	m.HandleFunc("GET /files/info", s.filesInfo)
	m.HandleFunc("DELETE /files", s.removeFiles)
	m.HandleFunc("POST /files/permissions", s.chmodFiles)
	m.HandleFunc("POST /files/mv", s.moveFiles)
	m.HandleFunc("GET /files/search", s.searchFiles)
	m.HandleFunc("POST /files/replace", s.replaceFiles)
	m.HandleFunc("POST /files/upload", s.uploadFiles)
	m.HandleFunc("GET /files/download", s.downloadFile)
	m.HandleFunc("GET /directories/list", s.listDirectory)
	m.HandleFunc("POST /directories", s.makeDirs)
	m.HandleFunc("DELETE /directories", s.removeDirs)
	m.HandleFunc("GET /directories/archive", s.downloadArchive)
	m.HandleFunc("PUT /directories/archive", s.uploadArchive)

	m.HandleFunc("GET /metrics", s.getMetrics)
	m.HandleFunc("GET /metrics/watch", s.watchMetrics)

	m.HandleFunc("POST /pty", s.createPTY)
	m.HandleFunc("GET /pty/{id}", s.ptyStatus)
	m.HandleFunc("DELETE /pty/{id}", s.deletePTY)
	m.HandleFunc("GET /pty/{id}/ws", s.attachPTY)

	// E2B's protocols: envd (its port 49983) and the code interpreter
	// (49999), which the server reaches under these prefixes.
	m.Handle(api.PathExecdE2BEnvd+"/", http.StripPrefix(api.PathExecdE2BEnvd, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.envd().Handler().ServeHTTP(w, r)
	})))
	m.Handle(api.PathExecdE2BCode+"/", http.StripPrefix(api.PathExecdE2BCode, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.interp().Handler().ServeHTTP(w, r)
	})))

	m.HandleFunc("/proxy/{port}", s.proxy.serve)
	m.HandleFunc("/proxy/{port}/{path...}", s.proxy.serve)

	m.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, errdefs.Newf(errdefs.ErrNotFound, api.CodeExecdRouteNotFound, "no route for %s %s", r.Method, r.URL.Path))
	})
	_ = api.ExecdPort
}

func (s *Server) commandRead(w http.ResponseWriter, r *http.Request) {
	a, b := r.PathValue("a"), r.PathValue("b")
	switch {
	case a == "status":
		s.commandStatus(w, r, b)
	case b == "logs":
		s.commandLogs(w, r, a)
	case b == "stream":
		s.resumeCommand(w, r, a)
	default:
		writeError(w, errdefs.Newf(errdefs.ErrNotFound, api.CodeExecdRouteNotFound, "no route for %s %s", r.Method, r.URL.Path))
	}
}

// activity answers the server's idle policy: when execd last served a
// request, how many are open, how many commands run.
func (s *Server) activity(w http.ResponseWriter, _ *http.Request) {
	out := api.ExecdActivity{InFlight: s.inFlight.Load(), Running: s.table.Running()}
	if n := s.lastActive.Load(); n > 0 {
		out.LastActivity = time.Unix(0, n).UTC()
	}
	writeJSON(w, http.StatusOK, out)
}
