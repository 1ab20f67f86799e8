// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

// Package oci is the native runtime: each sandbox is an OCI bundle run by
// runc (or any runtime with runc's command line, such as crun or runsc),
// its root filesystem an overlay of the image's unpacked layers under a
// writable upper directory, its network an empty namespace with loopback,
// its PID 1 `corral init` with execd, and its limits cgroups. The server
// reaches execd by dialling inside the sandbox's network namespace, and
// hands out host-loopback listeners that forward into it. Only
// internal/cli constructs it.
package oci

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	runc "github.com/containerd/go-runc"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/errdefs"
	"github.com/corral-dev/corral/internal/driver"
	"github.com/corral-dev/corral/internal/egress/launch"
	"github.com/corral-dev/corral/internal/hostnet/forward"
	"github.com/corral-dev/corral/internal/imagestore"
	"github.com/corral-dev/corral/internal/logctx"
	"github.com/corral-dev/corral/internal/procfs"
	"github.com/corral-dev/corral/internal/runcversion"
	"github.com/corral-dev/corral/internal/safefile"
	"github.com/corral-dev/corral/internal/sandbox"
)

// Name is the driver's name.
const Name = "oci"

// HostImage is the image URI of a sandbox built from the host's system
// directories.
const HostImage = "host"

// Config configures the driver.
type Config struct {
	// Root is the driver's directory: bundles, namespaces, the runc state
	// and the image store.
	Root string
	// Runtime is the OCI runtime binary (default "runc").
	Runtime string
	// CorralBinary is bind-mounted into sandboxes (default: this binary).
	CorralBinary string
	// AllowHostImage enables image.uri "host".
	AllowHostImage bool
	// HostCredentials lets tenants' pulls without image.auth use this
	// machine's registry logins (~/.docker/config.json); by default they
	// are anonymous.
	HostCredentials bool
	// ReadyTimeout bounds the wait for execd after start (default 30s).
	ReadyTimeout time.Duration
	// Pool keeps warm sandboxes of these images ready to be claimed.
	Pool []PoolImage
	// Network is how sandboxes with a network policy reach out (Binary
	// and Logger default to the driver's).
	Network launch.Config
	// UserNamespaces gives every sandbox a user namespace of its own
	// whose root is an unprivileged host user (userns_linux.go).
	UserNamespaces bool
	// Runsc is gVisor's runtime binary for sandboxes of the runsc tier
	// (default: runsc on PATH; runsc.go). Without one, the tier is not
	// offered.
	Runsc  string
	Logger *slog.Logger
}

// Driver runs sandboxes with runc.
type Driver struct {
	cfg  Config
	log  *slog.Logger
	runc *runc.Runc
	// runsc runs the runsc tier's sandboxes (nil: it cannot, for the
	// reason noRunsc gives).
	runsc   *runc.Runc
	noRunsc string
	images  *imagestore.Store
	// hostRoot is the "host" image's bottom layer (see buildHostSkeleton).
	hostRoot string

	// mu guards the fields below.
	mu         sync.Mutex
	live       map[string]*instance
	forwarders forward.Set
	pool       *pool
	net        *launch.Enforcers

	// drains are the consoles this instance drains (console_linux.go).
	drains drains
	// runscPassFD: the runsc passes descriptors to PID 1 (--pass-fd), so
	// its exit code comes back through the exit pipe as runc's does.
	runscPassFD bool
	// standIn, set by tests only, is a program mounted where corral's
	// binary goes: a PID 1 that a tenant put there (identity_linux.go).
	standIn string
	// warnings are what is wrong with the runtime binary (its version).
	warnings []string
	// freeze serializes the freezes of one sandbox: pause, resume and
	// a snapshot's.
	freeze idLocks
	// snapMu serializes changes of the snapshots directory.
	snapMu sync.Mutex
	// volMu serializes the making and removing of named volumes.
	volMu sync.Mutex
	// ids hands out the sandboxes' host ID ranges (UserNamespaces); stage
	// holds what runc mounts in their user namespaces (hostStage).
	ids   *idRanges
	stage string
	// stageMu orders the making of a sandbox's stage directory and the
	// removal of the server's when it empties.
	stageMu sync.Mutex
}

var (
	_ driver.Driver      = (*Driver)(nil)
	_ driver.Pauser      = (*Driver)(nil)
	_ driver.Consoler    = (*Driver)(nil)
	_ driver.Snapshotter = (*Driver)(nil)
	_ driver.Volumer     = (*Driver)(nil)
	_ driver.Isolator    = (*Driver)(nil)
)

