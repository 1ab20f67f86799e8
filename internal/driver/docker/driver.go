// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

// Package docker runs sandboxes as containers of a Docker engine, through
// the Engine API with version negotiation (Debian's engine, API 1.41, and
// current ones). Each sandbox is one container named corral-<id>, labelled
// with corral's ownership labels, running `corral init -- <entrypoint>` as
// PID 1 (which reaps zombies and runs execd), with no network but its own
// loopback, every capability but a small default set dropped,
// no-new-privileges, Docker's default seccomp profile, and limits from the
// request. On a local engine the corral binary is bind-mounted read-only
// and execd is reached through the container's network namespace; on a
// remote engine (Config.Remote) the binary is copied in and execd's port
// is published instead. Snapshots are committed images.
package docker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/errdefs"
	"github.com/corral-dev/corral/internal/driver"
	"github.com/corral-dev/corral/internal/driver/warmpool"
	"github.com/corral-dev/corral/internal/egress/launch"
	"github.com/corral-dev/corral/internal/hostnet/forward"
	"github.com/corral-dev/corral/internal/insandbox"
	"github.com/corral-dev/corral/internal/runcversion"
	"github.com/corral-dev/corral/internal/sandbox"
)

// Name is the driver's name in handles.
const Name = "docker"

const (
	stateVersion = 1
	// DefaultPids caps processes and threads when a request sets no limit.
	DefaultPids = 4096
	// LabelSnapshotID marks images that are corral snapshots.
	LabelSnapshotID = "corral.dev/snapshot-id"
	snapshotRepo    = "corral-snapshot"
)

// Config configures the driver.
type Config struct {
	// Host is the engine's address (unix:///var/run/docker.sock,
	// tcp://host:2376, ssh://user@host); empty means $DOCKER_HOST, else
	// the local socket.
	Host string
	// Remote treats the engine as another machine's: the corral binary is
	// copied into each container and execd's port is published on
	// PublishIP instead of being reached through the network namespace.
	// It is implied by a tcp:// or ssh:// Host.
	Remote bool
	// PublishIP is where a remote engine publishes execd (default
	// 127.0.0.1, which suits an engine reached through a tunnel).
	PublishIP string
	// CorralBinary is this machine's corral binary, which sandboxes run
	// as PID 1 (linux, statically linked).
	CorralBinary string
	// RunscRuntime is the engine's runtime (a daemon.json "runtimes"
	// entry) that runs sandboxes of the runsc tier (default "runsc"). On
	// a local engine it must pass --network=host (execd and the egress
	// enforcer reach the sandbox through its network namespace, which
	// gVisor's own network stack would leave empty).
	RunscRuntime string
	// Runtime is the OCI runtime for containers, such as runsc; empty is
	// the engine's default.
	Runtime string
	// ReadyTimeout bounds the wait for execd after start (default 30 s).
	ReadyTimeout time.Duration
	// CallTimeout bounds each Engine API call but image pulls (default
	// 30 s), so a hung engine makes calls fail instead of hang.
	CallTimeout time.Duration
	// StateDir keeps the files of sandboxes' egress enforcers; without it
	// network policies are refused.
	StateDir string
	// ServerID labels this server's containers; List and so the orphan
	// sweep see only those, so servers sharing an engine leave each
	// other's sandboxes alone. Empty: every corral container.
	ServerID string
	// Network is how sandboxes with a network policy reach out, on a
	// local engine (Binary and Logger default to the driver's).
	Network launch.Config
	// SnapshotLimit bounds what a snapshot may write: the apparent size
	// of the container's changes, holes counted, since a commit writes
	// them in full (default 8 GiB).
	SnapshotLimit int64
	Logger        *slog.Logger
}

