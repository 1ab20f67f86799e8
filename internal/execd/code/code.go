// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

// Package code owns execd's code contexts: each a Jupyter kernel of its
// own (internal/execd/code/jupyter), found from the image's kernelspecs,
// started when the context is made, running one execution at a time with
// a bounded queue behind it, and turning the kernel's messages into the
// execd contract's stream events. A per-language default context serves
// /code calls that name a language and no context. Contexts live as long
// as execd: its Close shuts every kernel down. Only internal/execd and
// internal/execd/codeinterp (E2B's protocol over the same contexts)
// import it.
package code

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/errdefs"
	"github.com/corral-dev/corral/internal/execd/code/jupyter"
	"github.com/corral-dev/corral/internal/logctx"
)

// Config configures a Manager.
type Config struct {
	// Env returns the environment a new kernel starts with.
	Env func() []string
	// Workdir is a context's working directory when it names none.
	Workdir string
	// StateDir holds connection files and results too large to send.
	StateDir string
	// SpecWait is how long after start execd waits for a kernelspec of a
	// known language to appear (images install them at start; default 60s).
	SpecWait time.Duration
	// StartTimeout bounds a kernel's start (default 60s).
	StartTimeout time.Duration
	// QueueLimit is how many executions may wait behind the running one in
	// a context (default 16); one more is refused with 429.
	QueueLimit int
	// MaxContexts bounds the contexts alive at once (default 32): each is
	// a kernel process of tens of MB.
	MaxContexts int
	// IdleTimeout, when positive, shuts down contexts unused for that long.
	IdleTimeout time.Duration
	// ShutdownGrace is how long a kernel has to exit before SIGKILL (2s).
	ShutdownGrace time.Duration
	// InterruptTimeout is how long an interrupted execution may go on
	// before its kernel is stopped (default 10s).
	InterruptTimeout time.Duration
	Logger           *slog.Logger
}

// knownLanguages are the languages clients name (OpenSandbox's
// SupportedLanguage, and R): for these a missing kernelspec is waited for
// while the image may still be installing it.
var knownLanguages = []string{"python", "java", "go", "typescript", "javascript", "bash", "r"}

// Manager holds the contexts.
type Manager struct {
	cfg     Config
	log     *slog.Logger
	started time.Time

	mu       sync.Mutex
	contexts map[string]*Context
	defaults map[string]string // language → context id
	// defaultLocks serialise the making of each language's default.
	defaultLocks map[string]*sync.Mutex
	// starting counts contexts whose kernels are starting.
	starting int
	closed   bool
}

// New returns a Manager.
func New(cfg Config) *Manager {
	if cfg.Env == nil {
		cfg.Env = os.Environ
	}
	if cfg.Workdir == "" {
		cfg.Workdir = "/"
	}
	if cfg.StateDir == "" {
		cfg.StateDir = filepath.Join(os.TempDir(), "corral-code")
	}
	if cfg.SpecWait <= 0 {
		cfg.SpecWait = 60 * time.Second
	}
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = 60 * time.Second
	}
	if cfg.MaxContexts <= 0 {
		cfg.MaxContexts = 32
	}
	if cfg.QueueLimit <= 0 {
		cfg.QueueLimit = 16
	}
	if cfg.InterruptTimeout <= 0 {
		cfg.InterruptTimeout = 10 * time.Second
	}
	if cfg.ShutdownGrace <= 0 {
		cfg.ShutdownGrace = 2 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = logctx.Discard()
	}
	return &Manager{cfg: cfg, log: cfg.Logger, started: time.Now(), contexts: map[string]*Context{}, defaults: map[string]string{}, defaultLocks: map[string]*sync.Mutex{}}
}

// Context is one code context: a kernel and the executions queued on it.
type Context struct {
	ID        string
	Language  string
	Cwd       string
	CreatedAt time.Time

	m      *Manager
	slot   chan struct{} // holds a token while an execution runs
	closed chan struct{} // closed when the context is deleted

	mu      sync.Mutex
	kernel  *jupyter.Kernel
	waiting int
	// running: a turn holds the kernel. started: the kernel has begun
	// its code (execute_input). ending: the code has produced its result
	// or error, or the kernel has replied. Interrupts reach the code only
	// between started and ending (see Context.interrupt).
	running, started, ending bool
	// pendingInterrupt is an interrupt asked for before the code started.
	pendingInterrupt bool
	// turn numbers the turns that have come.
	turn uint64
	// escalate, set while an execution runs, arms the stop of its kernel
	// InterruptTimeout after an interrupt.
	escalate func()
	lastUsed time.Time
	deleted  bool
}

// Info describes the context for the API.
func (c *Context) Info() api.CodeContext {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := api.CodeContextIdle
	switch {
	case c.deadLocked() != nil:
		st = api.CodeContextDead
	case c.running && !c.ending:
		st = api.CodeContextBusy
	}
	t := c.CreatedAt.UTC()
	return api.CodeContext{ID: c.ID, Language: c.Language, Cwd: c.Cwd, Kernel: c.kernel.Spec().Name, Status: st, Queued: c.waiting, CreatedAt: &t}
}

