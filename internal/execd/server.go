// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

// Package execd is the in-sandbox daemon: the OpenSandbox execd contract
// (commands streamed as events, background commands with byte-cursor logs,
// bash sessions, files and directories, metrics, PTYs over WebSocket, a
// proxy to local ports) plus corral's durable command streams. It owns the
// HTTP layer and authentication; process and files own the work. Only
// internal/cli constructs it.
package execd

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/errdefs"
	"github.com/corral-dev/corral/errdefs/errhttp"
	"github.com/corral-dev/corral/internal/execd/code"
	"github.com/corral-dev/corral/internal/execd/codeinterp"
	"github.com/corral-dev/corral/internal/execd/envd"
	"github.com/corral-dev/corral/internal/execd/process"
	"github.com/corral-dev/corral/internal/insandbox"
	"github.com/corral-dev/corral/internal/logctx"
	"github.com/corral-dev/corral/internal/verifier"
)

// DefaultListen is where execd listens inside a sandbox.
const DefaultListen = insandbox.ExecdListen

// Config configures a Server. The zero value listens on DefaultListen with
// no access token and keeps its state under the system temp directory.
type Config struct {
	Listen string
	// AccessToken, when set, is required in X-EXECD-ACCESS-TOKEN on every
	// route but /ping. It is the token's verifier (internal/verifier), as
	// runtimes hand it over, or the token itself.
	AccessToken string
	// AccessTokenFile, when set, holds the token or its verifier instead
	// (re-read when the file changes; a missing or empty file lets
	// nothing in): a warm-pool sandbox gets its token when it is claimed.
	AccessTokenFile string
	// StateDir holds retained command output.
	StateDir string
	// EnvFile is a file of KEY=VALUE lines the runtime gives every
	// command's environment (a warm sandbox's, once claimed).
	EnvFile string
	// UserEnvFile is OpenSandbox's EXECD_ENVS: a file of KEY=VALUE lines
	// the sandbox's entrypoint may write, merged after EnvFile into the
	// environment of the commands (and kernels) of a user that may (root,
	// or the file's owner).
	UserEnvFile string
	Retention   process.Retention
	Logger      *slog.Logger
	// PingInterval is how often an idle stream gets a ping (default 3s).
	PingInterval time.Duration
	// InterruptGrace is the time between SIGTERM and SIGKILL (default 3s).
	InterruptGrace time.Duration
	// CodeIdleTimeout, when positive, shuts down code contexts unused for
	// that long.
	CodeIdleTimeout time.Duration
	// CodeSpecWait is how long after start a code context waits for the
	// kernelspec of a known language to appear (default 60s).
	CodeSpecWait time.Duration
	// CodeQueueLimit is how many executions may wait behind the running
	// one in a code context (default 16).
	CodeQueueLimit int
	// CodeInterruptTimeout is how long an interrupted execution may go on
	// before its kernel is stopped (default 10s).
	CodeInterruptTimeout time.Duration
	// CodeMaxContexts bounds the code contexts alive at once (default 32).
	CodeMaxContexts int
}

// Server is a running execd.
type Server struct {
	cfg      Config
	log      *slog.Logger
	table    *process.Table
	sessions *process.Sessions
	ptys     *process.PTYs
	code     *code.Manager
	// envd and interp serve E2B's protocols; made at their first
	// request, so a sandbox no E2B client reaches does not pay for them.
	envd   func() *envd.Service
	interp func() *codeinterp.Service
	// envdMade is set once envd was made (Close then closes it).
	envdMade atomic.Bool
	metrics  *sampler
	mux      *http.ServeMux
	proxy    *localProxy
	// baseEnv is execd's own environment without its secrets.
	baseEnv []string
	workdir string
	token   tokenFile
	// lastActive is when a request last ended (unix ns), inFlight how
	// many are open: what the server's idle policy asks for.
	lastActive atomic.Int64
	inFlight   atomic.Int64
}