// Driver implements driver.Driver, driver.Pauser, driver.Snapshotter and
// driver.Volumer on a Docker engine.
type Driver struct {
	cfg        Config
	cli        *client.Client
	forwarders forward.Set
	net        *launch.Enforcers
	// standIn, set by tests only, is a program mounted where corral's
	// binary goes: a PID 1 that a tenant put there.
	standIn string

	// imgMu guards sidecarRef, the egress sidecar image's reference.
	imgMu      sync.Mutex
	sidecarRef string

	mu sync.Mutex
	// netns holds an open handle on each running local sandbox's network
	// namespace, so a reused pid can never redirect a connection.
	netns map[string]*os.File
	// allowed are the (tenant, image ID) pairs the registry accepted.
	allowed map[string]bool
	// warnings are what is wrong with the engine's runtime (its runc).
	warnings []string
	// noRunsc says why the engine cannot run the runsc tier ("": it can).
	noRunsc string
	// pool keeps templates' warm containers (local engines with a state
	// directory; nil otherwise).
	pool *warmpool.Pool
	// bg is work a call left running (the engine told a claim's limits).
	bg sync.WaitGroup
	// warm holds what MakeWarm found of each warm container (d.mu).
	warm map[string]warmContainer
	// closing is closed when Close first begins.
	closing     chan struct{}
	closingOnce sync.Once
}

// New connects to the engine and checks that it answers.
func New(ctx context.Context, cfg Config) (*Driver, error) {
	if cfg.ReadyTimeout == 0 {
		cfg.ReadyTimeout = 30 * time.Second
	}
	if cfg.CallTimeout == 0 {
		cfg.CallTimeout = 30 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.PublishIP == "" {
		cfg.PublishIP = "127.0.0.1"
	}
	if _, err := netip.ParseAddr(cfg.PublishIP); err != nil {
		return nil, fmt.Errorf("docker: publish address %q: %w", cfg.PublishIP, errdefs.ErrInvalidArgument)
	}
	if cfg.CorralBinary == "" {
		return nil, fmt.Errorf("docker: the corral binary to run in sandboxes is not set: %w", errdefs.ErrInvalidArgument)
	}
	opts := []client.Opt{client.FromEnv}
	if cfg.Host != "" {
		opts = append(opts, client.WithHost(cfg.Host))
	}
	cli, err := client.New(opts...)
	if err != nil {
		return nil, fmt.Errorf("docker: %w: %w", errdefs.ErrInvalidArgument, err)
	}
	host := cli.DaemonHost()
	if strings.HasPrefix(host, "tcp://") || strings.HasPrefix(host, "ssh://") || strings.HasPrefix(host, "http") {
		cfg.Remote = true
	}
	if cfg.Network.Binary == "" {
		cfg.Network.Binary = cfg.CorralBinary
	}
	if cfg.Network.Logger == nil {
		cfg.Network.Logger = cfg.Logger
	}
	if cfg.RunscRuntime == "" {
		cfg.RunscRuntime = "runsc"
	}
	d := &Driver{cfg: cfg, cli: cli, netns: map[string]*os.File{}, net: launch.New(cfg.Network), warm: map[string]warmContainer{},
		closing: make(chan struct{})}
	cctx, cancel := d.call(ctx)
	defer cancel()
	if _, err := cli.Ping(cctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		// Not fatal: calls answer "unavailable" until the engine is back,
		// and the server recovers its sandboxes then.
		cfg.Logger.WarnContext(ctx, "the Docker engine does not answer yet", "host", cli.DaemonHost(), "err", err)
		d.noRunsc = "the engine did not answer when the server started"
		d.startPool(ctx, false)
		return d, nil
	}
	d.noRunsc = d.checkRunsc(cctx)
	if cfg.Runtime == "" || cfg.Runtime == "runc" {
		if v, err := cli.ServerVersion(cctx, client.ServerVersionOptions{}); err == nil {
			for _, c := range v.Components {
				if c.Name == "runc" {
					d.warnings = runcversion.Check("runc version " + c.Version + "\ncommit: " + c.Details["GitCommit"] + "\n")
				}
			}
		}
	}
	d.startPool(ctx, true)
	return d, nil
}

// startPool starts keeping templates' warm containers, on a local engine
// with a state directory, after removing an earlier process's (when the
// engine answers).
func (d *Driver) startPool(ctx context.Context, answers bool) {
	if d.cfg.Remote || d.cfg.StateDir == "" {
		return
	}
	if answers {
		d.removeStaleWarm(ctx)
	}
	d.pool = warmpool.Start(d, d.cfg.Logger, nil)
}

// Warnings returns what is known to be wrong with the engine's OCI
// runtime: the container escapes its runc is still open to.
func (d *Driver) Warnings() []string { return d.warnings }

// Close destroys the warm containers not claimed and stops the port
// forwarders; sandboxes keep running.
func (d *Driver) Close() error {
	d.closingOnce.Do(func() { close(d.closing) })
	if d.pool != nil {
		d.pool.Stop()
	}
	d.bg.Wait()
	d.forwarders.Close()
	d.net.Close()
	d.mu.Lock()
	for id, f := range d.netns {
		f.Close()
		delete(d.netns, id)
	}
	d.mu.Unlock()
	return d.cli.Close()
}

// call bounds one Engine API call.
func (d *Driver) call(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, d.cfg.CallTimeout)
}

