// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

// Package envd serves E2B's in-sandbox protocol from execd: the
// process.Process and filesystem.Filesystem Connect services (JSON and
// binary codecs, through connectrpc.com/connect and the code generated
// from internal/e2b/envd), GET /health and GET/POST /files, with E2B's
// semantics: a client that goes away does not kill its process, Connect
// re-attaches to one (replaying its retained output from the start),
// streams carry keepalives, a user named in Basic auth runs the process
// and owns the files it writes.
//
// Authentication is not this package's: execd checks its own token on
// every request, and the server that forwards E2B's clients checks the
// sandbox's envd access token before it does. Only internal/execd
// imports it.
package envd

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"connectrpc.com/connect"

	"github.com/corral-dev/corral/internal/e2b/envd/filesystem/filesystemconnect"
	"github.com/corral-dev/corral/internal/e2b/envd/process/processconnect"
	"github.com/corral-dev/corral/internal/execd/process"
	"github.com/corral-dev/corral/internal/logctx"
)

// Config configures a Service.
type Config struct {
	// Table runs and retains the processes (execd's own table).
	Table *process.Table
	// Env returns the environment a process of uid starts from: execd's
	// own without its secrets, then the sandbox's.
	Env func(uid int) []string
	// Workdir is where a process of the default user starts, and what
	// relative paths of the default user resolve against.
	Workdir string
	// KeepaliveMax bounds the time between two events of a stream
	// (default 50 s); a client's Keepalive-Ping-Interval shortens it.
	KeepaliveMax time.Duration
	Logger       *slog.Logger
}

// Service is envd's protocol over one execd.
type Service struct {
	cfg Config
	log *slog.Logger
	mux *http.ServeMux

	// mu guards procs and watchers.
	mu       sync.Mutex
	procs    map[uint32]*proc
	watchers map[string]*pollWatcher
}

// New prepares a Service.
func New(cfg Config) *Service {
	if cfg.KeepaliveMax <= 0 {
		cfg.KeepaliveMax = 50 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = logctx.Discard()
	}
	if cfg.Workdir == "" {
		cfg.Workdir = "/"
	}
	s := &Service{cfg: cfg, log: cfg.Logger, mux: http.NewServeMux(), procs: map[uint32]*proc{}, watchers: map[string]*pollWatcher{}}
	path, h := processconnect.NewProcessHandler(&processService{s})
	s.mux.Handle(path, h)
	path, h = filesystemconnect.NewFilesystemHandler(&filesystemService{s})
	s.mux.Handle(path, h)
	s.mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	s.mux.HandleFunc("GET /files", s.download)
	s.mux.HandleFunc("POST /files", s.upload)
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeHTTPError(w, http.StatusNotFound, fmt.Sprintf("envd has no route for %s %s", r.Method, r.URL.Path))
	})
	return s
}

// Handler serves envd's routes.
func (s *Service) Handler() http.Handler { return s.mux }

// Close stops the polling watchers.
func (s *Service) Close() {
	s.mu.Lock()
	ws := s.watchers
	s.watchers = map[string]*pollWatcher{}
	s.mu.Unlock()
	for _, w := range ws {
		w.close()
	}
}

// identity is who a request acts as: the user it names in Basic auth, or
// execd's own user.
type identity struct {
	// cred is nil for execd's own user.
	cred     *syscall.Credential
	uid, gid int
	name     string
	home     string
}