// tokenFile caches the token of Config.AccessTokenFile, re-reading it when
// its inode, size or modification time changes (writers replace it by
// rename, so a new token is always a new inode).
type tokenFile struct {
	mu    sync.Mutex
	path  string
	stamp [3]int64
	value string
}

// get returns the current token; "" means nothing may pass.
func (t *tokenFile) get() string {
	fi, err := os.Stat(t.path)
	t.mu.Lock()
	defer t.mu.Unlock()
	if err != nil {
		t.value, t.stamp = "", [3]int64{}
		return ""
	}
	stamp := [3]int64{fi.Size(), fi.ModTime().UnixNano(), 0}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		stamp[2] = int64(st.Ino)
	}
	if stamp != t.stamp {
		b, err := os.ReadFile(t.path)
		if err != nil {
			return ""
		}
		t.value, t.stamp = strings.TrimSpace(string(b)), stamp
	}
	return t.value
}

// New prepares a Server.
func New(cfg Config) (*Server, error) {
	if cfg.Listen == "" {
		cfg.Listen = DefaultListen
	}
	if cfg.StateDir == "" {
		cfg.StateDir = filepath.Join(os.TempDir(), "corral-execd")
	}
	if cfg.Logger == nil {
		cfg.Logger = logctx.Discard()
	}
	if cfg.PingInterval <= 0 {
		cfg.PingInterval = 3 * time.Second
	}
	if cfg.InterruptGrace <= 0 {
		cfg.InterruptGrace = 3 * time.Second
	}
	table, err := process.NewTable(filepath.Join(cfg.StateDir, "commands"), cfg.Retention)
	if err != nil {
		return nil, fmt.Errorf("execd state dir: %w", err)
	}
	wd, err := os.Getwd()
	if err != nil {
		wd = "/"
	}
	s := &Server{
		cfg: cfg, log: cfg.Logger, table: table, sessions: process.NewSessions(table), ptys: process.NewPTYs(),
		metrics: newSampler(), mux: http.NewServeMux(), baseEnv: insandbox.UserEnv(os.Environ()), workdir: wd, token: tokenFile{path: cfg.AccessTokenFile},
	}
	s.code = code.New(code.Config{
		Env: func() []string { return s.env(nil, os.Geteuid()) }, Workdir: wd, StateDir: filepath.Join(cfg.StateDir, "code"),
		SpecWait: cfg.CodeSpecWait, IdleTimeout: cfg.CodeIdleTimeout, QueueLimit: cfg.CodeQueueLimit, InterruptTimeout: cfg.CodeInterruptTimeout, MaxContexts: cfg.CodeMaxContexts, Logger: cfg.Logger,
	})
	s.envd = sync.OnceValue(func() *envd.Service {
		s.envdMade.Store(true)
		return envd.New(envd.Config{Table: table, Env: func(uid int) []string { return s.env(nil, uid) }, Workdir: wd, Logger: cfg.Logger})
	})
	s.interp = sync.OnceValue(func() *codeinterp.Service { return codeinterp.New(s.code, cfg.Logger) })
	s.proxy = newLocalProxy(s)
	s.routes()
	return s, nil
}

// Handler returns the HTTP handler.
func (s *Server) Handler() http.Handler { return http.HandlerFunc(s.serveHTTP) }

// Run listens and serves until ctx ends, then stops every command, session
// and PTY it started.
func (s *Server) Run(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.cfg.Listen)
	if err != nil {
		return fmt.Errorf("execd listen: %w", err)
	}
	return s.Serve(ctx, ln)
}