// engineErr classifies an engine error: an engine that cannot be reached
// or does not answer in time is unavailable, and the message says which.
func (d *Driver) engineErr(op string, err error) error {
	switch {
	case err == nil:
		return nil
	case client.IsErrConnectionFailed(err) || errors.Is(err, context.DeadlineExceeded):
		return errdefs.Wrap(errdefs.ErrUnavailable, api.CodeSandboxRuntimeUnavailable,
			fmt.Sprintf("the Docker engine at %s did not answer (%s); sandboxes come back when it does", d.cli.DaemonHost(), op), err)
	case cerrdefs.IsNotFound(err):
		return fmt.Errorf("%s: %w: %w", op, errdefs.ErrNotFound, err)
	case cerrdefs.IsConflict(err):
		return fmt.Errorf("%s: %w: %w", op, errdefs.ErrFailedPrecondition, err)
	case cerrdefs.IsInvalidArgument(err):
		return fmt.Errorf("%s: %w: %w", op, errdefs.ErrInvalidArgument, err)
	case cerrdefs.IsUnauthorized(err) || cerrdefs.IsPermissionDenied(err):
		return fmt.Errorf("%s: %w: %w", op, errdefs.ErrPermissionDenied, err)
	}
	return fmt.Errorf("docker %s: %w", op, err)
}

func containerName(id string) string { return "corral-" + id }

func validID(id string) error {
	if id == "" || len(id) > 128 {
		return fmt.Errorf("sandbox id %q: %w", id, errdefs.ErrInvalidArgument)
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return fmt.Errorf("sandbox id %q: %w", id, errdefs.ErrInvalidArgument)
		}
	}
	return nil
}

// Inspect implements driver.Driver.
func (d *Driver) Inspect(ctx context.Context, id string) (driver.Status, error) {
	c, err := d.inspect(ctx, id)
	if err != nil {
		return driver.Status{}, err
	}
	return statusOf(c), nil
}

func statusOf(c container.InspectResponse) driver.Status {
	st := driver.Status{}
	st.StartedAt, _ = time.Parse(time.RFC3339Nano, c.State.StartedAt)
	switch {
	case c.State.Paused:
		st.Phase = driver.PhasePaused
	case c.State.Running || c.State.Restarting:
		st.Phase = driver.PhaseRunning
	case c.State.Status == container.StateCreated:
		st.Phase = driver.PhaseCreating
	default:
		st.Phase = driver.PhaseExited
		exit := exitOf(c)
		st.Exit = &exit
	}
	return st
}

func exitOf(c container.InspectResponse) driver.Exit {
	e := driver.Exit{Code: c.State.ExitCode}
	e.At, _ = time.Parse(time.RFC3339Nano, c.State.FinishedAt)
	switch {
	case c.State.OOMKilled:
		e.Reason = "OOMKilled"
	case c.State.Error != "":
		e.Reason = c.State.Error
	}
	return e
}