// instance is what the driver knows of a running sandbox.
type instance struct {
	bundle    string
	pid       int
	startTime uint64
	// ns holds the sandbox's network namespace open; netns names it for
	// this process ("" while none is held: its PID 1 exited before this
	// instance saw it).
	ns    *os.File
	netns string
	// runsc: it runs under gVisor, and pid is its Sentry's.
	runsc bool
}

// hold keeps f as the sandbox's network namespace.
func (sb *instance) hold(f *os.File) {
	sb.ns, sb.netns = f, fdPath(f)
}

// release closes the namespace the sandbox held.
func (sb *instance) release() {
	if sb != nil && sb.ns != nil {
		sb.ns.Close()
		sb.ns, sb.netns = nil, ""
	}
}

// handleState is the driver-private part of a handle.
type handleState struct {
	Bundle    string `json:"bundle"`
	Pid       int    `json:"pid"`
	StartTime uint64 `json:"startTime"`
	// Netns is the namespace's pin of a sandbox made before namespaces
	// were held by descriptors; since then it is empty, and the
	// namespace is PID 1's.
	Netns string `json:"netns,omitempty"`
	// UserNS: the sandbox has a user namespace of its own.
	UserNS bool `json:"userns,omitempty"`
	// Runsc: the sandbox runs under gVisor; Pid is its Sentry's.
	Runsc bool `json:"runsc,omitempty"`
}

// Isolation implements driver.Isolator.
func (d *Driver) Isolation(h *driver.Handle) string {
	var hs handleState
	if h != nil && json.Unmarshal(h.State, &hs) == nil && hs.Runsc {
		return api.IsolationRunsc
	}
	if hs.UserNS {
		return api.IsolationRuncUserns
	}
	return api.IsolationRunc
}

// bundleMeta is written first into a bundle, so List finds even a sandbox
// whose create was interrupted.
type bundleMeta struct {
	ID      string            `json:"id"`
	Tenant  string            `json:"tenant"`
	Labels  map[string]string `json:"labels"`
	Created time.Time         `json:"created"`
	Layers  []string          `json:"layers"`
	// Base is what the root file system lies on (nil in bundles made
	// before snapshots).
	Base *rootBase `json:"base,omitempty"`
	// Volumes are the named volumes the sandbox mounts; DeleteVolumes
	// those it removes when destroyed, if it made them.
	Volumes       []string `json:"volumes,omitempty"`
	DeleteVolumes []string `json:"deleteVolumes,omitempty"`
	// IDRange is the sandbox's host ID range (slot + 1; 0: no user
	// namespace).
	IDRange int `json:"idRange,omitempty"`
	// Isolation is the sandbox's tier when it is not runc (runsc).
	Isolation string `json:"isolation,omitempty"`
}