// Serve serves on ln until ctx ends.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	hs := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 30 * time.Second,
		ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelWarn)}
	var wg sync.WaitGroup
	bg, stop := context.WithCancel(ctx)
	wg.Go(func() { s.table.Run(bg, time.Minute) })
	wg.Go(func() { s.code.Run(bg) })
	errc := make(chan error, 1)
	wg.Go(func() { errc <- hs.Serve(ln) })
	s.log.InfoContext(ctx, "execd serving", "listen", ln.Addr().String(), "auth", s.cfg.AccessToken != "" || s.cfg.AccessTokenFile != "")
	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	_ = hs.Shutdown(sctx)
	_ = hs.Close()
	stop()
	s.ptys.Close()
	if s.envdMade.Load() {
		s.envd().Close()
	}
	s.code.Close()
	s.sessions.Close()
	wg.Wait()
	if cerr := s.table.Close(); cerr != nil {
		s.log.WarnContext(ctx, "remove command state", "err", cerr)
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	// Every answer carries a request id, the caller's if it sent a sane
	// one, for error messages and logs.
	id := r.Header.Get(api.HeaderRequestID)
	if !api.ValidRequestID(id) {
		id = newRequestID()
	}
	w.Header().Set(api.HeaderRequestID, id)
	if (s.cfg.AccessToken != "" || s.cfg.AccessTokenFile != "") && r.URL.Path != "/ping" {
		want := s.cfg.AccessToken
		if s.cfg.AccessTokenFile != "" {
			want = s.token.get()
		}
		if !verifier.Match(want, r.Header.Get(api.HeaderExecdToken)) {
			writeError(w, errdefs.New(errdefs.ErrUnauthenticated, api.CodeExecdUnauthorized,
				"invalid or missing header X-EXECD-ACCESS-TOKEN"))
			return
		}
	}
	observe := r.Method == http.MethodGet && r.Header.Get(api.HeaderObserve) == "1"
	if r.URL.Path != api.PathExecdActivity && r.URL.Path != "/ping" && !observe {
		s.inFlight.Add(1)
		defer func() {
			s.lastActive.Store(time.Now().UnixNano())
			s.inFlight.Add(-1)
		}()
	}
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			s.log.ErrorContext(r.Context(), "execd handler panicked", "panic", v, "path", r.URL.Path)
			writeError(w, fmt.Errorf("internal error"))
		}
	}()
	s.mux.ServeHTTP(w, r)
}

// writeError answers err as {"code","message"}.
func writeError(w http.ResponseWriter, err error) {
	writeErrorStatus(w, 0, err)
}

// writeErrorStatus answers err with a status the contract fixes (0: the
// kind's); the Corral-Error-Kind header still names the true kind, so
// corral's clients see, say, a missing command as not found even where
// the contract answers 400.
func writeErrorStatus(w http.ResponseWriter, status int, err error) {
	st, code, msg := errhttp.FromError(err)
	if status == 0 {
		status = st
	}
	if status == 499 {
		status = http.StatusBadRequest
	}
	if k := errhttp.KindName(err); k != "" {
		w.Header().Set(errhttp.HeaderKind, k)
	}
	writeJSON(w, status, api.ErrorResponse{Code: code, Message: msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// badRequest is a user-facing 400 with execd's request-body code.
func badRequest(format string, args ...any) error {
	return errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeExecdInvalidRequestBody, format, args...)
}

// decode reads a JSON body (at most 16 MiB) into v; optional allows an
// empty body.
func decode(r *http.Request, v any, optional bool) error {
	b, err := io.ReadAll(io.LimitReader(r.Body, 16<<20+1))
	if err != nil {
		return badRequest("could not read the request body")
	}
	if len(b) > 16<<20 {
		return badRequest("the request body is larger than 16 MiB")
	}
	if len(strings.TrimSpace(string(b))) == 0 {
		if optional {
			return nil
		}
		return badRequest("a JSON request body is required")
	}
	if err := json.Unmarshal(b, v); err != nil {
		return badRequest("the request body is not valid JSON for this route: %v", err)
	}
	return nil
}

// query returns a required query parameter.
func query(r *http.Request, name string) (string, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return "", errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeExecdMissingQuery, "query parameter %q is required", name)
	}
	return v, nil
}

// newRequestID returns a random request id.
func newRequestID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
