// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package docker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/errdefs"
	"github.com/corral-dev/corral/internal/driver"
	"github.com/corral-dev/corral/internal/egress/launch"
	"github.com/corral-dev/corral/internal/hostnet/forward"
	"github.com/corral-dev/corral/internal/hostnet/netns"
	"github.com/corral-dev/corral/internal/initproc"
	"github.com/corral-dev/corral/internal/insandbox"
	"github.com/corral-dev/corral/internal/procfs"
	"github.com/corral-dev/corral/internal/sandbox"
	"github.com/corral-dev/corral/internal/verifier"
)

// Create implements driver.Driver: image (pulled when missing), container,
// start, and execd answering. Whatever fails, or a cancelled ctx, leaves
// no container behind. A claimed warm sandbox is only personalised; if
// that fails it is replaced by a fresh one.
func (d *Driver) Create(ctx context.Context, spec driver.Spec) (*driver.Handle, error) {
	if d.pool != nil && d.pool.Take(spec.ID) {
		h, err := d.personalise(ctx, spec)
		if err == nil {
			return h, nil
		}
		d.cfg.Logger.WarnContext(ctx, "a warm sandbox could not be personalised; creating afresh", "sandbox_id", spec.ID, "err", err)
		if err := d.Destroy(context.WithoutCancel(ctx), spec.ID); err != nil {
			return nil, err
		}
	}
	return d.create(ctx, spec, false)
}

// create makes spec's sandbox; a warm one (for the pool) holds its
// entrypoint back until a claim.
func (d *Driver) create(ctx context.Context, spec driver.Spec, warm bool) (_ *driver.Handle, err error) {
	mode, err := d.admit(spec)
	if err != nil {
		return nil, err
	}
	policed := mode.policed()
	var upstreams []string
	if mode == sidecarEnforcer {
		if upstreams, err = d.remoteUpstreams(); err != nil {
			return nil, err
		}
	}
	ref, user, err := d.imageOf(ctx, spec)
	if err != nil {
		return nil, err
	}
	cfg, host := d.containerConfig(spec, ref, user, mode, warm)
	if warm {
		defer func() {
			if err != nil {
				_ = os.RemoveAll(d.warmDir(spec.ID))
			}
		}()
		if err := d.prepareWarm(spec, host); err != nil {
			return nil, err
		}
	}
	staged, err := d.volumeMounts(ctx, spec, host, cfg)
	defer func() {
		if err != nil {
			d.removeMadeVolumes(context.WithoutCancel(ctx), spec)
		}
	}()
	if err != nil {
		return nil, err
	}
	// The engine bound them at the start; the sandbox keeps its own.
	defer unstage(staged)
	if policed {
		defer func() {
			if err != nil {
				_ = os.RemoveAll(d.egressDir(spec.ID))
			}
		}()
		if err := d.prepareEgress(spec, mode, host); err != nil {
			return nil, err
		}
	}
	id, err := d.createContainer(ctx, spec, cfg, host)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			d.removeFailed(ctx, spec.ID, id, policed)
		}
	}()
	if err := d.checkMountTargets(ctx, id, spec); err != nil {
		return nil, err
	}
	if d.cfg.Remote {
		if err := d.copyInRemote(ctx, spec.ID, id, policed); err != nil {
			return nil, err
		}
	}
	cctx, cancel := d.call(ctx)
	_, err = d.cli.ContainerStart(cctx, id, client.ContainerStartOptions{})
	cancel()
	if err != nil {
		return nil, d.startErr(ctx, spec.ID, err)
	}
	if err := d.startEgress(ctx, spec, mode, id, upstreams); err != nil {
		return nil, err
	}
	// PID 1 is the host's own corral binary, bind-mounted, when the
	// engine is this machine's and its runtime shares the host's kernel
	// view of processes (runc); gVisor's and a remote engine's are not.
	identity := !d.cfg.Remote && spec.Isolation != api.IsolationRunsc && (d.cfg.Runtime == "" || d.cfg.Runtime == "runc")
	if err := d.waitReady(ctx, spec.ID, identity); err != nil {
		return nil, err
	}
	st, _ := json.Marshal(state{ContainerID: id, Isolation: spec.Isolation})
	return &driver.Handle{ID: spec.ID, Driver: Name, Version: stateVersion, State: st}, nil
}

