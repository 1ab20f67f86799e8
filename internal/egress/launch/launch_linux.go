// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

// Package launch gives a sandbox with a network policy its way out,
// for any runtime whose sandboxes have a network namespace on this
// machine: it starts the sandbox's egress enforcer (`corral egress`, a
// host process outside the sandbox's pid and mount namespaces), waits
// until its rules are in the kernel, and only then links the namespace
// to the uplink (internal/hostnet/uplink) — so the first packet that can
// leave is already policed. It supervises the enforcer (a dead one fails
// closed and is restarted), re-adopts it after a server restart, and
// removes everything on Stop.
package launch

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/errdefs"
	"github.com/corral-dev/corral/internal/egress"
	"github.com/corral-dev/corral/internal/egress/audit"
	"github.com/corral-dev/corral/internal/hostnet/forward"
	"github.com/corral-dev/corral/internal/hostnet/netns"
	"github.com/corral-dev/corral/internal/hostnet/uplink"
	"github.com/corral-dev/corral/internal/insandbox"
	"github.com/corral-dev/corral/internal/procfs"
	"github.com/corral-dev/corral/internal/unixsock"
)

// Config is how sandboxes with a network policy reach out.
type Config struct {
	// Uplink is where the bridge and NAT live (default: this machine's
	// network namespace, bridge corral0, subnet 10.213.0.0/16).
	Uplink uplink.Config
	// Upstreams are the resolvers the enforcers ask (ip:port; default:
	// /etc/resolv.conf's).
	Upstreams []string
	// Deny joins every sandbox's always-deny set.
	Deny []netip.Prefix
	// AllowPrivate takes parts of the private ranges out of it (the
	// operator's opt-in; Deny still wins).
	AllowPrivate []netip.Prefix
	// UpstreamCA is a PEM file of extra CAs the credential proxy trusts
	// when it verifies servers (besides the system's).
	UpstreamCA string
	// Binary is the corral binary that runs `corral egress`.
	Binary string
	// ReadyTimeout bounds the wait for an enforcer (default 30 s).
	ReadyTimeout time.Duration
	// Audit, when set, receives every enforcer's audit events (in
	// batches, in order, at least once across restarts).
	Audit  func(ctx context.Context, sandboxID string, evs []audit.Event) error
	Logger *slog.Logger
}

// LogLimit bounds an enforcer's log file, which lives beside the
// sandbox's bundle on a file system shared with every other sandbox.
const LogLimit = 1 << 20

// proc supervises one enforcer.
type proc struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// Enforcers runs the enforcers of one runtime's sandboxes.
type Enforcers struct {
	cfg Config
	log *slog.Logger

	// mu guards up and procs.
	mu    sync.Mutex
	up    *uplink.Uplink
	procs map[string]*proc
}

// New returns an Enforcers; the uplink is set up on first use.
func New(cfg Config) *Enforcers {
	if cfg.ReadyTimeout <= 0 {
		cfg.ReadyTimeout = 30 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Enforcers{cfg: cfg, log: cfg.Logger, procs: map[string]*proc{}}
}

func (e *Enforcers) uplink() (*uplink.Uplink, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.up != nil {
		return e.up, nil
	}
	u, err := uplink.Open(e.cfg.Uplink)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errdefs.ErrUnavailable, err)
	}
	e.up = u
	return u, nil
}

// Start polices the namespace at nsPath for sandbox id, whose directory
// Prepare wrote: the enforcer first, then the veth.
func (e *Enforcers) Start(ctx context.Context, id, dir, nsPath string) error {
	u, err := e.uplink()
	if err != nil {
		return err
	}
	var st state
	if err := e.launch(ctx, id, dir, nsPath, &st); err != nil {
		return err
	}
	if err := attach(u, id, dir, nsPath, &st); err != nil {
		return err
	}
	e.supervise(id, dir, nsPath, st)
	return nil
}