// deadLocked says why the kernel is gone, or nil if it runs.
func (c *Context) deadLocked() error {
	select {
	case <-c.kernel.Exited():
		return fmt.Errorf("its kernel exited (%v)", c.kernel.ExitError())
	default:
		return nil
	}
}

func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// Languages lists the languages this sandbox's kernelspecs serve.
func (m *Manager) Languages() []string { return jupyter.Languages(m.specs()) }

func (m *Manager) specs() []jupyter.Spec { return jupyter.FindSpecs(jupyter.DataDirs(m.cfg.Env())) }

// spec finds the kernelspec for language, waiting (until SpecWait after
// execd started, or ctx ends) for one the image may still be installing.
func (m *Manager) spec(ctx context.Context, language string) (jupyter.Spec, error) {
	for {
		specs := m.specs()
		if s, ok := jupyter.Pick(specs, language); ok {
			return s, nil
		}
		wait := slices.Contains(knownLanguages, strings.ToLower(language)) && time.Since(m.started) < m.cfg.SpecWait
		if !wait {
			have := jupyter.Languages(specs)
			if len(have) == 0 {
				return jupyter.Spec{}, errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeExecdNotSupported,
					"language %q has no Jupyter kernel in this sandbox: the image has no kernelspecs (looked in %s); use an image with kernels, such as corral's code-interpreter image",
					language, strings.Join(jupyter.DataDirs(m.cfg.Env()), ", "))
			}
			return jupyter.Spec{}, errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeExecdNotSupported,
				"language %q has no Jupyter kernel in this sandbox; languages here: %s", language, strings.Join(have, ", "))
		}
		select {
		case <-ctx.Done():
			return jupyter.Spec{}, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// Create makes a context for language with its own kernel, started before
// Create returns. cwd ("" for the workdir) is created if missing.
func (m *Manager) Create(ctx context.Context, language, cwd string) (*Context, error) {
	language = strings.TrimSpace(language)
	if language == "" {
		return nil, errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeExecdInvalidRequestBody, "language is required (languages here: %s)", strings.Join(m.Languages(), ", "))
	}
	return m.create(ctx, language, cwd, false)
}

func (m *Manager) create(ctx context.Context, language, cwd string, asDefault bool) (*Context, error) {
	if cwd == "" {
		cwd = m.cfg.Workdir
	}
	if !filepath.IsAbs(cwd) {
		return nil, errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeExecdInvalidPath, "cwd %q must be an absolute path", cwd)
	}
	cwd = filepath.Clean(cwd)
	m.mu.Lock()
	if n := len(m.contexts) + m.starting; n >= m.cfg.MaxContexts {
		m.mu.Unlock()
		return nil, errdefs.Newf(errdefs.ErrResourceExhausted, api.CodeExecdContextBusy,
			"this sandbox has %d code contexts, the most it runs at once; delete one first", n)
	}
	m.starting++
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		m.starting--
		m.mu.Unlock()
	}()
	spec, err := m.spec(ctx, language)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cwd, 0o755); err != nil {
		return nil, errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeExecdInvalidPath, "cwd %q cannot be created: %v", cwd, errors.Unwrap(err))
	}
	sctx, cancel := context.WithTimeout(ctx, m.cfg.StartTimeout)
	defer cancel()
	k, err := jupyter.Start(sctx, spec, jupyter.Options{Dir: cwd, Env: m.cfg.Env(), RuntimeDir: filepath.Join(m.cfg.StateDir, "kernels")})
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		m.log.WarnContext(ctx, "kernel start failed", "kernel", spec.Name, "err", err)
		return nil, errdefs.Newf(errdefs.ErrUnavailable, api.CodeExecdKernelFailed, "the %s kernel (%s) did not start: %v", language, spec.Name, err)
	}
	c := &Context{ID: newUUID(), Language: strings.ToLower(language), Cwd: cwd, CreatedAt: time.Now(), m: m,
		slot: make(chan struct{}, 1), closed: make(chan struct{}), kernel: k, lastUsed: time.Now()}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		go k.Shutdown(0)
		return nil, errdefs.New(errdefs.ErrUnavailable, api.CodeExecdRuntimeError, "execd is shutting down")
	}
	m.contexts[c.ID] = c
	if asDefault {
		m.defaults[c.Language] = c.ID
	}
	m.log.InfoContext(ctx, "code context created", "context_id", c.ID, "kernel", spec.Name, "pid", k.Pid())
	return c, nil
}

func contextNotFound(id string) error {
	return errdefs.Newf(errdefs.ErrNotFound, api.CodeExecdContextNotFound, "context %s not found", id)
}

// Get returns a context by id.
func (m *Manager) Get(id string) (*Context, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if c, ok := m.contexts[id]; ok {
		return c, nil
	}
	return nil, contextNotFound(id)
}