// admit refuses a spec this engine cannot run, and picks its egress mode
// (once: everything after follows it).
func (d *Driver) admit(spec driver.Spec) (egressMode, error) {
	if err := validID(spec.ID); err != nil {
		return 0, err
	}
	if len(spec.Entrypoint) == 0 {
		return 0, fmt.Errorf("entrypoint is empty: %w", errdefs.ErrInvalidArgument)
	}
	if spec.SecretsDir != "" && d.cfg.Remote {
		return 0, errdefs.New(errdefs.ErrInvalidArgument, api.CodeAPINotSupported,
			"secrets on demand need a local Docker engine (the sandbox reaches the server over a socket it mounts)")
	}
	mode := d.egressModeOf(spec)
	if mode.policed() && d.cfg.StateDir == "" {
		return 0, errdefs.New(errdefs.ErrInvalidArgument, api.CodeAPINotSupported,
			"network policies need the driver's state directory, which this server does not have")
	}
	return mode, nil
}

// createContainer creates the sandbox's container and returns its id.
func (d *Driver) createContainer(ctx context.Context, spec driver.Spec, cfg *container.Config, host *container.HostConfig) (string, error) {
	cctx, cancel := d.call(ctx)
	created, err := d.cli.ContainerCreate(cctx, client.ContainerCreateOptions{Config: cfg, HostConfig: host, Name: containerName(spec.ID)})
	cancel()
	switch {
	case err == nil:
		return created.ID, nil
	case cerrdefs.IsConflict(err):
		return "", fmt.Errorf("sandbox %s exists: %w", spec.ID, errdefs.ErrAlreadyExists)
	case spec.Resources.DiskBytes > 0 && strings.Contains(err.Error(), "storage-opt"):
		return "", errdefs.Wrap(errdefs.ErrNotImplemented, api.CodeSandboxDiskLimitUnsupported,
			"this Docker engine cannot limit a sandbox's disk (its overlay2 storage needs xfs with project quotas)", err)
	}
	return "", d.engineErr("create "+spec.ID, err)
}

// removeFailed removes what a failed create of sandbox id made: its
// container (containerID), its egress sidecar and network, its namespace.
// It runs even when ctx is what ended the create.
func (d *Driver) removeFailed(ctx context.Context, id, containerID string, policed bool) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.cfg.CallTimeout)
	defer cancel()
	if policed {
		if nerr := errors.Join(d.removeSidecar(rctx, id), d.stopNetwork(rctx, id)); nerr != nil {
			d.cfg.Logger.WarnContext(ctx, "clean up the egress of a failed create", "sandbox_id", id, "err", nerr)
		}
	}
	_, _ = d.cli.ContainerRemove(rctx, containerID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
	d.dropNetns(id)
}

// checkMountTargets refuses a created container whose image holds a
// symbolic link on the way to a mount target: the engine follows links
// in a target inside the container's root, so a volume at /v/.corral
// with /v -> / would cover corral's binary, and an image link at
// /var/lib/corral-execd would put a copy of the image's own files over
// /.corral. Each element of each target is asked of the engine (which
// reports a final link as such, and follows none) until one is missing:
// the engine makes the rest as directories, where the checked prefix
// leads. Volumes are not nested (sandbox.ParseVolumes), and nothing runs
// in the container yet to change its tree.
func (d *Driver) checkMountTargets(ctx context.Context, containerID string, spec driver.Spec) error {
	type target struct{ volume, path string }
	// corral's own: where a remote engine's copy of the binary goes, and
	// the volume the engine fills from the image.
	targets := []target{{"", insandbox.BinaryDir}, {"", insandbox.ExecdStateDir}}
	for _, v := range spec.Volumes {
		targets = append(targets, target{v.Name, v.Target})
	}
	for _, t := range targets {
		p := ""
		for _, part := range strings.Split(strings.TrimPrefix(t.path, "/"), "/") {
			p += "/" + part
			cctx, cancel := d.call(ctx)
			res, err := d.cli.ContainerStatPath(cctx, containerID, client.ContainerStatPathOptions{Path: p})
			cancel()
			if cerrdefs.IsNotFound(err) {
				break
			}
			if err != nil {
				return d.engineErr("stat "+p+" in "+spec.ID, err)
			}
			if res.Stat.Mode&os.ModeSymlink == 0 {
				continue
			}
			if t.volume == "" {
				return errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeInvalidParameter,
					"the image holds a symbolic link at %s, where corral mounts its own files", p)
			}
			return errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeVolumeInvalidMountPath,
				"volume %q: mountPath %s passes through a symbolic link in the image or snapshot (%s); mount it at a path without links", t.volume, t.path, p)
		}
	}
	return nil
}

