// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

// Package console serves corral's web console: the files web/ builds
// (Vite, Preact, TypeScript), committed under dist/ and embedded, so that
// building corral never needs Node. The pages talk to the API from the
// same origin with the key in the API's header; the answers here carry a
// CSP that allows scripts, styles and connections from this origin only
// and no framing, and they set no cookie.
package console

import (
	"embed"
	"io/fs"
	"net/http"
	"path"
	"strings"
)

//go:embed dist
var dist embed.FS

// Prefix is where the console is served.
const Prefix = "/ui/"

// CSP is the console's Content-Security-Policy: nothing from another
// origin, no inline script, no plugins, no framing by anyone, no form
// posts, no <base>. Styles may be inline: the terminal (xterm.js) writes
// its theme and cell sizes into <style> elements; the pages never put
// markup from a sandbox into the document, so no one else can.
// connect-src 'self' covers the API's fetches, its event stream and (in
// CSP 3) WebSockets to this host.
const CSP = "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; font-src 'self'; " +
	"connect-src 'self'; manifest-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'; object-src 'none'"

// Handler serves the console under Prefix: its files, and index.html for
// any other path below it (the pages route by the location's hash).
func Handler() http.Handler {
	files, err := fs.Sub(dist, "dist")
	if err != nil {
		panic(err) // the embed is part of the binary
	}
	index, err := fs.ReadFile(files, "index.html")
	if err != nil {
		panic("console: dist/index.html is missing; run scripts/web.sh")
	}
	static := http.FileServerFS(files)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", CSP)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		h.Set("X-Frame-Options", "DENY")
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			h.Set("Allow", "GET, HEAD")
			http.Error(w, "the console's files are read with GET", http.StatusMethodNotAllowed)
			return
		}
		name := strings.TrimPrefix(path.Clean("/"+strings.TrimPrefix(r.URL.Path, Prefix)), "/")
		if name != "" && name != "index.html" {
			if st, err := fs.Stat(files, name); err == nil && !st.IsDir() {
				if strings.HasPrefix(name, "assets/") {
					// Their names carry a hash of their content.
					h.Set("Cache-Control", "public, max-age=31536000, immutable")
				}
				r2 := r.Clone(r.Context())
				r2.URL.Path = "/" + name
				static.ServeHTTP(w, r2)
				return
			}
			if strings.HasPrefix(name, "assets/") {
				http.NotFound(w, r)
				return
			}
		}
		h.Set("Cache-Control", "no-cache")
		h.Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write(index)
	})
}