// Wait implements driver.Driver. It outlives engine restarts: while the
// engine cannot be reached it retries, so exit watchers need no help.
func (d *Driver) Wait(ctx context.Context, id string) (driver.Exit, error) {
	delay := 100 * time.Millisecond
	for {
		c, err := d.inspect(ctx, id)
		if errors.Is(err, errdefs.ErrNotFound) {
			return driver.Exit{}, err
		}
		if err == nil && !c.State.Running && !c.State.Paused && !c.State.Restarting && c.State.Status != container.StateCreated {
			return exitOf(c), nil
		}
		if err == nil {
			res := d.cli.ContainerWait(ctx, containerName(id), client.ContainerWaitOptions{Condition: container.WaitConditionNotRunning})
			select {
			case <-res.Result:
				delay = 100 * time.Millisecond
				continue // inspect for the full story
			case err = <-res.Error:
			case <-ctx.Done():
				return driver.Exit{}, ctx.Err()
			}
		}
		if ctx.Err() != nil {
			return driver.Exit{}, ctx.Err()
		}
		d.cfg.Logger.DebugContext(ctx, "waiting for the Docker engine", "sandbox_id", id, "err", err)
		select {
		case <-ctx.Done():
			return driver.Exit{}, ctx.Err()
		case <-time.After(delay):
		}
		delay = min(delay*2, 5*time.Second)
	}
}

// Stop implements driver.Driver.
func (d *Driver) Stop(ctx context.Context, id string, grace time.Duration) error {
	c, err := d.inspect(ctx, id)
	if err != nil {
		return err
	}
	d.forwarders.CloseSandbox(id)
	if !c.State.Running {
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, d.cfg.CallTimeout+grace)
	defer cancel()
	if c.State.Paused {
		if _, err := d.cli.ContainerUnpause(cctx, c.ID, client.ContainerUnpauseOptions{}); err != nil && !cerrdefs.IsNotFound(err) {
			return d.engineErr("unpause "+id, err)
		}
	}
	secs := int((grace + time.Second - 1) / time.Second)
	if _, err := d.cli.ContainerStop(cctx, c.ID, client.ContainerStopOptions{Timeout: &secs}); err != nil && !cerrdefs.IsNotFound(err) {
		return d.engineErr("stop "+id, err)
	}
	if d.cfg.Remote {
		// Its sidecar has nothing left to police, nor anything to follow.
		if _, err := d.cli.ContainerStop(cctx, sidecarName(id), client.ContainerStopOptions{}); err != nil && !cerrdefs.IsNotFound(err) {
			return d.engineErr("stop the egress sidecar of "+id, err)
		}
		if err := d.net.Stop(ctx, id, d.egressDir(id)); err != nil {
			return err
		}
	}
	return nil
}