// containerConfig is the container a spec asks for; a policed one's PID 1
// holds its entrypoint back until the enforcer's rules are in.
func (d *Driver) containerConfig(spec driver.Spec, ref, imageUser string, mode egressMode, warm bool) (*container.Config, *container.HostConfig) {
	hex := strings.ReplaceAll(spec.ID, "-", "")
	hostname := "sandbox-" + hex[:min(12, len(hex))]
	o := initproc.DefaultOptions()
	caps := insandbox.Capabilities()
	if mode == isolatedBridge {
		// On the engine's bridge without a policy: PID 1 closes the
		// namespace to all but execd's port, then gives NET_ADMIN up.
		o.IsolateNetwork = strconv.Itoa(insandbox.ExecdPort)
		caps = append(caps, "NET_ADMIN")
	}
	o.User = imageUser
	env := make([]string, 0, len(spec.Env)+1)
	if spec.CredentialProxy && spec.Policed() {
		o.TrustCA = insandbox.VaultCA
		trust := launch.TrustEnv()
		for _, k := range slices.Sorted(maps.Keys(trust)) {
			env = append(env, k+"="+trust[k])
		}
	}
	switch {
	case warm:
		// The entrypoint, the token and the environment come at the claim.
		o.WaitStart, o.ExecdTokenFile, o.ExecdEnvFile = gateInSandbox+"/start", gateInSandbox+"/token", gateInSandbox+"/env"
	case mode == sidecarEnforcer:
		o.WaitURL, o.WaitTimeout, o.Entrypoint = waitURL, d.cfg.ReadyTimeout+30*time.Second, spec.Entrypoint
	case mode == localEnforcer && spec.Isolation == api.IsolationRunsc:
		// Under gVisor a host FIFO can lose what is written before PID 1
		// opens it: the entrypoint comes in a file PID 1 polls for.
		o.WaitStartFile = gateInSandbox + "/" + startFile
	case mode == localEnforcer:
		// The entrypoint comes through the FIFO once the rules are in.
		o.WaitStart = gateInSandbox + "/start"
	default:
		o.Entrypoint = spec.Entrypoint
	}
	args := o.Argv(insandbox.Binary)
	for _, k := range slices.Sorted(maps.Keys(spec.Env)) {
		env = append(env, k+"="+spec.Env[k])
	}
	// Only the token's verifier: code in the container can read PID 1's
	// environment, and the engine's inspect shows it.
	env = append(env, "EXECD_ACCESS_TOKEN="+verifier.Of(spec.ExecdToken))
	pids := spec.Resources.Pids
	if pids <= 0 {
		pids = DefaultPids
	}
	cfg := &container.Config{
		Image:      ref,
		Hostname:   hostname,
		Entrypoint: args,
		Cmd:        nil,
		Env:        env,
		User:       "0:0", // corral init drops to the image's user for the entrypoint
		Labels:     d.labels(spec),
		// No health check from the image: the engine would run it beside
		// PID 1's tree, with the container's capabilities rather than
		// what PID 1 kept.
		Healthcheck: &container.HealthConfig{Test: []string{"NONE"}},
	}
	host := &container.HostConfig{
		NetworkMode: "none",
		// execd's port stays out of the ephemeral range: the readiness
		// pings could otherwise be given it as their own.
		Sysctls:     map[string]string{"net.ipv4.ip_local_reserved_ports": strconv.Itoa(insandbox.ExecdPort)},
		CapDrop:     []string{"ALL"},
		CapAdd:      caps,
		SecurityOpt: []string{"no-new-privileges"},
		Runtime:     d.runtimeFor(spec),
		LogConfig:   container.LogConfig{Type: "json-file", Config: map[string]string{"max-size": "10m", "max-file": "2"}},
		// execd's retained output lives in an anonymous volume: off the
		// snapshot, and removed with the container.
		Mounts: []mount.Mount{{Type: mount.TypeVolume, Target: insandbox.ExecdStateDir, VolumeOptions: &mount.VolumeOptions{Labels: d.labels(spec)}}},
		Resources: container.Resources{
			NanoCPUs:  spec.Resources.CPUMillis * 1_000_000,
			Memory:    spec.Resources.MemoryBytes,
			PidsLimit: &pids,
		},
	}
	if spec.Isolation == api.IsolationRunsc {
		runscPids(host, pids)
	}
	if spec.Resources.MemoryBytes > 0 {
		host.Resources.MemorySwap = spec.Resources.MemoryBytes // no swap beyond the limit
	}
	if spec.Resources.DiskBytes > 0 {
		// overlay2 limits a container's layer on xfs with project quotas.
		host.StorageOpt = map[string]string{"size": strconv.FormatInt(spec.Resources.DiskBytes, 10)}
	}
	if d.cfg.Remote {
		d.publish(cfg, host, mode)
	} else {
		binary := d.cfg.CorralBinary
		if d.standIn != "" {
			binary = d.standIn
		}
		host.Binds = []string{binary + ":" + insandbox.Binary + ":ro"}
	}
	if spec.SecretsDir != "" {
		host.Binds = append(host.Binds, spec.SecretsDir+":"+insandbox.SecretsDir+":ro")
	}
	return cfg, host
}

