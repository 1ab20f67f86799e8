// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

// Package secrets lets code inside a sandbox fetch, by name, the secrets
// its tenant granted it at create time — on demand, rather than carrying
// them in its environment from the start. A tenant stores secrets through
// the API (values are write-only there); a sandbox is granted names with
// the extension corral.dev/secrets; inside, it asks the server over a
// Unix socket mounted at /run/corral/secrets.sock with its session key,
// an HMAC of its ID under a key only the server holds. The server answers
// only for the sandbox the key belongs to, only for a granted name of
// that sandbox's tenant, and 403 for everything else.
package secrets

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/errdefs"
	"github.com/corral-dev/corral/internal/insandbox"

	"github.com/corral-dev/corral/internal/unixsock"
)

// Names a sandbox and its clients use.
const (
	// Extension grants secrets at create: comma-separated names.
	Extension = "corral.dev/secrets"
	// ExtensionEvents "true" gives a sandbox the socket (and its
	// environment) to post application events on, with or without
	// secrets.
	ExtensionEvents = "corral.dev/events"
	// MountDir is where the socket's directory appears in a sandbox.
	MountDir   = insandbox.SecretsDir
	SocketName = "secrets.sock"
	// HeaderSessionKey carries the sandbox's session key.
	HeaderSessionKey = "Corral-Session-Key"
	// The environment of a sandbox with grants.
	EnvSandboxID  = "CORRAL_SANDBOX_ID"
	EnvSessionKey = "CORRAL_SESSION_KEY"
	EnvSocket     = "CORRAL_SECRETS_SOCKET"
	// MaxValue bounds a secret's size.
	MaxValue = 64 << 10
)

// validName: 1 to 128 of [A-Za-z0-9_.-], starting with a letter or digit
// (no regexp: this package is in every corral process, which compiles
// package regexps at start).
func validName(name string) bool {
	if name == "" || len(name) > 128 {
		return false
	}
	for i, c := range []byte(name) {
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 || c != '_' && c != '.' && c != '-') {
			return false
		}
	}
	return true
}

// ValidName checks a secret's name.
func ValidName(name string) error {
	if !validName(name) {
		return errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeSecretInvalidName,
			"secret name %q: 1 to 128 letters, digits, '_', '.' or '-', starting with a letter or digit", name)
	}
	return nil
}

// Grants reads the names granted by a create's extensions.
func Grants(ext map[string]string) ([]string, error) {
	v, ok := ext[Extension]
	if !ok {
		return nil, nil
	}
	var out []string
	for _, n := range strings.Split(v, ",") {
		n = strings.TrimSpace(n)
		if err := ValidName(n); err != nil {
			return nil, errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeInvalidParameter, "extensions[%s]: %s", Extension, err.Error())
		}
		out = append(out, n)
	}
	return out, nil
}

// Secret is a tenant's named secret.
type Secret struct {
	Tenant    string
	Name      string
	Value     string
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Store keeps the tenants' secrets (internal/store implements it).
// GetSecret and DeleteSecret answer errdefs.ErrNotFound for an unknown
// name.
type Store interface {
	PutSecret(ctx context.Context, sec Secret) (created bool, err error)
	GetSecret(ctx context.Context, tenant, name string) (Secret, error)
	ListSecrets(ctx context.Context, tenant string) ([]Secret, error)
	DeleteSecret(ctx context.Context, tenant, name string) error
}

// Service holds the session-key secret and the socket's directory.
type Service struct {
	st  Store
	key []byte
	dir string
}

// Open loads (or makes, 0600) the server's session-key secret in dataDir
// and prepares the socket's directory.
func Open(st Store, dataDir string) (*Service, error) {
	path := filepath.Join(dataDir, "session.key")
	key, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		key = make([]byte, 32)
		if _, err := rand.Read(key); err != nil {
			return nil, err
		}
		if err := os.WriteFile(path, key, 0o600); err != nil {
			return nil, fmt.Errorf("secrets: %w", err)
		}
	} else if err != nil {
		return nil, fmt.Errorf("secrets: %w", err)
	}
	if len(key) < 32 {
		return nil, fmt.Errorf("secrets: %s is too short", path)
	}
	dir := filepath.Join(dataDir, "secrets")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("secrets: %w", err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, fmt.Errorf("secrets: %w", err)
	}
	return &Service{st: st, key: key, dir: dir}, nil
}

// Dir is the host directory a runtime mounts read-only at MountDir.
func (s *Service) Dir() string { return s.dir }

// SessionKey is sandbox id's session key.
func (s *Service) SessionKey(id string) string {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte("corral session\n" + id))
	return "csk_" + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

func (s *Service) verify(id, key string) bool {
	return hmac.Equal([]byte(s.SessionKey(id)), []byte(key))
}

// Env is the environment a sandbox with grants gets.
func (s *Service) Env(id string) map[string]string {
	return map[string]string{EnvSandboxID: id, EnvSessionKey: s.SessionKey(id), EnvSocket: MountDir + "/" + SocketName}
}