// attach adds the veth, once the enforcer's rules are in, and records
// the address.
func attach(u *uplink.Uplink, id, dir, nsPath string, st *state) error {
	var err error
	if st.Addr, err = u.Attach(id, nsPath); err != nil {
		return err
	}
	return writeState(dir, *st)
}

// launch starts the enforcer, records it and waits until its rules are
// in the kernel.
func (e *Enforcers) launch(ctx context.Context, id, dir, nsPath string, st *state) error {
	var err error
	if st.Pid, st.StartTime, err = e.spawn(id, dir, nsPath); err != nil {
		return err
	}
	if err := writeState(dir, *st); err != nil {
		return err
	}
	return e.waitReady(ctx, dir, *st)
}

// PortDialer returns how a forwarder reaches port of a sandbox whose
// enforcer directory is dir: the egress API's port goes to the
// enforcer's socket when the sandbox is policed, any other port into
// the sandbox's namespace.
func PortDialer(dir, nsPath string, port int) func(ctx context.Context) (net.Conn, error) {
	if _, err := os.Stat(filepath.Join(dir, "token")); dir != "" && err == nil && port == insandbox.EgressPort {
		return func(ctx context.Context) (net.Conn, error) { return unixsock.Dial(ctx, APISocket(dir)) }
	}
	target := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(port)).String()
	return func(ctx context.Context) (net.Conn, error) { return netns.Dial(ctx, nsPath, target) }
}

// apiClient talks to the enforcer's API on its socket.
func apiClient(dir string, keepAlives bool) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return unixsock.Dial(ctx, APISocket(dir))
		},
		DisableKeepAlives: !keepAlives,
	}}
}

// enforcerArgv is the command line of sandbox id's enforcer, whose
// namespace is its descriptor 3 and whose files are in dir.
func (e *Enforcers) enforcerArgv(id, dir string, deny []string) []string {
	o := egress.DefaultOptions()
	o.Netns, o.SandboxID, o.PolicyFile, o.TokenFile = "/proc/self/fd/3", id, filepath.Join(dir, "policy.json"), filepath.Join(dir, "token")
	o.APIListen, o.APISocket, o.Deny, o.LogLimit = "none", APISocket(dir), strings.Join(deny, ","), LogLimit
	o.Upstreams, o.AllowPrivate = strings.Join(e.cfg.Upstreams, ","), JoinPrefixes(e.cfg.AllowPrivate)
	if CAFile(dir) != "" {
		o.VaultDir, o.UpstreamCA = dir, e.cfg.UpstreamCA
	}
	return o.Argv(e.cfg.Binary)
}

// isEnforcer reports whether args are those of `corral egress` for
// sandbox id with its files in dir: the only process the server may kill
// on the word of the state file or of a search.
func isEnforcer(args []string, id, dir string) bool {
	if len(args) < 2 || args[1] != "egress" {
		return false
	}
	var ok, ours bool
	for i := 2; i+1 < len(args); i++ {
		switch args[i] {
		case "--sandbox-id":
			ok = args[i+1] == id
		case "--policy-file":
			ours = args[i+1] == filepath.Join(dir, "policy.json")
		}
	}
	return ok && ours
}

// running reports whether pid (started at start) is sandbox id's enforcer.
func running(pid int, start uint64, id, dir string) bool {
	if pid <= 0 || !procfs.Alive(pid, start) {
		return false
	}
	args, err := procfs.Cmdline(pid)
	return err == nil && isEnforcer(args, id, dir)
}