// publish puts a container of a remote engine on the engine's bridge with
// execd's port (and a policed one's egress API) published: the engine's
// machine cannot enter this machine's namespaces.
func (d *Driver) publish(cfg *container.Config, host *container.HostConfig, mode egressMode) {
	// The engine's machine cannot enter our namespaces: execd is
	// published instead, and the sandbox gets the default network. A
	// policed one publishes its sidecar's egress API too, and
	// resolves through it.
	ports := []int{insandbox.ExecdPort}
	if mode == sidecarEnforcer {
		ports = append(ports, insandbox.EgressPort)
		host.DNS = []netip.Addr{netip.MustParseAddr("127.0.0.1")}
		host.DNSOptions = []string{"ndots:0"}
		host.Sysctls["net.ipv4.ip_local_reserved_ports"] = strconv.Itoa(insandbox.ExecdPort) + "," + strconv.Itoa(insandbox.EgressPort)
	}
	host.NetworkMode = "bridge"
	cfg.ExposedPorts = network.PortSet{}
	host.PortBindings = network.PortMap{}
	ip, _ := netip.ParseAddr(d.cfg.PublishIP)
	for _, p := range ports {
		port := network.MustParsePort(strconv.Itoa(p) + "/tcp")
		cfg.ExposedPorts[port] = struct{}{}
		host.PortBindings[port] = []network.PortBinding{{HostIP: ip, HostPort: "0"}}
	}
}

// labels are a container's: the sandbox's and this server's.
func (d *Driver) labels(spec driver.Spec) map[string]string {
	l := driver.BackendLabels(spec)
	if d.cfg.ServerID != "" {
		l[sandbox.LabelServer] = d.cfg.ServerID
	}
	return l
}