// Put stores a tenant's secret; created reports whether it is new.
func (s *Service) Put(ctx context.Context, tenant, name, value string) (bool, error) {
	if err := ValidName(name); err != nil {
		return false, err
	}
	if value == "" || len(value) > MaxValue {
		return false, errdefs.New(errdefs.ErrInvalidArgument, api.CodeSecretInvalidValue, "value must be 1 byte to 64 KiB")
	}
	now := time.Now().UTC()
	return s.st.PutSecret(ctx, Secret{Tenant: tenant, Name: name, Value: value, CreatedAt: now, UpdatedAt: now})
}

// List returns a tenant's secrets, without values.
func (s *Service) List(ctx context.Context, tenant string) ([]Secret, error) {
	return s.st.ListSecrets(ctx, tenant)
}

// Delete removes a tenant's secret.
func (s *Service) Delete(ctx context.Context, tenant, name string) error {
	if err := ValidName(name); err != nil {
		return err
	}
	return s.st.DeleteSecret(ctx, tenant, name)
}

// Listen makes the Unix socket sandboxes ask on (replacing a stale one
// from a previous run; the directory, not the socket, is what sandboxes
// mount, so they see the new one).
func (s *Service) Listen() (net.Listener, error) {
	path := filepath.Join(s.dir, SocketName)
	_ = os.Remove(path)
	ln, err := unixsock.Listen(path)
	if err != nil {
		return nil, fmt.Errorf("secrets: %w", err)
	}
	// Sandboxes run their code as any user.
	if err := os.Chmod(path, 0o666); err != nil {
		ln.Close()
		return nil, fmt.Errorf("secrets: %w", err)
	}
	return ln, nil
}

// MaxConns bounds the connections the socket serves at once.
const MaxConns = 256

// Server serves the socket with sane limits: bounded connections,
// headers and idle time.
func (s *Service) Server(h http.Handler) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: 30 * time.Second, IdleTimeout: time.Minute, MaxHeaderBytes: 16 << 10}
}

// LimitListener accepts at most n connections at once; the others wait.
func LimitListener(ln net.Listener, n int) net.Listener {
	return &limitListener{Listener: ln, slots: make(chan struct{}, n)}
}

type limitListener struct {
	net.Listener
	slots chan struct{}
}

func (l *limitListener) Accept() (net.Conn, error) {
	l.slots <- struct{}{}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	return &slotConn{Conn: c, release: func() { <-l.slots }}, nil
}

type slotConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *slotConn) Close() error {
	c.once.Do(c.release)
	return c.Conn.Close()
}

// Rate is a token bucket: Allow says yes perSecond times a second on
// average, burst times at once.
type Rate struct {
	mu        sync.Mutex
	perSecond float64
	burst     float64
	tokens    float64
	last      time.Time
}

// NewRate returns a full bucket.
func NewRate(perSecond, burst float64) *Rate {
	return &Rate{perSecond: perSecond, burst: burst, tokens: burst, last: time.Now()}
}

// Allow takes a token if there is one.
func (r *Rate) Allow() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	r.tokens = min(r.burst, r.tokens+now.Sub(r.last).Seconds()*r.perSecond)
	r.last = now
	if r.tokens < 1 {
		return false
	}
	r.tokens--
	return true
}

// Sandbox is what the handler needs to know of a sandbox.
type Sandbox struct {
	Tenant  string
	Grants  []string
	Running bool
	// Events: it may post application events (ExtensionEvents).
	Events bool
}

// WantsEvents reports whether a create's extensions ask for the events
// socket, refusing a value other than "true" or "false".
func WantsEvents(ext map[string]string) (bool, error) {
	switch v, ok := ext[ExtensionEvents]; {
	case !ok || v == "false":
		return false, nil
	case v == "true":
		return true, nil
	default:
		return false, fmt.Errorf("extensions[%s] %q: must be true or false", ExtensionEvents, v)
	}
}

// Limits of the application events a sandbox posts.
const (
	EventRate    = 5
	EventBurst   = 20
	MaxEventBody = 16 << 10
)

// validEventName: 1 to 64 of [a-z0-9._-], starting with a letter or
// digit.
func validEventName(n string) bool {
	if n == "" || len(n) > 64 {
		return false
	}
	for i, c := range n {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || i > 0 && (c == '.' || c == '_' || c == '-')) {
			return false
		}
	}
	return true
}

// AppEvent is what a sandbox posts: {"name", "data"}.
type AppEvent struct {
	Name string          `json:"name"`
	Data json.RawMessage `json:"data,omitempty"`
}