// killStrays ends every enforcer of sandbox id that the state file does
// not name: one started by a server killed before it wrote the pid down
// (at the first start, or at a restart by supervise). The state names
// the rest; a search of /proc is the only record of these.
func killStrays(ctx context.Context, id, dir string) error {
	strays, err := procfs.Find(func(args []string) bool { return isEnforcer(args, id, dir) })
	if err != nil {
		return fmt.Errorf("look for the sandbox's egress enforcers: %w", err)
	}
	var errs []error
	for _, p := range strays {
		if err := kill(ctx, p.Pid, p.StartTime); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// kill ends an enforcer and waits until it has.
func kill(ctx context.Context, pid int, start uint64) error {
	_ = syscall.Kill(pid, syscall.SIGKILL)
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := procfs.WaitExit(wctx, pid, start); err != nil {
		return fmt.Errorf("stop the egress enforcer (pid %d): %w", pid, err)
	}
	return nil
}

// spawn starts `corral egress` for the sandbox: on the host, in the
// uplink's network namespace (where it asks the upstream resolvers), in a
// session of its own so that it outlives a server restart. The sandbox's
// namespace is handed over as an open descriptor.
func (e *Enforcers) spawn(id, dir, nsPath string) (int, uint64, error) {
	u, err := e.uplink()
	if err != nil {
		return 0, 0, err
	}
	hosts, err := u.HostPrefixes()
	if err != nil {
		return 0, 0, err
	}
	deny := []string{u.Subnet().String()}
	for _, p := range append(hosts, e.cfg.Deny...) {
		deny = append(deny, p.String())
	}
	ns, err := os.Open(nsPath)
	if err != nil {
		return 0, 0, fmt.Errorf("the sandbox's network namespace: %w", err)
	}
	defer ns.Close()
	args := e.enforcerArgv(id, dir, deny)
	// Readable too: the enforcer keeps the newest lines when it trims it.
	logf, err := os.OpenFile(filepath.Join(dir, "log"), os.O_CREATE|os.O_RDWR|os.O_APPEND|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return 0, 0, err
	}
	defer logf.Close()
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.ExtraFiles = []*os.File{ns}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	start := cmd.Start
	if up := e.cfg.Uplink.Netns; up != "" {
		// The child is cloned from this locked thread, inside up.
		start = func() error { return netns.Do(up, cmd.Start) }
	}
	if err := start(); err != nil {
		return 0, 0, fmt.Errorf("start the egress enforcer: %w", err)
	}
	pid := cmd.Process.Pid
	st, err := procfs.StartTime(pid)
	// Reap it if it exits while this server runs; supervision watches it
	// through a pidfd either way.
	go func() { _ = cmd.Wait() }()
	if err != nil {
		return 0, 0, fmt.Errorf("the egress enforcer exited at once: %s", lastLine(filepath.Join(dir, "log")))
	}
	return pid, st, nil
}

// waitReady polls the enforcer's /healthz on its socket.
func (e *Enforcers) waitReady(ctx context.Context, dir string, st state) error {
	logPath := filepath.Join(dir, "log")
	ctx, cancel := context.WithTimeout(ctx, e.cfg.ReadyTimeout)
	defer cancel()
	hc := apiClient(dir, false)
	healthy := func(ctx context.Context) (bool, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://egress/healthz", nil)
		res, err := hc.Do(req)
		if err != nil {
			return false, err
		}
		res.Body.Close()
		return res.StatusCode == http.StatusOK, nil
	}
	alive := func(context.Context) error {
		if !procfs.Alive(st.Pid, st.StartTime) {
			return errdefs.New(errdefs.ErrUnavailable, api.CodeSandboxEgressFailed, "the egress enforcer exited during start: "+lastLine(logPath))
		}
		return nil
	}
	if err := forward.Await(ctx, healthy, alive, time.Millisecond, 20*time.Millisecond); err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("the egress enforcer did not become ready within %v", e.cfg.ReadyTimeout)
		}
		return err
	}
	return nil
}

// lastLine is the last line the enforcer logged, for error messages.
func lastLine(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return "no output"
	}
	defer f.Close()
	last := "no output"
	sc := bufio.NewScanner(io.LimitReader(f, 1<<20))
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			last = l
		}
	}
	return last
}

