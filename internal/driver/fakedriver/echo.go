// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package fakedriver

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
)

// EchoUpgrade is the Upgrade protocol the echo handler accepts: after the
// 101 it echoes every byte back, which exercises a proxy's upgrade path.
const EchoUpgrade = "corral-echo"

// Echo is what the echo handler answers to an ordinary request.
type Echo struct {
	SandboxID string              `json:"sandboxId"`
	Port      int                 `json:"port"`
	Method    string              `json:"method"`
	Path      string              `json:"path"`
	Query     string              `json:"query,omitempty"`
	Headers   map[string][]string `json:"headers"`
	Body      string              `json:"body,omitempty"`
}

func echoHandler(id string, port int) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/ping" {
			w.WriteHeader(http.StatusOK)
			return
		}
		if strings.EqualFold(r.Header.Get("Upgrade"), EchoUpgrade) {
			echoUpgrade(w)
			return
		}
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(Echo{
			SandboxID: id, Port: port, Method: r.Method, Path: r.URL.Path,
			Query: r.URL.RawQuery, Headers: r.Header, Body: string(body),
		})
	})
}

func echoUpgrade(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		http.Error(w, "no hijack", http.StatusInternalServerError)
		return
	}
	conn, brw, err := hj.Hijack()
	if err != nil {
		return
	}
	defer conn.Close()
	_, _ = brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: " + EchoUpgrade + "\r\n\r\n")
	if brw.Flush() != nil {
		return
	}
	_, _ = io.Copy(conn, brw)
}