// New checks the runtime binary and prepares the driver's directories.
func New(cfg Config) (*Driver, error) {
	if cfg.Root == "" {
		return nil, errors.New("oci: Config.Root is required")
	}
	if cfg.Runtime == "" {
		cfg.Runtime = "runc"
	}
	if cfg.ReadyTimeout <= 0 {
		cfg.ReadyTimeout = 30 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = logctx.Discard()
	}
	rt, err := exec.LookPath(cfg.Runtime)
	if err != nil {
		return nil, fmt.Errorf("oci: the OCI runtime %q is not installed (on Debian: apt-get install runc): %w", cfg.Runtime, errdefs.ErrUnavailable)
	}
	if cfg.CorralBinary == "" {
		if cfg.CorralBinary, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("oci: locate the corral binary: %w", err)
		}
	}
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("oci: the native runtime needs root (overlay mounts, namespaces, cgroups): %w", errdefs.ErrPermissionDenied)
	}
	if err := os.MkdirAll(filepath.Join(cfg.Root, "sandboxes"), 0o700); err != nil {
		return nil, fmt.Errorf("oci: %w", err)
	}
	if err := mountRunDir(runDir(cfg.Root)); err != nil {
		return nil, fmt.Errorf("oci: %w", err)
	}
	for _, d := range []string{"bundles", "runc"} {
		if err := os.MkdirAll(filepath.Join(runDir(cfg.Root), d), 0o700); err != nil {
			return nil, fmt.Errorf("oci: %w", err)
		}
	}

	images, err := imagestore.Open(filepath.Join(cfg.Root, "images"), cfg.Logger)
	if err != nil {
		return nil, err
	}
	// Known escapes of the runtime binary, for the operator to see.
	vctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	out, verr := exec.CommandContext(vctx, rt, "--version").Output()
	cancel()
	warnings := runcversion.Check(string(out))
	if verr != nil {
		warnings = []string{fmt.Sprintf("%s --version failed (%v): its version could not be checked for known container escapes", rt, verr)}
	}
	d := &Driver{
		cfg: cfg, log: cfg.Logger, images: images, warnings: warnings,
		runc: &runc.Runc{Command: rt, Root: filepath.Join(runDir(cfg.Root), "runc")},
		live: map[string]*instance{},
	}
	var runscWarnings []string
	d.runsc, d.noRunsc, runscWarnings = newRunsc(cfg, runDir(cfg.Root))
	d.warnings = append(d.warnings, runscWarnings...)
	if d.runsc != nil {
		d.runscPassFD = runscCanPassFD(d.runsc.Command)
	}
	if cfg.Network.Binary == "" {
		cfg.Network.Binary = cfg.CorralBinary
	}
	if cfg.Network.Logger == nil {
		cfg.Network.Logger = cfg.Logger
	}
	d.net = launch.New(cfg.Network)
	bundles, err := filepath.Abs(filepath.Join(runDir(cfg.Root), "bundles"))
	if err != nil {
		return nil, fmt.Errorf("oci: %w", err)
	}
	d.ids = &idRanges{binary: cfg.CorralBinary, load: d.rangesInUse, first: firstSlot(cfg.Root),
		stage: hostStage, bundles: bundles, log: cfg.Logger}
	d.stage = filepath.Join(hostStage, stageName(cfg.Root))
	if cfg.UserNamespaces {
		if err := checkStageParent(hostStage); err != nil {
			return nil, fmt.Errorf("oci: user namespaces need %s for the mount points runc reaches as a sandbox's root, and it cannot hold them "+
				"(make /run root's, mode 0755, or turn user namespaces off with --oci-user-namespaces=false): %w", hostStage, err)
		}
		if err := d.probeUserns(); err != nil {
			return nil, fmt.Errorf("oci: user namespaces cannot be used here (turn them off with --oci-user-namespaces=false, at the cost docs/isolation.md gives): %w", err)
		}
		if err := d.ids.retake(); err != nil {
			d.ids.close()
			return nil, fmt.Errorf("oci: %w", err)
		}
	}
	if cfg.AllowHostImage {
		if d.hostRoot, err = buildHostSkeleton(filepath.Join(cfg.Root, "hostroots")); err != nil {
			return nil, fmt.Errorf("oci: host image: %w", err)
		}
		if err := sweepHostSkeletons(filepath.Join(cfg.Root, "hostroots"), d.hostRoot, filepath.Join(cfg.Root, "hostroot"),
			filepath.Join(runDir(cfg.Root), "bundles")); err != nil {
			d.log.Warn("could not remove a host image skeleton no sandbox uses", "err", err)
		}
	}
	if err := d.sweepSnapshots(context.Background()); err != nil {
		d.log.Warn("could not remove the layers of deleted snapshots", "err", err)
	}
	d.startPool()
	return d, nil
}

// Warnings returns what is known to be wrong with the OCI runtime binary
// (the container escapes its version is still open to) and with runsc's
// (a gVisor older than the one corral pins, or of no known version).
func (d *Driver) Warnings() []string { return d.warnings }

// Images returns the image store.
func (d *Driver) Images() *imagestore.Store { return d.images }

// Where a sandbox's parts live. The bundle (runtime config, metadata,
// status, exit code, the enforcer's files) and the runc state are small
// files written on every create: they live on a tmpfs under Root/run,
// where what a sandbox can make grow is capped by its writer (the
// enforcer's log). The root filesystem's writable layer and the console
// log (capped by PID 1) live on disk under Root/sandboxes. No mount of
// a sandbox's is made in the server's mount namespace (but the file
// system of a disk limit): see create.
func runDir(root string) string              { return filepath.Join(root, "run") }
func (d *Driver) bundleDir(id string) string { return filepath.Join(runDir(d.cfg.Root), "bundles", id) }
func (d *Driver) diskDir(id string) string   { return filepath.Join(d.cfg.Root, "sandboxes", id) }

// netnsPath is where sandboxes made before namespaces were held by
// descriptors have their namespace's pin.
func (d *Driver) netnsPath(id string) string { return filepath.Join(runDir(d.cfg.Root), "netns", id) }

