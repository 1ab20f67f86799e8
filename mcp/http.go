// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package mcp

import (
	"context"
	"crypto/subtle"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	sdkmcp "github.com/modelcontextprotocol/go-sdk/mcp"
)

// ServeStdio serves one session over standard input and output until the
// client goes away or ctx ends, then deletes the session's sandboxes
// (unless the policy keeps them).
func ServeStdio(ctx context.Context, cfg Config) error {
	s := NewSession(cfg)
	err := s.Server().Run(ctx, &sdkmcp.StdioTransport{})
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	s.Close(cctx)
	if errors.Is(err, context.Canceled) && ctx.Err() != nil {
		return nil
	}
	return err
}

// HTTPConfig configures the streamable HTTP transport.
type HTTPConfig struct {
	Config
	// APIKey is required of every request, as "Authorization: Bearer KEY"
	// or "X-API-Key: KEY". Empty refuses every request.
	APIKey string
	// AllowedOrigins are the browser origins (scheme://host[:port]) that
	// may call; a request with any other Origin header is refused.
	AllowedOrigins []string
	// SessionTimeout ends a session idle this long (and deletes its
	// sandboxes); 0 means 30 minutes.
	SessionTimeout time.Duration
}

// Hub serves MCP over streamable HTTP: each MCP session is a Session of
// its own, with its own budget and sandboxes.
type Hub struct {
	cfg     HTTPConfig
	srv     *sdkmcp.Server
	handler http.Handler

	mu       sync.Mutex
	sessions map[*sdkmcp.ServerSession]*Session
	closed   bool
	wg       sync.WaitGroup
}

// NewHub returns the HTTP handler of `corral mcp --transport http`.
func NewHub(cfg HTTPConfig) *Hub {
	if cfg.SessionTimeout == 0 {
		cfg.SessionTimeout = 30 * time.Minute
	}
	h := &Hub{cfg: cfg, sessions: map[*sdkmcp.ServerSession]*Session{}}
	pol := cfg.Policy
	srv := newServer(&pol, cfg.Version, h.session)
	stream := sdkmcp.NewStreamableHTTPHandler(func(*http.Request) *sdkmcp.Server { return srv }, &sdkmcp.StreamableHTTPOptions{
		SessionTimeout:      cfg.SessionTimeout,
		MaxRequestBodyBytes: int64(2*pol.Limits.FileBytes + 1<<20), // a base64 file_write and its envelope
	})
	h.srv, h.handler = srv, h.guard(stream)
	return h
}

// ServeHTTP checks the key and the origin, then serves MCP.
func (h *Hub) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.handler.ServeHTTP(w, r) }

func (h *Hub) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if o := r.Header.Get("Origin"); o != "" && !slices.Contains(h.cfg.AllowedOrigins, strings.TrimSuffix(o, "/")) {
			http.Error(w, "Forbidden: origin "+o+" is not allowed (corral mcp --allow-origin)", http.StatusForbidden)
			return
		}
		key := r.Header.Get("X-API-Key")
		if b, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
			key = strings.TrimSpace(b)
		}
		if h.cfg.APIKey == "" || subtle.ConstantTimeCompare([]byte(key), []byte(h.cfg.APIKey)) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="corral mcp"`)
			http.Error(w, "Unauthorized: send the key as Authorization: Bearer KEY", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// session is the Session of a call's MCP session, made at its first call
// and closed (its sandboxes deleted) when the MCP session ends.
func (h *Hub) session(req *sdkmcp.CallToolRequest) *Session {
	h.mu.Lock()
	defer h.mu.Unlock()
	if s, ok := h.sessions[req.Session]; ok {
		return s
	}
	s := NewSession(h.cfg.Config)
	h.sessions[req.Session] = s
	if h.closed {
		return s
	}
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		_ = req.Session.Wait()
		h.end(req.Session)
	}()
	return s
}

func (h *Hub) end(ss *sdkmcp.ServerSession) {
	h.mu.Lock()
	s := h.sessions[ss]
	delete(h.sessions, ss)
	h.mu.Unlock()
	if s != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		s.Close(ctx)
	}
}

// Close ends every session, those that never called a tool too, and
// deletes their sandboxes.
func (h *Hub) Close() {
	h.mu.Lock()
	h.closed = true
	h.mu.Unlock()
	for ss := range h.srv.Sessions() {
		_ = ss.Close()
	}
	h.wg.Wait()
}
