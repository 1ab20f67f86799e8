// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/errdefs"
	"github.com/corral-dev/corral/internal/sandbox"
)

// consoleLimit bounds what the logs route reads of a console.
const consoleLimit = 1 << 20

var diagnosticScopes = []string{api.DiagnosticScopeContainer, api.DiagnosticScopeLifecycle, api.DiagnosticScopeRuntime,
	api.DiagnosticScopeNetwork, api.DiagnosticScopeProcess, api.DiagnosticScopeAll}

// diagnosticScope reads ?scope: "" for the legacy plain-text answer,
// else one of the scopes served (a known one that is not is a 501).
func diagnosticScope(r *http.Request, kind string, served ...string) (string, error) {
	if !r.URL.Query().Has("scope") {
		return "", nil
	}
	scope := r.URL.Query().Get("scope")
	if !slices.Contains(diagnosticScopes, scope) {
		return "", invalid("scope %q: want one of %s", scope, strings.Join(diagnosticScopes, ", "))
	}
	if !slices.Contains(served, scope) {
		return "", errdefs.Newf(errdefs.ErrNotImplemented, api.CodeDiagnosticsNotImplemented,
			"scope %s: this server has no %s of that scope; it serves %s", scope, kind, strings.Join(served, ", "))
	}
	return scope, nil
}

// queryInt reads an optional whole-number query parameter in [lo, hi].
func queryInt(r *http.Request, name string, def, lo, hi int) (int, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return 0, invalid("%s %q: must be a whole number from %d to %d", name, v, lo, hi)
	}
	return n, nil
}

// diagnosticLogs answers with what the sandbox's entrypoint printed (its
// console, as the runtime keeps it): with a scope, the diagnostics API's
// descriptor with the content inline; without, the last ?tail lines as
// text, as OpenSandbox's server did before the diagnostics API.
func (s *Server) diagnosticLogs(w http.ResponseWriter, r *http.Request) {
	scope, err := diagnosticScope(r, "logs", api.DiagnosticScopeContainer, api.DiagnosticScopeAll)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	tail, err := queryInt(r, "tail", 100, 1, 10000)
	if err == nil && r.URL.Query().Get("since") != "" {
		err = invalid("since: a sandbox's console carries no times; use tail")
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	id := r.PathValue("id")
	out, truncated, err := s.mgr.Console(r.Context(), tenant(r), id, consoleLimit)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if scope == "" {
		lines := strings.SplitAfter(string(out), "\n")
		if lines[len(lines)-1] == "" {
			lines = lines[:len(lines)-1]
		}
		writeLegacy(w, strings.Join(lines[max(0, len(lines)-tail):], ""))
		return
	}
	d := api.DiagnosticContent{SandboxID: id, Kind: "logs", Scope: scope, Delivery: "inline",
		ContentType: "text/plain; charset=utf-8", Content: string(out), ContentLength: len(out), Truncated: truncated}
	if truncated {
		d.Warnings = append(d.Warnings, fmt.Sprintf("only the last %d bytes are kept here", consoleLimit))
	}
	writeJSON(w, http.StatusOK, d)
}

// diagnosticEvents answers with the sandbox's event log, one line an
// event: lifecycle events (scope lifecycle), the egress enforcer's and
// the secrets socket's decisions (network), or both (all); without a
// scope, the last ?limit events as text.
func (s *Server) diagnosticEvents(w http.ResponseWriter, r *http.Request) {
	scope, err := diagnosticScope(r, "events", api.DiagnosticScopeLifecycle, api.DiagnosticScopeNetwork, api.DiagnosticScopeAll)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	def, hi := 500, 1000
	if scope == "" {
		def, hi = 50, 500
	}
	limit, err := queryInt(r, "limit", def, 1, hi)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	network := func(ev *sandbox.Event) bool {
		return strings.HasPrefix(ev.Type, "egress.") || strings.HasPrefix(ev.Type, "secret.")
	}
	keep := func(*sandbox.Event) bool { return true }
	switch scope {
	case api.DiagnosticScopeLifecycle:
		keep = func(ev *sandbox.Event) bool { return !network(ev) }
	case api.DiagnosticScopeNetwork:
		keep = network
	}
	id := r.PathValue("id")
	evs, truncated, err := s.mgr.LastEvents(r.Context(), tenant(r), id, limit, keep)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var b strings.Builder
	for _, ev := range evs {
		fmt.Fprintf(&b, "%s %s", ev.At.UTC().Format(time.RFC3339Nano), ev.Type)
		for _, f := range []string{ev.State, ev.Reason, ev.Message} {
			if f != "" {
				b.WriteString(" " + strings.ReplaceAll(f, "\n", " "))
			}
		}
		b.WriteString("\n")
	}
	if scope == "" {
		writeLegacy(w, b.String())
		return
	}
	d := api.DiagnosticContent{SandboxID: id, Kind: "events", Scope: scope, Delivery: "inline",
		ContentType: "text/plain; charset=utf-8", Content: b.String(), ContentLength: b.Len(), Truncated: truncated}
	if truncated {
		d.Warnings = append(d.Warnings, fmt.Sprintf("only the last %d events are shown (limit)", limit))
	}
	writeJSON(w, http.StatusOK, d)
}

// writeLegacy is the plain-text answer of the routes without a scope,
// which OpenSandbox marks deprecated.
func writeLegacy(w http.ResponseWriter, text string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Deprecation", "true")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte(text))
}