// egressDir holds a sandbox's egress enforcer's files.
func egressDir(bundle string) string { return filepath.Join(bundle, "egress") }

// Close destroys the warm pool and stops the port forwarders; sandboxes
// and their egress enforcers keep running.
func (d *Driver) Close() error {
	d.stopPool()
	d.drains.stopAll()
	d.forwarders.Close()
	d.net.Close()
	d.ids.close()
	_ = os.Remove(d.stage) // if no sandbox has anything there
	return nil
}

// rangesInUse reads the host ID ranges of the sandboxes on disk.
func (d *Driver) rangesInUse() (map[int]string, error) {
	entries, err := os.ReadDir(filepath.Join(runDir(d.cfg.Root), "bundles"))
	if err != nil {
		return nil, err
	}
	used := map[int]string{}
	for _, e := range entries {
		m, err := readMeta(filepath.Join(runDir(d.cfg.Root), "bundles", e.Name()))
		switch {
		case err == nil && m.IDRange > 0:
			used[m.IDRange-1] = e.Name()
		case err != nil && !errors.Is(err, fs.ErrNotExist):
			// Metadata is written before the range is used: a bundle
			// whose metadata cannot be read never ran in one.
			d.log.Warn("a bundle's metadata cannot be read", "bundle", e.Name(), "err", err)
		}
	}
	return used, nil
}

func validID(id string) error {
	if id == "" || len(id) > 128 || strings.ContainsAny(id, "/\\\x00") || id == "." || id == ".." {
		return fmt.Errorf("sandbox id %q: %w", id, errdefs.ErrInvalidArgument)
	}
	return nil
}

// notExist reports runc's "container does not exist" (runc has no error
// codes; its message is the only signal, and this is the one place that
// reads it).
func notExist(err error) bool {
	return err != nil && (strings.Contains(err.Error(), "does not exist") || strings.Contains(err.Error(), "not exist"))
}