// Handler serves GET /v1/sandboxes/{id}/secrets/{name} and POST
// /v1/sandboxes/{id}/events on the socket. lookup finds a sandbox by ID;
// post publishes an application event of a sandbox.
func (s *Service) Handler(lookup func(id string) (Sandbox, bool), audit func(id, name string, ok bool, why string),
	post func(ctx context.Context, id string, ev AppEvent) error) http.Handler {
	mux := http.NewServeMux()
	reads := newReadLimits()
	posts := &readLimits{m: map[string]*rate.Limiter{}, rate: EventRate, burst: EventBurst}
	mux.HandleFunc("POST /v1/sandboxes/{id}/events", func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		refuse := func(code int, errCode, msg string) {
			writeJSON(w, code, map[string]string{"code": errCode, "message": msg})
		}
		if !s.verify(id, r.Header.Get(HeaderSessionKey)) {
			refuse(http.StatusForbidden, api.CodeSecretForbidden, "this sandbox may not post events")
			return
		}
		sb, ok := lookup(id)
		if !ok || !sb.Running || !sb.Events {
			refuse(http.StatusForbidden, api.CodeSecretForbidden, "this sandbox may not post events (it needs extensions[\""+ExtensionEvents+"\"]=\"true\" and to be running)")
			return
		}
		if !posts.allow(id) {
			refuse(http.StatusTooManyRequests, api.CodeSecretRateLimited, fmt.Sprintf("more than %d events a second from this sandbox; try again shortly", EventRate))
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, MaxEventBody+1))
		if err != nil || len(body) > MaxEventBody {
			refuse(http.StatusRequestEntityTooLarge, api.CodeInvalidRequestBody, fmt.Sprintf("an event is at most %d bytes", MaxEventBody))
			return
		}
		var ev AppEvent
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&ev); err != nil || dec.More() {
			refuse(http.StatusBadRequest, api.CodeInvalidRequestBody, `the body is {"name": NAME, "data": any JSON}`)
			return
		}
		if !validEventName(ev.Name) {
			refuse(http.StatusBadRequest, api.CodeInvalidParameter, "name: 1 to 64 of a-z, 0-9, '.', '_' and '-', starting with a letter or digit")
			return
		}
		if err := post(r.Context(), id, ev); err != nil {
			refuse(http.StatusServiceUnavailable, api.CodeGeneralUnknownError, "the event could not be recorded; try again")
			return
		}
		w.WriteHeader(http.StatusAccepted)
	})
	mux.HandleFunc("GET /v1/sandboxes/{id}/secrets/{name}", func(w http.ResponseWriter, r *http.Request) {
		id, name := r.PathValue("id"), r.PathValue("name")
		deny := func(why string) {
			audit(id, name, false, why)
			writeJSON(w, http.StatusForbidden, map[string]string{"code": api.CodeSecretForbidden,
				"message": "this sandbox may not read secret " + name})
		}
		if !s.verify(id, r.Header.Get(HeaderSessionKey)) {
			// Unproven: not recorded against the sandbox it names, so no
			// sandbox can write into another's event log.
			claimed := id
			id = ""
			deny("a session key that does not belong to sandbox " + claimed)
			return
		}
		sb, ok := lookup(id)
		switch {
		case !ok || !sb.Running:
			deny("the sandbox is not running")
			return
		case !contains(sb.Grants, name):
			deny("not granted")
			return
		}
		if !reads.allow(id) {
			// Every read is recorded; a sandbox reading in a loop must not
			// turn that into a write load on the database every tenant uses.
			writeJSON(w, http.StatusTooManyRequests, map[string]string{"code": api.CodeSecretRateLimited,
				"message": fmt.Sprintf("more than %d secret reads a second from this sandbox; try again shortly", ReadRate)})
			return
		}
		sec, err := s.st.GetSecret(r.Context(), sb.Tenant, name)
		if err != nil {
			deny("the tenant has no such secret")
			return
		}
		audit(id, name, true, "granted")
		writeJSON(w, http.StatusOK, map[string]string{"name": name, "value": sec.Value})
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusForbidden, map[string]string{"code": api.CodeSecretForbidden,
			"message": "only GET /v1/sandboxes/{id}/secrets/{name} and POST /v1/sandboxes/{id}/events are served here"})
	})
	return mux
}

// ReadRate and ReadBurst bound a sandbox's secret reads.
const (
	ReadRate  = 10
	ReadBurst = 50
)

// readLimits are the sandboxes' buckets (reads, or posts).
type readLimits struct {
	// mu guards m.
	mu          sync.Mutex
	m           map[string]*rate.Limiter
	rate, burst int
}

func newReadLimits() *readLimits {
	return &readLimits{m: map[string]*rate.Limiter{}, rate: ReadRate, burst: ReadBurst}
}

func (l *readLimits) allow(id string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	lim := l.m[id]
	if lim == nil {
		if len(l.m) >= 4096 {
			// Sandboxes come and go: start over rather than grow; a
			// sandbox gains at most one burst from it.
			clear(l.m)
		}
		lim = rate.NewLimiter(rate.Limit(l.rate), l.burst)
		l.m[id] = lim
	}
	return lim.Allow()
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