// Destroy implements driver.Driver.
func (d *Driver) Destroy(ctx context.Context, id string) error {
	if validID(id) != nil {
		return nil
	}
	d.forwarders.CloseSandbox(id)
	d.mu.Lock()
	delete(d.warm, id)
	d.mu.Unlock()
	if err := d.removeSidecar(ctx, id); err != nil {
		return fmt.Errorf("destroy %s: %w", id, err)
	}
	if err := d.stopNetwork(ctx, id); err != nil {
		return fmt.Errorf("destroy %s: %w", id, err)
	}
	d.dropNetns(id)
	var labels map[string]string
	cctx, cancel := d.call(ctx)
	defer cancel()
	if c, err := d.inspect(ctx, id); err == nil {
		labels = c.Config.Labels
		if c.State.Paused {
			// Thawed first: runsc's containerd shim outlives a container
			// removed while paused (the engine's runc does not mind).
			_, _ = d.cli.ContainerUnpause(cctx, c.ID, client.ContainerUnpauseOptions{})
		}
	}
	_, err := d.cli.ContainerRemove(cctx, containerName(id), client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
	if err != nil && !cerrdefs.IsNotFound(err) && !strings.Contains(err.Error(), "is already in progress") {
		return d.engineErr("remove "+id, err)
	}
	if err == nil {
		d.pruneSnapshots(ctx)
		d.removeVolumesOf(ctx, id, labels)
		if d.cfg.StateDir != "" {
			_ = os.RemoveAll(d.warmDir(id))
		}
	}
	return nil
}

// Endpoint implements driver.Driver. On a local engine every port gets a
// loopback forwarder into the sandbox's namespace; a remote engine
// publishes execd only.
func (d *Driver) Endpoint(ctx context.Context, id string, port int) (netip.AddrPort, error) {
	if port < 1 || port > 65535 {
		return netip.AddrPort{}, fmt.Errorf("port %d: %w", port, errdefs.ErrInvalidArgument)
	}
	// The server's proxy asks on every request: a forwarder already made
	// answers without a round trip to the engine (Stop and Destroy close
	// them).
	if addr, ok := d.forwarders.Lookup(id, port); ok {
		return addr, nil
	}
	c, err := d.inspect(ctx, id)
	if err != nil {
		return netip.AddrPort{}, err
	}
	if !c.State.Running {
		return netip.AddrPort{}, fmt.Errorf("sandbox %s has stopped: %w", id, errdefs.ErrFailedPrecondition)
	}
	if d.cfg.Remote && port == insandbox.EgressPort {
		// Through a forwarder here that speaks TLS to the sidecar and
		// checks its certificate.
		dial, err := d.sidecarDialer(id, c)
		if err != nil {
			return netip.AddrPort{}, err
		}
		addr, err := d.forwarders.Addr(id, port, dial)
		if err != nil {
			return netip.AddrPort{}, fmt.Errorf("endpoint: %w", err)
		}
		return addr, nil
	}
	if d.cfg.Remote {
		return d.published(c, port)
	}
	ns, err := d.nsPath(id, c)
	if err != nil {
		return netip.AddrPort{}, err
	}
	addr, err := d.forwarders.Addr(id, port, launch.PortDialer(d.egressDir(id), ns, port))
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("endpoint: %w", err)
	}
	return addr, nil
}

// published returns where a remote engine published port.
func (d *Driver) published(c container.InspectResponse, port int) (netip.AddrPort, error) {
	if port != insandbox.ExecdPort && port != insandbox.EgressPort {
		return netip.AddrPort{}, fmt.Errorf("on a remote Docker engine only execd's port is reachable; reach port %d through execd's /proxy/%d: %w",
			port, port, errdefs.ErrNotImplemented)
	}
	if c.NetworkSettings != nil {
		for p, bindings := range c.NetworkSettings.Ports {
			if int(p.Num()) != port {
				continue
			}
			for _, b := range bindings {
				n, err := strconv.Atoi(b.HostPort)
				if err != nil {
					continue
				}
				ip, err := netip.ParseAddr(d.cfg.PublishIP)
				if err != nil || ip.IsUnspecified() {
					ip = netip.MustParseAddr("127.0.0.1")
				}
				return netip.AddrPortFrom(ip, uint16(n)), nil
			}
		}
	}
	if port == insandbox.EgressPort {
		return netip.AddrPort{}, fmt.Errorf("the sandbox has no network policy, so no egress API: %w", errdefs.ErrNotFound)
	}
	return netip.AddrPort{}, fmt.Errorf("sandbox execd port is not published: %w", errdefs.ErrFailedPrecondition)
}

// List implements driver.Driver. A claimed warm container shows its
// claim's tenant and labels; one not claimed is not listed.
func (d *Driver) List(ctx context.Context) ([]driver.Listing, error) {
	all, err := d.listAll(ctx)
	if err != nil {
		return nil, err
	}
	var out []driver.Listing
	for _, c := range all {
		labels := c.labels
		if claim, warm, claimed := d.claimOf(c.id, labels); warm {
			if !claimed {
				continue
			}
			labels = claim.Labels
		}
		out = append(out, driver.Listing{ID: c.id, Tenant: labels[sandbox.LabelTenant], CreatedAt: c.created, Labels: labels})
	}
	return out, nil
}

// listed is a sandbox container of this server's.
type listed struct {
	id      string
	labels  map[string]string
	created time.Time
}

