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
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	runc "github.com/containerd/go-runc"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/errdefs"
	"github.com/corral-dev/corral/internal/driver"
	"github.com/corral-dev/corral/internal/driver/warmpool"
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
	// openFilesHard is the hard open-file limit of a sandbox's processes.
	openFilesHard uint64

	// mu guards the fields below.
	mu   sync.Mutex
	live map[string]*instance
	// creating are the sandboxes this process is making: List leaves them
	// out until their create returns, so no sweep takes a half-written
	// bundle (a warm sandbox's above all, which no record owns) for an
	// orphan.
	creating   map[string]bool
	forwarders forward.Set
	pool       *warmpool.Pool
	net        *launch.Enforcers

	// drains are the consoles this instance drains (console_linux.go).
	drains drains
	// runscPassFD: the runsc passes descriptors to PID 1 (--pass-fd), so
	// its exit code comes back through the exit pipe as runc's does.
	runscPassFD bool
	// standIn, set by tests only, is a program mounted where corral's
	// binary goes: a PID 1 that a tenant put there (identity_linux.go).
	standIn string
	// bundleMade, set by tests only, is called when a create has made its
	// bundle directory and written nothing in it yet.
	bundleMade func(id string)
	// listing is held (read) by List from its first look to its last, and
	// (write) by a create leaving creating: no create ends unseen in the
	// middle of a List, so what List reads of creating at its end covers
	// every bundle it saw being made.
	listing sync.RWMutex
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
		live: map[string]*instance{}, creating: map[string]bool{}, openFilesHard: sandboxOpenFilesHard(),
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
	d.ids = &idRanges{binary: cfg.CorralBinary, maker: newUsernsMaker(cfg.CorralBinary), load: d.rangesInUse, first: firstSlot(cfg.Root),
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

// Close destroys the warm pool and stops the port forwarders; sandboxes
// and their egress enforcers keep running.
func (d *Driver) Close() error {
	d.pool.Stop()
	d.drains.stopAll()
	d.forwarders.Close()
	d.net.Close()
	d.ids.close()
	_ = os.Remove(d.stage) // if no sandbox has anything there
	return nil
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

// cgroupsBusy reports whether runc delete failed only at removing the
// container's cgroups (a process of it still being reaped: EBUSY). runc
// has removed its state by then, and removeCgroups below retries the
// cgroups, killing what is left in them, for a few seconds.
func cgroupsBusy(err error) bool {
	return strings.Contains(err.Error(), "unable to remove container's cgroup")
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
	if err := rt.Delete(ctx, id, &runc.DeleteOpts{Force: true}); err != nil && !notExist(err) && !cgroupsBusy(err) {
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
// a sandbox it owns, except those whose create is still running here.
func (d *Driver) List(ctx context.Context) ([]driver.Listing, error) {
	d.listing.RLock()
	defer d.listing.RUnlock()
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
	d.mu.Lock()
	out = slices.DeleteFunc(out, func(l driver.Listing) bool { return d.creating[l.ID] })
	d.mu.Unlock()
	return out, nil
}