// Default returns the language's default context, making it (or a new
// one in place of a dead one) if needed. Two first calls at once make one.
func (m *Manager) Default(ctx context.Context, language string) (*Context, error) {
	language = strings.ToLower(strings.TrimSpace(language))
	m.mu.Lock()
	lk := m.defaultLocks[language]
	if lk == nil {
		lk = &sync.Mutex{}
		m.defaultLocks[language] = lk
	}
	m.mu.Unlock()
	lk.Lock()
	defer lk.Unlock()
	m.mu.Lock()
	c := m.contexts[m.defaults[language]]
	m.mu.Unlock()
	if c != nil {
		c.mu.Lock()
		dead := c.deadLocked()
		c.mu.Unlock()
		if dead == nil {
			return c, nil
		}
		_ = m.Delete(c.ID)
	}
	return m.create(ctx, language, "", true)
}

// List returns the contexts of language ("" for all), oldest first.
func (m *Manager) List(language string) []*Context {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*Context
	for _, c := range m.contexts {
		if language == "" || strings.EqualFold(c.Language, language) {
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(a, b *Context) int { return a.CreatedAt.Compare(b.CreatedAt) })
	return out
}

// Delete shuts a context's kernel down; a running execution ends with an
// error event.
func (m *Manager) Delete(id string) error {
	m.mu.Lock()
	c, ok := m.contexts[id]
	if ok {
		delete(m.contexts, id)
		for lang, did := range m.defaults {
			if did == id {
				delete(m.defaults, lang)
			}
		}
	}
	m.mu.Unlock()
	if !ok {
		return contextNotFound(id)
	}
	c.shutdown()
	return nil
}

// DeleteLanguage deletes every context of language, defaults included.
func (m *Manager) DeleteLanguage(language string) {
	for _, c := range m.List(language) {
		_ = m.Delete(c.ID)
	}
}

func (c *Context) shutdown() {
	c.mu.Lock()
	if c.deleted {
		c.mu.Unlock()
		return
	}
	c.deleted = true
	close(c.closed)
	k := c.kernel
	c.mu.Unlock()
	if err := k.Shutdown(c.m.cfg.ShutdownGrace); err != nil {
		c.m.log.Warn("kernel shutdown", "context_id", c.ID, "err", err)
	}
	// Results written to files live as long as their context.
	_ = os.RemoveAll(c.resultDir())
}

// Restart replaces the context's kernel with a fresh one (its state is
// lost); a running execution ends with an error event.
func (m *Manager) Restart(ctx context.Context, id string) (*Context, error) {
	c, err := m.Get(id)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	old := c.kernel
	c.mu.Unlock()
	_ = old.Shutdown(m.cfg.ShutdownGrace)
	sctx, cancel := context.WithTimeout(ctx, m.cfg.StartTimeout)
	defer cancel()
	k, err := jupyter.Start(sctx, old.Spec(), jupyter.Options{Dir: c.Cwd, Env: m.cfg.Env(), RuntimeDir: filepath.Join(m.cfg.StateDir, "kernels")})
	if err != nil {
		return nil, errdefs.Newf(errdefs.ErrUnavailable, api.CodeExecdKernelFailed, "the %s kernel did not restart: %v", c.Language, err)
	}
	c.mu.Lock()
	if c.deleted {
		c.mu.Unlock()
		_ = k.Shutdown(0)
		return nil, contextNotFound(id)
	}
	c.kernel = k
	c.mu.Unlock()
	return c, nil
}

// Interrupt interrupts the context's running execution, if any.
func (m *Manager) Interrupt(ctx context.Context, id string) error {
	c, err := m.Get(id)
	if err != nil {
		return err
	}
	c.mu.Lock()
	k := c.kernel
	c.mu.Unlock()
	if err := c.interrupt(ctx, k, 0); err != nil {
		if errors.Is(err, jupyter.ErrDied) {
			return errdefs.Newf(errdefs.ErrFailedPrecondition, api.CodeExecdContextDead, "context %s is dead: its kernel exited", id)
		}
		return err
	}
	return nil
}

// Close shuts every kernel down.
func (m *Manager) Close() {
	m.mu.Lock()
	m.closed = true
	all := make([]*Context, 0, len(m.contexts))
	for _, c := range m.contexts {
		all = append(all, c)
	}
	m.contexts, m.defaults = map[string]*Context{}, map[string]string{}
	m.mu.Unlock()
	var wg sync.WaitGroup
	for _, c := range all {
		wg.Go(c.shutdown)
	}
	wg.Wait()
}

// Run reaps contexts idle past IdleTimeout until ctx ends.
func (m *Manager) Run(ctx context.Context) {
	if m.cfg.IdleTimeout <= 0 {
		return
	}
	tick := time.NewTicker(min(max(m.cfg.IdleTimeout/4, time.Second), time.Minute))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		for _, c := range m.List("") {
			c.mu.Lock()
			idle := !c.running && c.waiting == 0 && time.Since(c.lastUsed) > m.cfg.IdleTimeout
			c.mu.Unlock()
			if idle {
				m.log.InfoContext(ctx, "code context idle: shut down", "context_id", c.ID, "idle_timeout", m.cfg.IdleTimeout)
				_ = m.Delete(c.ID)
			}
		}
	}
}