// listAll lists this server's sandbox containers, warm ones included.
func (d *Driver) listAll(ctx context.Context) ([]listed, error) {
	cctx, cancel := d.call(ctx)
	defer cancel()
	filters := client.Filters{}.Add("label", sandbox.LabelManaged+"=true")
	if d.cfg.ServerID != "" {
		filters = filters.Add("label", sandbox.LabelServer+"="+d.cfg.ServerID)
	}
	res, err := d.cli.ContainerList(cctx, client.ContainerListOptions{All: true, Filters: filters})
	if err != nil {
		return nil, d.engineErr("list", err)
	}
	var out []listed
	for _, c := range res.Items {
		if id := c.Labels[sandbox.LabelSandboxID]; id != "" {
			out = append(out, listed{id: id, labels: c.Labels, created: time.Unix(c.Created, 0)})
		}
	}
	return out, nil
}

// Pause implements driver.Pauser with the engine's cgroup freezer.
func (d *Driver) Pause(ctx context.Context, id string) error {
	c, err := d.inspect(ctx, id)
	if err != nil {
		return err
	}
	if !c.State.Running || c.State.Paused {
		return fmt.Errorf("sandbox %s is not running: %w", id, errdefs.ErrFailedPrecondition)
	}
	cctx, cancel := d.call(ctx)
	defer cancel()
	if _, err := d.cli.ContainerPause(cctx, c.ID, client.ContainerPauseOptions{}); err != nil {
		return d.engineErr("pause "+id, err)
	}
	return d.settle(ctx, id, true)
}

// Resume implements driver.Pauser.
func (d *Driver) Resume(ctx context.Context, id string) error {
	c, err := d.inspect(ctx, id)
	if err != nil {
		return err
	}
	if !c.State.Paused {
		return fmt.Errorf("sandbox %s is not paused: %w", id, errdefs.ErrFailedPrecondition)
	}
	cctx, cancel := d.call(ctx)
	defer cancel()
	if _, err := d.cli.ContainerUnpause(cctx, c.ID, client.ContainerUnpauseOptions{}); err != nil {
		return d.engineErr("resume "+id, err)
	}
	return d.settle(ctx, id, false)
}

// settle waits (up to 5 s) until the engine reports the container as
// paused or not: some engines record the change after the call returns,
// and the API promises it is done when Pause or Resume answer.
func (d *Driver) settle(ctx context.Context, id string, paused bool) error {
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, err := d.inspect(ctx, id)
		if err != nil {
			return err
		}
		if c.State.Paused == paused || time.Now().After(deadline) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

var (
	_ driver.Driver      = (*Driver)(nil)
	_ driver.Pauser      = (*Driver)(nil)
	_ driver.Snapshotter = (*Driver)(nil)
	_ driver.Consoler    = (*Driver)(nil)
	_ driver.Volumer     = (*Driver)(nil)
	_ driver.Isolator    = (*Driver)(nil)
)

// Console implements driver.Consoler: the end of the container's log,
// which is what corral init passes on of the entrypoint's output.
func (d *Driver) Console(ctx context.Context, id string, limit int) ([]byte, bool, error) {
	c, err := d.inspect(ctx, id)
	if err != nil {
		return nil, false, err
	}
	cctx, cancel := d.call(ctx)
	defer cancel()
	logs, err := d.cli.ContainerLogs(cctx, c.ID, client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true})
	if err != nil {
		return nil, false, d.engineErr("logs of "+id, err)
	}
	defer logs.Close()
	t := &driver.Tail{Max: limit}
	if _, err := stdcopy.StdCopy(t, t, logs); err != nil {
		return nil, false, d.engineErr("logs of "+id, err)
	}
	return t.Bytes(), t.Truncated, nil
}

// Isolation implements driver.Isolator: runsc for the runsc tier, else
// the engine's OCI runtime, runc unless --docker-runtime names another.
// Containers have no user namespace of their own here (the engine's
// userns-remap aside).
func (d *Driver) Isolation(h *driver.Handle) string {
	var st state
	if h != nil && json.Unmarshal(h.State, &st) == nil && st.Isolation == api.IsolationRunsc {
		return api.IsolationRunsc
	}
	if d.cfg.Runtime == "" {
		return api.IsolationRunc
	}
	return d.cfg.Runtime
}
