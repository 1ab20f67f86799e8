// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package console

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

func get(t *testing.T, h http.Handler, method, path string) *http.Response {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
	return rec.Result()
}

// TestServesTheBuild: index.html for the pages, the built assets it
// names, each with the console's headers; no inline script anywhere.
func TestServesTheBuild(t *testing.T) {
	h := Handler()
	res := get(t, h, "GET", "/ui/")
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 || !strings.Contains(string(body), `<div id="app">`) || res.Header.Get("Content-Security-Policy") != CSP ||
		res.Header.Get("Cache-Control") != "no-cache" || res.Header.Get("Set-Cookie") != "" {
		t.Fatalf("GET /ui/ = %d %v\n%s", res.StatusCode, res.Header, body)
	}
	if regexp.MustCompile(`<script(?:\s[^>]*)?>\s*[^<\s]`).Match(body) || strings.Contains(string(body), "style=") {
		t.Fatalf("index.html has inline code:\n%s", body)
	}
	assets := regexp.MustCompile(`/ui/assets/[A-Za-z0-9._-]+`).FindAllString(string(body), -1)
	if len(assets) < 2 {
		t.Fatalf("index.html names %v", assets)
	}
	for _, a := range assets {
		res := get(t, h, "GET", a)
		if res.StatusCode != 200 || res.Header.Get("Content-Security-Policy") != CSP || !strings.Contains(res.Header.Get("Cache-Control"), "immutable") ||
			res.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s = %d %v", a, res.StatusCode, res.Header)
		}
	}
	// A page's own path is the app; a missing asset is not.
	if res := get(t, h, "GET", "/ui/sandboxes/x"); res.StatusCode != 200 {
		t.Errorf("a page path = %d", res.StatusCode)
	}
	for _, p := range []string{"/ui/assets/nope.js", "/ui/../../etc/passwd", "/ui/assets/../../console.go"} {
		res := get(t, h, "GET", p)
		b, _ := io.ReadAll(res.Body)
		if strings.Contains(string(b), "package console") || strings.Contains(string(b), "root:") {
			t.Errorf("GET %s served a file outside the build", p)
		}
	}
	if res := get(t, h, "POST", "/ui/"); res.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST = %d", res.StatusCode)
	}
}