// supervise restarts the enforcer if it dies. Its rules stay in the
// kernel meanwhile, so a dead enforcer fails closed: nothing new
// resolves, nothing unlisted gets out.
func (e *Enforcers) supervise(id, dir, nsPath string, st state) {
	ctx, cancel := context.WithCancel(context.Background())
	p := &proc{cancel: cancel, done: make(chan struct{})}
	e.mu.Lock()
	if old := e.procs[id]; old != nil {
		old.cancel()
	}
	e.procs[id] = p
	e.mu.Unlock()
	var followed sync.WaitGroup
	if e.cfg.Audit != nil {
		followed.Go(func() { e.follow(ctx, id, dir, apiClient(dir, true)) })
	}
	go func() {
		defer close(p.done)
		defer followed.Wait()
		backoff := 100 * time.Millisecond
		for {
			if err := procfs.WaitExit(ctx, st.Pid, st.StartTime); ctx.Err() != nil {
				return
			} else if err != nil {
				e.log.Warn("watch the egress enforcer", "sandbox_id", id, "err", err)
			}
			e.log.Warn("the egress enforcer exited; restarting it", "sandbox_id", id, "log", filepath.Join(dir, "log"))
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(backoff*2, 10*time.Second)
			pid, start, err := e.spawn(id, dir, nsPath)
			if err != nil {
				e.log.Error("restart the egress enforcer", "sandbox_id", id, "err", err)
				continue
			}
			st.Pid, st.StartTime = pid, start
			if err := writeState(dir, st); err != nil {
				e.log.Error("record the egress enforcer", "sandbox_id", id, "err", err)
			}
			backoff = 100 * time.Millisecond
		}
	}()
}

// Recover re-adopts a sandbox's enforcer after a restart, starting it
// again if it is gone. A directory without state is not policed: nothing
// to do.
func (e *Enforcers) Recover(ctx context.Context, id, dir, nsPath string) error {
	st, ok := readState(dir)
	if !ok {
		return nil
	}
	u, err := e.uplink()
	if err != nil {
		return err
	}
	if st.Addr.IsValid() {
		if err := u.Reserve(id, st.Addr); err != nil {
			return err
		}
	}
	if !running(st.Pid, st.StartTime, id, dir) {
		// A restart the last server did not record may be running: one
		// enforcer per namespace.
		if err := killStrays(ctx, id, dir); err != nil {
			return err
		}
		if err := e.launch(ctx, id, dir, nsPath, &st); err != nil {
			return err
		}
	}
	if !st.Addr.IsValid() {
		// The last start ended before the veth's address was written
		// down: remove what it made of the veth, and finish it.
		if err := u.Detach(id, st.Addr); err != nil {
			return err
		}
		if err := attach(u, id, dir, nsPath, &st); err != nil {
			return err
		}
	}
	e.supervise(id, dir, nsPath, st)
	return nil
}

// Stop ends the enforcer and removes the veth. It is idempotent.
func (e *Enforcers) Stop(ctx context.Context, id, dir string) error {
	e.mu.Lock()
	p := e.procs[id]
	delete(e.procs, id)
	e.mu.Unlock()
	if p != nil {
		p.cancel()
		<-p.done
	}
	if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil // never policed: no enforcer was ever started
	}
	st, ok := readState(dir)
	if ok && running(st.Pid, st.StartTime, id, dir) {
		if err := kill(ctx, st.Pid, st.StartTime); err != nil {
			return err
		}
	} else if err := killStrays(ctx, id, dir); err != nil {
		// Without a state file, or with a pid that is gone, an enforcer
		// may still run that nothing recorded.
		return err
	}
	// The veth is named after the sandbox: removed even when a cut start
	// never wrote its address down.
	u, err := e.uplink()
	if err != nil {
		return err
	}
	return u.Detach(id, st.Addr)
}

// Close stops supervising; the enforcers keep running for the next
// server to re-adopt.
func (e *Enforcers) Close() {
	e.mu.Lock()
	procs := e.procs
	e.procs = map[string]*proc{}
	up := e.up
	e.up = nil
	e.mu.Unlock()
	for _, p := range procs {
		p.cancel()
		<-p.done
	}
	if up != nil {
		up.Close()
	}
}