// state returns runc's view of a container; ErrNotFound if runc has none.
func (d *Driver) state(ctx context.Context, id string) (*runc.Container, error) {
	rt := d.rt(id)
	c, err := rt.State(ctx, id)
	if notExist(err) {
		return nil, fmt.Errorf("sandbox %s: %w", id, errdefs.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("runc state %s: %w", id, err)
	}
	if rt == d.runsc {
		runscStateExited(c)
	}
	return c, nil
}

// Recover implements driver.Driver.
func (d *Driver) Recover(ctx context.Context, h *driver.Handle) error {
	if h == nil || h.Driver != Name {
		return fmt.Errorf("recover: not an %s handle: %w", Name, errdefs.ErrInvalidArgument)
	}
	var hs handleState
	if err := json.Unmarshal(h.State, &hs); err != nil {
		return fmt.Errorf("recover %s: corrupt handle: %w", h.ID, errdefs.ErrInvalidArgument)
	}
	if _, err := d.state(ctx, h.ID); err != nil {
		return err
	}
	if _, err := os.Stat(hs.Bundle); err != nil {
		return fmt.Errorf("sandbox %s: bundle gone: %w", h.ID, errdefs.ErrNotFound)
	}
	if err := d.thawInterrupted(ctx, h.ID, hs.Bundle); err != nil {
		return err
	}
	sb := &instance{bundle: hs.Bundle, pid: hs.Pid, startTime: hs.StartTime, runsc: hs.Runsc}
	if ns, err := openNetns(hs); err == nil {
		sb.hold(ns)
		if err := d.net.Recover(ctx, h.ID, egressDir(hs.Bundle), sb.netns); err != nil {
			sb.release()
			return fmt.Errorf("sandbox %s: egress: %w", h.ID, err)
		}
	} else if err := d.net.Stop(ctx, h.ID, egressDir(hs.Bundle)); err != nil {
		// PID 1 exited while no server ran, and its namespace with it:
		// nothing is left to police.
		return fmt.Errorf("sandbox %s: egress: %w", h.ID, err)
	}
	d.track(h.ID, sb)
	if sb.netns != "" {
		if err := d.drains.start(h.ID, hs.Bundle, d.diskDir(h.ID)); err != nil {
			return fmt.Errorf("sandbox %s: console: %w", h.ID, err)
		}
	}
	return nil
}

// openNetns opens a recovered sandbox's network namespace: its pin if
// it has one, else its PID 1's.
func openNetns(hs handleState) (*os.File, error) {
	if hs.Netns != "" {
		if f, err := os.Open(hs.Netns); err == nil {
			return f, nil
		}
	}
	return netnsOf(hs.Pid, hs.StartTime)
}

// track records sb as what the driver knows of sandbox id, releasing
// what it knew before.
func (d *Driver) track(id string, sb *instance) {
	d.mu.Lock()
	old := d.live[id]
	d.live[id] = sb
	d.mu.Unlock()
	if old != sb {
		old.release()
	}
}

// adopt records sb for sandbox id unless the driver knows it by now (a
// create or a recovery that finished meanwhile), and returns what it
// knows.
func (d *Driver) adopt(id string, sb *instance) *instance {
	d.mu.Lock()
	old := d.live[id]
	if old == nil {
		d.live[id] = sb
	}
	d.mu.Unlock()
	if old != nil {
		sb.release()
		return old
	}
	return sb
}

// forget drops sandbox id and releases its namespace.
func (d *Driver) forget(id string) {
	d.mu.Lock()
	sb := d.live[id]
	delete(d.live, id)
	d.mu.Unlock()
	sb.release()
}

// running returns a sandbox this instance tracks whose PID 1 is alive,
// without asking runc (an exec of runc costs milliseconds).
func (d *Driver) running(id string) *instance {
	d.mu.Lock()
	sb := d.live[id]
	d.mu.Unlock()
	if sb != nil && procfs.Alive(sb.pid, sb.startTime) {
		return sb
	}
	return nil
}

// lookup returns what the driver knows of id, reading it from runc and
// the bundle if this instance did not create or recover it.
func (d *Driver) lookup(ctx context.Context, id string) (*instance, *runc.Container, error) {
	if err := validID(id); err != nil {
		return nil, nil, fmt.Errorf("sandbox %s: %w", id, errdefs.ErrNotFound)
	}
	c, err := d.state(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	d.mu.Lock()
	sb := d.live[id]
	d.mu.Unlock()
	if sb == nil {
		// Not made nor recovered by this instance: adopted, with its
		// namespace if its PID 1 still runs.
		sb = &instance{bundle: d.bundleDir(id), pid: c.Pid, runsc: bundleRunsc(d.bundleDir(id))}
		if c.Pid > 0 {
			sb.startTime, _ = procfs.StartTime(c.Pid)
			if ns, err := netnsOf(c.Pid, sb.startTime); err == nil {
				sb.hold(ns)
				sb = d.adopt(id, sb)
				if err := d.drains.start(id, sb.bundle, d.diskDir(id)); err != nil {
					d.log.WarnContext(ctx, "drain the console", "sandbox_id", id, "err", err)
				}
			}
		}
	}
	return sb, c, nil
}

// exitFile is the bundle's file that holds PID 1's exit code: written by
// the server from the exit pipe (console_linux.go); sandboxes made before
// that had PID 1 write it through a descriptor.
const exitFile = "exit"

// exitCode reads the code corral init left in the bundle. Sandboxes
// made before init wrote through a descriptor left it in their status
// directory, which they could write: it is read as hostile input.
func exitCode(bundle string) (driver.Exit, bool) {
	for _, dir := range []string{bundle, filepath.Join(bundle, "status")} {
		b, fi, err := safefile.ReadFile(dir, exitFile, 32)
		if err != nil || len(b) == 0 {
			continue
		}
		n, ok := parseExitCode(b)
		if !ok {
			return driver.Exit{}, false
		}
		return driver.Exit{Code: n, At: fi.ModTime().UTC()}, true
	}
	return driver.Exit{}, false
}

// parseExitCode reads an exit code PID 1 wrote: a number from 0 to 255.
func parseExitCode(b []byte) (int, bool) {
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || n < 0 || n > 255 {
		return 0, false
	}
	return n, true
}

// exitOf is the exit of a stopped sandbox: what init recorded, or a kill.
func exitOf(bundle string) driver.Exit {
	if ex, ok := exitCode(bundle); ok {
		return ex
	}
	return driver.Exit{Code: 137, At: time.Now().UTC(), Reason: "killed"}
}

// exitOf is the exit of a stopped sandbox whose bundle is bundle; a runsc
// sandbox's PID 1 recorded it in its root.
func (d *Driver) exitOf(bundle string) driver.Exit {
	id := filepath.Base(bundle)
	d.drains.collectExit(id)
	if ex, ok := exitCode(bundle); ok {
		return ex
	}
	if d.isRunsc(id) {
		if n, at, ok := runscExitCode(filepath.Join(d.diskDir(id), "rootfs")); ok {
			return driver.Exit{Code: n, At: at}
		}
	}
	return exitOf(bundle)
}

// Inspect implements driver.Driver.
func (d *Driver) Inspect(ctx context.Context, id string) (driver.Status, error) {
	sb, c, err := d.lookup(ctx, id)
	if err != nil {
		return driver.Status{}, err
	}
	st := driver.Status{StartedAt: c.Created}
	if st.StartedAt.IsZero() {
		// runsc's state has no creation time: the bundle's.
		if meta, err := readMeta(sb.bundle); err == nil {
			st.StartedAt = meta.Created
		}
	}
	switch c.Status {
	case "created":
		st.Phase = driver.PhaseCreating
	case "running":
		st.Phase = driver.PhaseRunning
	case "paused", "pausing":
		st.Phase = driver.PhasePaused
	default:
		st.Phase = driver.PhaseExited
		ex := d.exitOf(sb.bundle)
		st.Exit = &ex
	}
	return st, nil
}

// Console implements driver.Consoler: the end of the console log, which
// corral init keeps under ConsoleLimit.
func (d *Driver) Console(ctx context.Context, id string, limit int) ([]byte, bool, error) {
	if _, _, err := d.lookup(ctx, id); err != nil {
		return nil, false, err
	}
	f, _, err := safefile.Open(d.diskDir(id), consoleFile)
	if errors.Is(err, os.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, false, err
	}
	b, err := safefile.Tail(f, int64(limit))
	return b, fi.Size() > int64(limit), err
}

// Wait implements driver.Driver: a pidfd of the sandbox's PID 1 becomes
// readable when it exits, whoever its parent is.
func (d *Driver) Wait(ctx context.Context, id string) (driver.Exit, error) {
	// A sandbox this instance tracks is waited for without asking runc:
	// the server waits for every sandbox it makes, and an exec of runc
	// costs a create about a tenth of its CPU (docs/benchmarks.md#density).
	sb := d.running(id)
	if sb == nil {
		var c *runc.Container
		var err error
		if sb, c, err = d.lookup(ctx, id); err != nil {
			return driver.Exit{}, err
		}
		if c.Status == "stopped" || c.Pid <= 0 || !procfs.Alive(sb.pid, sb.startTime) {
			return d.exitOf(sb.bundle), nil
		}
	}
	if err := procfs.WaitExit(ctx, sb.pid, sb.startTime); err != nil {
		return driver.Exit{}, err
	}
	if _, err := os.Stat(sb.bundle); err != nil {
		return driver.Exit{}, fmt.Errorf("sandbox %s: %w", id, errdefs.ErrNotFound)
	}
	return d.exitOf(sb.bundle), nil
}

// Stop implements driver.Driver: SIGTERM to PID 1 (which passes it to the
// entrypoint), SIGKILL to everything after grace.
func (d *Driver) Stop(ctx context.Context, id string, grace time.Duration) error {
	sb, c, err := d.lookup(ctx, id)
	if err != nil {
		return err
	}
	d.forwarders.CloseSandbox(id)
	if c.Status == "stopped" {
		return nil
	}
	rt := d.rt(id)
	if c.Status == "paused" {
		_ = rt.Resume(ctx, id)
	}
	if err := rt.Kill(ctx, id, 15, nil); err != nil && !notExist(err) && !strings.Contains(err.Error(), "not running") {
		return fmt.Errorf("stop %s: %w", id, err)
	}
	wctx, cancel := context.WithTimeout(ctx, grace)
	err = procfs.WaitExit(wctx, sb.pid, sb.startTime)
	cancel()
	if err == nil {
		return nil
	}
	if err := rt.Kill(ctx, id, 9, &runc.KillOpts{All: true}); err != nil && !notExist(err) && !strings.Contains(err.Error(), "not running") {
		return fmt.Errorf("kill %s: %w", id, err)
	}
	return procfs.WaitExit(ctx, sb.pid, sb.startTime)
}

// Destroy implements driver.Driver.
func (d *Driver) Destroy(ctx context.Context, id string) error {
	if validID(id) != nil {
		return nil
	}
	d.forwarders.CloseSandbox(id)
	d.drains.stop(id)
	meta, _ := readMeta(d.bundleDir(id))
	var errs []error
	rt := d.rtOf(meta)
	if rt == d.runsc {
		// runsc cannot delete a paused sandbox: it panics on the state
		// change.
		if c, err := rt.State(ctx, id); err == nil && c.Status == "paused" {
			_ = rt.Resume(ctx, id)
		}
	}
	if err := rt.Delete(ctx, id, &runc.DeleteOpts{Force: true}); err != nil && !notExist(err) {
		errs = append(errs, fmt.Errorf("runc delete: %w", err))
	}
	bundle, disk, stage := d.bundleDir(id), d.diskDir(id), d.stageDir(id)
	// The enforcer's state is in the bundle: stop it before that goes.
	if err := d.net.Stop(ctx, id, egressDir(bundle)); err != nil {
		errs = append(errs, err)
	}
	for _, dir := range []string{stage, disk, bundle} {
		for _, m := range mountsUnder(dir) {
			if err := unmount(m); err != nil {
				errs = append(errs, err)
			}
		}
	}
	d.forget(id)
	if err := removeNetns(d.netnsPath(id)); err != nil {
		errs = append(errs, err)
	}
	if err := removeCgroups(cgroupsPath(id)); err != nil {
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		for _, dir := range []string{stage, disk, bundle} {
			if err := os.RemoveAll(dir); err != nil {
				errs = append(errs, err)
			}
		}
		// The server's stage directory lasts as long as a sandbox of its
		// does (a server killed never closes).
		d.stageMu.Lock()
		_ = os.Remove(d.stage)
		d.stageMu.Unlock()
	}
	if len(errs) == 0 {
		d.ids.release(id)
		// The layers of deleted snapshots this sandbox stacked.
		if meta != nil && meta.Base != nil && len(meta.Base.Chain) > 0 {
			if err := d.sweepSnapshots(ctx); err != nil {
				errs = append(errs, err)
			}
		}
		if err := d.removeVolumesOf(meta); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("destroy %s: %w", id, errors.Join(errs...))
	}
	return nil
}

// mountsUnder lists the mount points under dir, deepest first.
func mountsUnder(bundle string) []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return []string{filepath.Join(bundle, "rootfs")}
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && (fields[4] == bundle || strings.HasPrefix(fields[4], bundle+"/")) {
			out = append(out, fields[4])
		}
	}
	// Deeper mounts first.
	for i := 0; i < len(out); i++ {
		for j := i + 1; j < len(out); j++ {
			if len(out[j]) > len(out[i]) {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

func cgroupsPath(id string) string { return "/corral/" + id }

// removeCgroups removes what is left of a sandbox's cgroups after runc
// (runc deletes them itself; a create interrupted midway, or processes
// still being reaped when runc tried, can leave them). A cgroup that still
// holds processes is busy: they are killed and the removal retried for a
// few seconds.
func removeCgroups(path string) error {
	entries, err := os.ReadDir("/sys/fs/cgroup")
	if err != nil {
		return nil
	}
	dirs := []string{filepath.Join("/sys/fs/cgroup", path)}
	for _, e := range entries {
		dirs = append(dirs, filepath.Join("/sys/fs/cgroup", e.Name(), path))
	}
	deadline := time.Now().Add(5 * time.Second)
	var errs []error
	for _, dir := range dirs {
		for {
			err := os.Remove(dir)
			if err == nil || errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
				break
			}
			if !errors.Is(err, syscall.EBUSY) || time.Now().After(deadline) {
				errs = append(errs, fmt.Errorf("remove cgroup %s: %w", dir, err))
				break
			}
			killCgroupProcs(dir)
			time.Sleep(10 * time.Millisecond)
		}
	}
	return errors.Join(errs...)
}

// killCgroupProcs sends SIGKILL to every process listed in a cgroup.
func killCgroupProcs(dir string) {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return
	}
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil && pid > 1 {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// Pause implements driver.Pauser with the cgroup freezer.
func (d *Driver) Pause(ctx context.Context, id string) error {
	defer d.freeze.lock(id)()
	_, c, err := d.lookup(ctx, id)
	if err != nil {
		return err
	}
	if c.Status != "running" {
		return fmt.Errorf("sandbox %s is %s, not running: %w", id, c.Status, errdefs.ErrFailedPrecondition)
	}
	if err := d.rt(id).Pause(ctx, id); err != nil {
		return fmt.Errorf("pause %s: %w", id, err)
	}
	return nil
}

// Resume implements driver.Pauser.
func (d *Driver) Resume(ctx context.Context, id string) error {
	defer d.freeze.lock(id)()
	_, c, err := d.lookup(ctx, id)
	if err != nil {
		return err
	}
	if c.Status != "paused" {
		return fmt.Errorf("sandbox %s is %s, not paused: %w", id, c.Status, errdefs.ErrFailedPrecondition)
	}
	if err := d.rt(id).Resume(ctx, id); err != nil {
		return fmt.Errorf("resume %s: %w", id, err)
	}
	return nil
}

// Endpoint implements driver.Driver with a host-loopback forwarder.
func (d *Driver) Endpoint(ctx context.Context, id string, port int) (netip.AddrPort, error) {
	if port < 1 || port > 65535 {
		return netip.AddrPort{}, fmt.Errorf("port %d: %w", port, errdefs.ErrInvalidArgument)
	}
	sb := d.running(id)
	if sb == nil {
		var c *runc.Container
		var err error
		if sb, c, err = d.lookup(ctx, id); err != nil {
			return netip.AddrPort{}, err
		}
		if c.Status == "stopped" {
			return netip.AddrPort{}, fmt.Errorf("sandbox %s has stopped: %w", id, errdefs.ErrFailedPrecondition)
		}
	}
	addr, err := d.forwarders.Addr(id, port, launch.PortDialer(egressDir(sb.bundle), sb.netns, port))
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("endpoint: %w", err)
	}
	return addr, nil
}

// List implements driver.Driver: every bundle or on-disk sandbox
// directory under the driver's root, with or without a runc container, is
// a sandbox it owns.
func (d *Driver) List(ctx context.Context) ([]driver.Listing, error) {
	seen := map[string]bool{}
	var out []driver.Listing
	for _, dir := range []string{filepath.Join(runDir(d.cfg.Root), "bundles"), filepath.Join(d.cfg.Root, "sandboxes")} {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			if seen[e.Name()] {
				continue
			}
			meta, err := readMeta(d.bundleDir(e.Name()))
			if err != nil {
				// A disk directory without a bundle: left by a reboot or
				// an interrupted create.
				meta = &bundleMeta{ID: e.Name()}
				if fi, err := e.Info(); err == nil {
					meta.Created = fi.ModTime()
				}
			}
			seen[meta.ID] = true
			if meta.Labels[LabelPool] == "true" {
				continue // warm and unclaimed: nobody's sandbox yet
			}
			out = append(out, driver.Listing{ID: meta.ID, Tenant: meta.Tenant, CreatedAt: meta.Created, Labels: meta.Labels})
		}
	}
	cs, err := d.runc.List(ctx)
	if err != nil {
		return nil, fmt.Errorf("runc list: %w", err)
	}
	if d.runsc != nil {
		more, err := d.runsc.List(ctx)
		if err != nil {
			return nil, fmt.Errorf("runsc list: %w", err)
		}
		cs = append(cs, more...)
	}
	for _, c := range cs {
		if !seen[c.ID] && c.Annotations[sandbox.LabelManaged] == "true" && c.Annotations[LabelPool] != "true" {
			out = append(out, driver.Listing{ID: c.ID, Tenant: c.Annotations[sandbox.LabelTenant], CreatedAt: c.Created, Labels: c.Annotations})
		}
	}
	return out, nil
}

func readMeta(bundle string) (*bundleMeta, error) {
	b, err := os.ReadFile(filepath.Join(bundle, "meta.json"))
	if err != nil {
		return nil, err
	}
	var m bundleMeta
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	return &m, nil
}

// LayersInUse returns the layers of every sandbox on disk, for image GC.
func (d *Driver) LayersInUse() map[string]bool {
	return LayersInUse(d.cfg.Root)
}

// LayersInUse reads the layers of every sandbox bundle and every
// snapshot under root.
func LayersInUse(root string) map[string]bool {
	out := map[string]bool{}
	snaps := filepath.Join(root, "snapshots")
	snapEntries, _ := os.ReadDir(snaps)
	for _, e := range snapEntries {
		// A removed snapshot's image layers are kept by the bundles of
		// the sandboxes that still stack it.
		if sm, err := readSnapshotIn(snaps, e.Name()); err == nil {
			for _, l := range sm.Base.Layers {
				out[l] = true
			}
		}
	}
	bundles := filepath.Join(runDir(root), "bundles")
	entries, _ := os.ReadDir(bundles)
	for _, e := range entries {
		if m, err := readMeta(filepath.Join(bundles, e.Name())); err == nil {
			for _, l := range m.Layers {
				out[l] = true
			}
		}
	}
	return out
}