// startErr explains a failed start with what the container printed.
func (d *Driver) startErr(ctx context.Context, id string, err error) error {
	msg := err.Error()
	if strings.Contains(msg, "executable file not found") || strings.Contains(msg, "no such file or directory") {
		return errdefs.Wrap(errdefs.ErrInvalidArgument, api.CodeSandboxStartFailed,
			fmt.Sprintf("sandbox %s did not start: a program it runs was not found in the image (details are in the server log)", id), err)
	}
	return d.engineErr("start "+id, err)
}

// waitReady polls execd's /ping until it answers, the container exits,
// or ReadyTimeout passes. With identity it then makes sure PID 1 runs the
// server's corral binary: an answer on execd's port is what any program
// could give, such as one that replaced corral init.
func (d *Driver) waitReady(ctx context.Context, id string, identity bool) error {
	ctx, cancel := context.WithTimeout(ctx, d.cfg.ReadyTimeout)
	defer cancel()
	var target func(ctx context.Context) (net.Conn, error)
	pid := 0
	var looked time.Time
	// The container is looked at until its execd can be dialled, then
	// every 50 ms (did it exit?); a remote one at every try.
	alive := func(ctx context.Context) error {
		if target != nil && !d.cfg.Remote && time.Since(looked) < 50*time.Millisecond {
			return nil
		}
		looked = time.Now()
		c, err := d.inspect(ctx, id)
		if err != nil {
			return err
		}
		if !c.State.Running {
			return d.exitedEarly(ctx, id, c)
		}
		if d.cfg.Remote {
			if addr, err := d.published(c, insandbox.ExecdPort); err == nil {
				target = func(ctx context.Context) (net.Conn, error) {
					var nd net.Dialer
					return nd.DialContext(ctx, "tcp", addr.String())
				}
			}
		} else if ns, err := d.nsPath(id, c); err == nil && target == nil {
			pid = c.State.Pid
			target = func(ctx context.Context) (net.Conn, error) {
				return netns.Dial(ctx, ns, "127.0.0.1:"+strconv.Itoa(insandbox.ExecdPort))
			}
		}
		return nil
	}
	dial := func(ctx context.Context) (net.Conn, error) {
		if target == nil {
			return nil, errors.New("the container's network is not known yet")
		}
		return target(ctx)
	}
	if err := forward.AwaitPing(ctx, dial, alive, 2*time.Millisecond, 50*time.Millisecond); err != nil {
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return errdefs.Newf(errdefs.ErrUnavailable, api.CodeSandboxStartFailed, "sandbox %s: execd did not answer within %v", id, d.cfg.ReadyTimeout)
		}
		return err
	}
	if !identity {
		return nil
	}
	if ok, err := procfs.Runs(pid, d.cfg.CorralBinary); err != nil {
		return fmt.Errorf("sandbox %s: its PID 1 (%d): %w", id, pid, err)
	} else if !ok {
		return errdefs.New(errdefs.ErrInvalidArgument, api.CodeSandboxStartFailed,
			"the sandbox's PID 1 is not corral's init: something in the image or a volume replaced "+insandbox.Binary)
	}
	return nil
}

// exitedEarly is the error for a container that exited before execd
// answered, with the end of what it printed.
func (d *Driver) exitedEarly(ctx context.Context, id string, c container.InspectResponse) error {
	out := ""
	cctx, cancel := d.call(ctx)
	defer cancel()
	if logs, err := d.cli.ContainerLogs(cctx, c.ID, client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true, Tail: "20"}); err == nil {
		b, _ := io.ReadAll(io.LimitReader(logs, 64<<10))
		logs.Close()
		out = strings.TrimSpace(demux(b))
	}
	return driver.ExitedDuringStart(id, c.State.ExitCode, "", out, nil)
}

// demux strips the 8-byte frame headers of a non-TTY log stream.
func demux(b []byte) string {
	var out strings.Builder
	for len(b) >= 8 {
		n := int(b[4])<<24 | int(b[5])<<16 | int(b[6])<<8 | int(b[7])
		b = b[8:]
		if n > len(b) {
			n = len(b)
		}
		out.Write(b[:n])
		b = b[n:]
	}
	return out.String()
}