// identityFrom resolves the user a request names (E2B sends
// "Authorization: Basic base64(user:)"); none means execd's own user. A
// named user must exist in the sandbox.
func (s *Service) identityFrom(h http.Header, username string) (identity, error) {
	if username == "" {
		if a := h.Get("Authorization"); len(a) > 6 && strings.EqualFold(a[:6], "basic ") {
			b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(a[6:]))
			if err != nil {
				return identity{}, connect.NewError(connect.CodeInvalidArgument, errors.New("the Authorization header's Basic credentials are not base64"))
			}
			username, _, _ = strings.Cut(string(b), ":")
		}
	}
	own := identity{uid: os.Geteuid(), gid: os.Getegid(), home: s.cfg.Workdir}
	if u, err := user.LookupId(strconv.Itoa(own.uid)); err == nil {
		own.name = u.Username
	}
	if username == "" || username == own.name {
		return own, nil
	}
	u, err := user.Lookup(username)
	if err != nil {
		return identity{}, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("user %q does not exist in this sandbox", username))
	}
	uid, err1 := strconv.Atoi(u.Uid)
	gid, err2 := strconv.Atoi(u.Gid)
	if err1 != nil || err2 != nil {
		return identity{}, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("user %q has no numeric id", username))
	}
	if uid == own.uid {
		own.name = u.Username
		return own, nil
	}
	if own.uid != 0 {
		return identity{}, connect.NewError(connect.CodePermissionDenied, fmt.Errorf("execd does not run as root, so it cannot act as user %q", username))
	}
	id := identity{cred: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, uid: uid, gid: gid, name: u.Username, home: u.HomeDir}
	if ids, err := u.GroupIds(); err == nil {
		for _, g := range ids {
			if n, err := strconv.ParseUint(g, 10, 32); err == nil {
				id.cred.Groups = append(id.cred.Groups, uint32(n))
			}
		}
	}
	if id.home == "" {
		id.home = "/"
	}
	return id, nil
}

// resolve makes p absolute: "~" and relative paths are the user's home's.
func (id identity) resolve(p string) (string, error) {
	if p == "" {
		return "", connect.NewError(connect.CodeInvalidArgument, errors.New("a path is required"))
	}
	if strings.ContainsRune(p, 0) {
		return "", connect.NewError(connect.CodeInvalidArgument, errors.New("a path must not contain NUL"))
	}
	switch {
	case p == "~":
		p = id.home
	case strings.HasPrefix(p, "~/"):
		p = filepath.Join(id.home, p[2:])
	case !filepath.IsAbs(p):
		p = filepath.Join(id.home, p)
	}
	return filepath.Clean(p), nil
}

// chown gives path to the identity's user when it is not execd's own.
func (id identity) chown(path string) error {
	if id.cred == nil {
		return nil
	}
	return os.Lchown(path, id.uid, id.gid)
}

// mkdirAll makes dir and its missing parents, owned by the identity's user.
func (id identity) mkdirAll(dir string) error {
	var missing []string
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Lstat(d); err == nil || d == "/" || d == "." {
			break
		}
		missing = append(missing, d)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, d := range missing {
		if err := id.chown(d); err != nil {
			return err
		}
	}
	return nil
}

// fsError turns a file system error into a Connect error.
func fsError(err error) error {
	var ce *connect.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ce):
		return err
	case errors.Is(err, fs.ErrNotExist):
		return connect.NewError(connect.CodeNotFound, err)
	case errors.Is(err, fs.ErrExist):
		return connect.NewError(connect.CodeAlreadyExists, err)
	case errors.Is(err, fs.ErrPermission):
		return connect.NewError(connect.CodePermissionDenied, err)
	case errors.Is(err, syscall.ENOTDIR), errors.Is(err, syscall.EISDIR), errors.Is(err, syscall.EINVAL), errors.Is(err, syscall.ENAMETOOLONG):
		return connect.NewError(connect.CodeInvalidArgument, err)
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return connect.NewError(connect.CodeResourceExhausted, err)
	case errors.Is(err, context.Canceled):
		return connect.NewError(connect.CodeCanceled, err)
	}
	return connect.NewError(connect.CodeInternal, err)
}

// keepaliveEvery is how often a stream sends a keepalive: the client's
// Keepalive-Ping-Interval (seconds), at most KeepaliveMax.
func (s *Service) keepaliveEvery(header string) time.Duration {
	d := s.cfg.KeepaliveMax
	if v, err := strconv.Atoi(header); err == nil && v > 0 {
		d = min(d, time.Duration(v)*time.Second)
	}
	return d
}
