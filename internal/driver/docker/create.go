// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package docker

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/netip"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/distribution/reference"
	ggauthn "github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/image"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/api/types/registry"
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
// no container behind.
func (d *Driver) Create(ctx context.Context, spec driver.Spec) (_ *driver.Handle, err error) {
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
	cfg, host := d.containerConfig(spec, ref, user, mode)
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

// imageOf is the image the sandbox runs (its snapshot's, or the spec's,
// pulled if need be) and that image's user.
func (d *Driver) imageOf(ctx context.Context, spec driver.Spec) (ref, user string, err error) {
	if spec.Snapshot == nil {
		ref = spec.Image.URI
		user, err = d.ensureImage(ctx, ref, spec)
		return ref, user, err
	}
	// The manager checked that the snapshot is this tenant's.
	var ss snapState
	if err := json.Unmarshal(spec.Snapshot.State, &ss); err != nil || ss.Image == "" {
		return "", "", fmt.Errorf("snapshot %s: bad reference: %w", spec.Snapshot.ID, errdefs.ErrInvalidArgument)
	}
	cctx, cancel := d.call(ctx)
	res, err := d.cli.ImageInspect(cctx, ss.Image)
	cancel()
	if err != nil {
		return "", "", d.engineErr("inspect snapshot "+ss.Image, err)
	}
	return ss.Image, userOf(res), nil
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

// copyInRemote copies into a remote engine's container what a local one
// would mount: the corral binary and, for a policed sandbox, the
// credential proxy's CA.
func (d *Driver) copyInRemote(ctx context.Context, id, containerID string, policed bool) error {
	var files []inFile
	if ca := launch.CAFile(d.egressDir(id)); policed && ca != "" {
		b, err := os.ReadFile(ca)
		if err != nil {
			return err
		}
		files = append(files, inFile{Name: strings.TrimPrefix(insandbox.VaultCA, "/"), Mode: 0o644, Data: b})
	}
	return d.copyIn(ctx, containerID, true, files...)
}

// containerConfig is the container a spec asks for.
// egressMode is how a sandbox's egress is enforced on this engine, chosen
// once per create.
type egressMode uint8

const (
	// noNetwork: no policy on a local engine; the container has loopback
	// only.
	noNetwork egressMode = iota
	// isolatedBridge: no policy on a remote engine; the container is on
	// the engine's bridge (execd is published), and PID 1 closes the
	// namespace to all but execd's port.
	isolatedBridge
	// localEnforcer: a policy on a local engine; an enforcer process on
	// this machine polices the container's namespace from outside.
	localEnforcer
	// sidecarEnforcer: a policy on a remote engine; an enforcer container
	// shares the sandbox's namespace.
	sidecarEnforcer
)

func (m egressMode) policed() bool { return m == localEnforcer || m == sidecarEnforcer }

// egressModeOf picks spec's egress mode on this driver's engine.
func (d *Driver) egressModeOf(spec driver.Spec) egressMode {
	switch {
	case spec.Policed() && d.cfg.Remote:
		return sidecarEnforcer
	case spec.Policed():
		return localEnforcer
	case d.cfg.Remote:
		return isolatedBridge
	}
	return noNetwork
}

// prepareEgress writes a policed sandbox's enforcer directory and, for a
// local enforcer, binds its resolv.conf, CA and start gate into host.
func (d *Driver) prepareEgress(spec driver.Spec, mode egressMode, host *container.HostConfig) error {
	dir := d.egressDir(spec.ID)
	if err := launch.Prepare(dir, launch.Sandbox{ID: spec.ID, Policy: spec.NetworkPolicy, Token: spec.EgressToken, CredentialProxy: spec.CredentialProxy}); err != nil {
		return err
	}
	if mode != localEnforcer {
		return nil
	}
	host.Binds = append(host.Binds, filepath.Join(dir, "resolv.conf")+":/etc/resolv.conf:ro")
	if ca := launch.CAFile(dir); ca != "" {
		host.Binds = append(host.Binds, ca+":"+insandbox.VaultCA+":ro")
	}
	// PID 1 holds the entrypoint back until the network is policed.
	gate := filepath.Join(dir, "gate")
	if err := os.Mkdir(gate, 0o700); err != nil {
		return err
	}
	if err := syscall.Mkfifo(filepath.Join(gate, "start"), 0o600); err != nil {
		return err
	}
	host.Binds = append(host.Binds, gate+":"+gateInSandbox+":ro")
	return nil
}

// startEgress polices a started container: the sidecar on a remote
// engine (PID 1 waits for it), else the enforcer here, after which PID 1
// is handed the entrypoint through the gate.
func (d *Driver) startEgress(ctx context.Context, spec driver.Spec, mode egressMode, containerID string, upstreams []string) error {
	switch mode {
	case sidecarEnforcer:
		return d.startSidecar(ctx, spec.ID, containerID, upstreams)
	case localEnforcer:
	default:
		return nil
	}
	// The container starts with loopback only; its way out appears once
	// the enforcer's rules are in place.
	c, err := d.inspect(ctx, spec.ID)
	if err != nil {
		return err
	}
	if !c.State.Running {
		return d.exitedEarly(ctx, spec.ID, c)
	}
	ns, err := d.nsPath(spec.ID, c)
	if err != nil {
		return err
	}
	if err := d.net.Start(ctx, spec.ID, d.egressDir(spec.ID), ns); err != nil {
		return err
	}
	gateDir := filepath.Join(d.egressDir(spec.ID), "gate")
	st := initproc.Start{Args: spec.Entrypoint}
	if spec.Isolation == api.IsolationRunsc {
		err = initproc.SendStartFile(gateDir, startFile, st)
	} else {
		gate, oerr := os.OpenRoot(gateDir)
		if oerr != nil {
			return oerr
		}
		err = initproc.SendStart(ctx, gate, "start", st)
		gate.Close()
	}
	if err != nil {
		return fmt.Errorf("start the entrypoint of %s: %w", spec.ID, err)
	}
	return nil
}

// gateInSandbox holds the FIFO a policed sandbox's PID 1 waits on (a
// runsc sandbox's: startFile, which it polls for).
const (
	gateInSandbox = insandbox.GateFile
	startFile     = "start.json"
)

// containerConfig is the container a spec asks for; a policed one's PID 1
// holds its entrypoint back until the enforcer's rules are in.
func (d *Driver) containerConfig(spec driver.Spec, ref, imageUser string, mode egressMode) (*container.Config, *container.HostConfig) {
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

// ensureImage makes sure ref is present and spec's tenant may use it,
// pulling it with the spec's credentials when it is not there, and
// returns the image's user. A tenant may use an image the operator put
// on the engine (one with no registry digest: built or loaded there), or
// one the registry serves it: an image another tenant pulled is checked
// with the registry first, with this tenant's credentials (once per
// server run). Snapshots and images named by their ID are never an
// image.uri: a snapshot is restored with its snapshotId, whose tenant the
// manager checks.
func (d *Driver) ensureImage(ctx context.Context, ref string, spec driver.Spec) (string, error) {
	if ref == "" {
		return "", fmt.Errorf("image is empty: %w", errdefs.ErrInvalidArgument)
	}
	if imageIDLike(ref) {
		// The engine would take it for (a prefix of) a local image's ID:
		// another tenant's snapshot, say.
		return "", errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeImageInvalidReference,
			"image %q looks like an image ID: give a name (repository[:tag] or repository@sha256:...)", ref)
	}
	named, err := reference.ParseNormalizedNamed(ref)
	if err != nil {
		return "", errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeImageInvalidReference, "image %q is not a valid reference", ref)
	}
	if reference.Path(named) == snapshotRepo || reference.FamiliarName(named) == snapshotRepo {
		return "", errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeImageNotFound, "image %s was not found (a snapshot is restored with snapshotId)", ref)
	}
	cctx, cancel := d.call(ctx)
	res, err := d.cli.ImageInspect(cctx, ref)
	cancel()
	if err == nil && !namedBy(res.InspectResponse, named) {
		// The engine matched an image ID (or a prefix of one), not a name.
		err = cerrdefs.ErrNotFound
	}
	if err == nil && res.Config != nil && res.Config.Labels[LabelSnapshotID] != "" {
		return "", errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeImageNotFound, "image %s was not found (a snapshot is restored with snapshotId)", ref)
	}
	if err == nil {
		if len(res.RepoDigests) == 0 || d.imageAllowed(spec.Tenant, res.ID) {
			return userOf(res), nil
		}
		current, aerr := d.registryHas(ctx, ref, named, res.InspectResponse, spec.Image)
		if aerr != nil {
			return "", aerr
		}
		if current {
			d.allowImage(spec.Tenant, res.ID)
			return userOf(res), nil
		}
		// The tag has moved on in the registry: pull what it is now.
	} else if !cerrdefs.IsNotFound(err) {
		return "", d.engineErr("inspect image "+ref, err)
	}
	if err := d.pull(ctx, ref, spec.Image); err != nil {
		return "", err
	}
	cctx, cancel = d.call(ctx)
	res, err = d.cli.ImageInspect(cctx, ref)
	cancel()
	if err != nil {
		return "", d.engineErr("inspect image "+ref, err)
	}
	if !d.imageAllowed(spec.Tenant, res.ID) && knownAs(res.InspectResponse, named) {
		// The engine had this image's config under another name, and so
		// took none of the layers from this registry: a config naming
		// another image's layers would open them. The registry must
		// serve the bytes of every layer.
		if err := proveLayers(ctx, ref, res.InspectResponse, spec.Image); err != nil {
			rctx, cancel := d.call(context.WithoutCancel(ctx))
			_, _ = d.cli.ImageRemove(rctx, ref, client.ImageRemoveOptions{})
			cancel()
			return "", err
		}
	}
	d.allowImage(spec.Tenant, res.ID)
	return userOf(res), nil
}

// knownAs reports whether the engine knows img by a repository other
// than named's.
func knownAs(img image.InspectResponse, named reference.Named) bool {
	for _, n := range append(slices.Clone(img.RepoTags), img.RepoDigests...) {
		if got, err := reference.ParseNormalizedNamed(n); err == nil && got.Name() != named.Name() {
			return true
		}
	}
	return false
}

// proveLayers fetches every layer of ref from its registry with auth's
// credentials and checks that its bytes are the layers img is made of.
func proveLayers(ctx context.Context, ref string, img image.InspectResponse, auth driver.Image) error {
	r, err := name.ParseReference(ref)
	if err != nil {
		return errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeImageInvalidReference, "image %q is not a valid reference", ref)
	}
	ropts := []remote.Option{remote.WithContext(ctx), remote.WithUserAgent("corral"),
		remote.WithPlatform(v1.Platform{OS: img.Os, Architecture: img.Architecture, Variant: img.Variant})}
	if auth.Username != "" || auth.Password != "" {
		ropts = append(ropts, remote.WithAuth(ggauthn.FromConfig(ggauthn.AuthConfig{Username: auth.Username, Password: auth.Password})))
	}
	remoteImg, err := remote.Image(r, ropts...)
	if err != nil {
		return errdefs.Wrap(errdefs.ErrInvalidArgument, api.CodeImageLayerMismatch,
			fmt.Sprintf("image %s: its layers could not be checked with its registry", ref), err)
	}
	layers, err := remoteImg.Layers()
	if err != nil || img.RootFS.Layers == nil || len(layers) != len(img.RootFS.Layers) {
		return errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeImageLayerMismatch, "image %s: its registry's layers are not the image's", ref)
	}
	for i, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			return errdefs.Wrap(errdefs.ErrInvalidArgument, api.CodeImageLayerMismatch, fmt.Sprintf("image %s: layer %d could not be fetched", ref, i), err)
		}
		h := sha256.New()
		_, err = io.Copy(h, rc)
		rc.Close()
		if err != nil || "sha256:"+hex.EncodeToString(h.Sum(nil)) != img.RootFS.Layers[i] {
			return errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeImageLayerMismatch,
				"image %s: layer %d from its registry is not the layer its config names", ref, i)
		}
	}
	return nil
}

// imageIDLike reports whether ref is what the engine matches against
// image IDs: "sha256:" and hex, or hex alone (12 digits or more).
func imageIDLike(ref string) bool {
	if strings.HasPrefix(ref, "sha256:") {
		return true
	}
	if len(ref) < 12 || len(ref) > 64 {
		return false
	}
	for _, c := range ref {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// namedBy reports whether the engine knows img by named (a tag or a
// digest of it), rather than having matched its ID.
func namedBy(img image.InspectResponse, named reference.Named) bool {
	want := reference.TagNameOnly(named).String()
	for _, n := range append(slices.Clone(img.RepoTags), img.RepoDigests...) {
		if got, err := reference.ParseNormalizedNamed(n); err == nil && (got.String() == want || got.String() == named.String()) {
			return true
		}
	}
	return false
}

// registryHas asks the registry, with the spec's credentials, what ref
// is: whether it is still img (same digest), or an error the user can act
// on (the registry refused these credentials, or has no such image).
func (d *Driver) registryHas(ctx context.Context, ref string, named reference.Named, img image.InspectResponse, auth driver.Image) (bool, error) {
	cctx, cancel := d.call(ctx)
	defer cancel()
	res, err := d.cli.DistributionInspect(cctx, ref, client.DistributionInspectOptions{EncodedRegistryAuth: registryAuth(auth)})
	if err != nil {
		return false, d.pullErr(ref, err)
	}
	for _, rd := range img.RepoDigests {
		if c, err := reference.ParseNormalizedNamed(rd); err == nil && c.Name() == named.Name() {
			if dg, ok := c.(reference.Digested); ok && dg.Digest() == res.Descriptor.Digest {
				return true, nil
			}
		}
	}
	return false, nil
}

// registryAuth is the X-Registry-Auth of an image's credentials, "" for
// none (the engine then asks anonymously: it has no logins of its own).
func registryAuth(img driver.Image) string {
	if img.Username == "" && img.Password == "" {
		return ""
	}
	b, _ := json.Marshal(registry.AuthConfig{Username: img.Username, Password: img.Password})
	return base64.URLEncoding.EncodeToString(b)
}

// imageAllowed reports whether tenant was found allowed to use image id
// in this server's run; allowImage records it.
func (d *Driver) imageAllowed(tenant, id string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return tenant == "" || d.allowed[tenant+"\x00"+id]
}

func (d *Driver) allowImage(tenant, id string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.allowed == nil || len(d.allowed) >= 65536 {
		d.allowed = map[string]bool{}
	}
	d.allowed[tenant+"\x00"+id] = true
}

func userOf(res client.ImageInspectResult) string {
	if res.Config == nil {
		return ""
	}
	u := res.Config.User
	if u == "0" || u == "root" || u == "0:0" || u == "root:root" {
		return ""
	}
	return u
}

// pull pulls ref, logging progress every few seconds.
func (d *Driver) pull(ctx context.Context, ref string, img driver.Image) error {
	opts := client.ImagePullOptions{RegistryAuth: registryAuth(img)}
	start := time.Now()
	d.cfg.Logger.InfoContext(ctx, "pulling image", "image", ref)
	res, err := d.cli.ImagePull(ctx, ref, opts)
	if err != nil {
		return d.pullErr(ref, err)
	}
	defer res.Close()
	layers := map[string][2]int64{}
	last := time.Now()
	for m, err := range res.JSONMessages(ctx) {
		if err != nil {
			return d.pullErr(ref, err)
		}
		if m.Error != nil {
			return d.pullErr(ref, errors.New(m.Error.Message))
		}
		if m.ID != "" && m.Progress != nil && m.Progress.Total > 0 {
			layers[m.ID] = [2]int64{m.Progress.Current, m.Progress.Total}
		}
		if time.Since(last) > 2*time.Second {
			var cur, total int64
			for _, l := range layers {
				cur, total = cur+l[0], total+l[1]
			}
			d.cfg.Logger.InfoContext(ctx, "pulling image", "image", ref, "layers", len(layers), "bytes", cur, "of", total)
			last = time.Now()
		}
	}
	d.cfg.Logger.InfoContext(ctx, "pulled image", "image", ref, "duration_ms", time.Since(start).Milliseconds())
	return nil
}

func (d *Driver) pullErr(ref string, err error) error {
	msg := err.Error()
	switch {
	case client.IsErrConnectionFailed(err):
		return d.engineErr("pull "+ref, err)
	case cerrdefs.IsNotFound(err) || strings.Contains(msg, "not found") || strings.Contains(msg, "manifest unknown"):
		return errdefs.Wrap(errdefs.ErrInvalidArgument, api.CodeImageNotFound, fmt.Sprintf("image %s was not found", ref), err)
	case cerrdefs.IsUnauthorized(err) || strings.Contains(msg, "unauthorized") || strings.Contains(msg, "denied") ||
		strings.Contains(msg, "no basic auth credentials") || strings.Contains(msg, "authentication required"):
		return errdefs.Wrap(errdefs.ErrInvalidArgument, api.CodeImageUnauthorized, fmt.Sprintf("image %s: the registry refused the credentials", ref), err)
	case strings.Contains(msg, "don't match image configuration"):
		return errdefs.Wrap(errdefs.ErrInvalidArgument, api.CodeImageLayerMismatch, fmt.Sprintf("image %s: its layers are not the ones its config names", ref), err)
	case cerrdefs.IsInvalidArgument(err) || strings.Contains(msg, "invalid reference"):
		return errdefs.Wrap(errdefs.ErrInvalidArgument, api.CodeImageInvalidReference, fmt.Sprintf("image %q is not a valid reference", ref), err)
	}
	return errdefs.Wrap(errdefs.ErrUnavailable, api.CodeImagePullFailed, fmt.Sprintf("image %s could not be pulled (details are in the server log)", ref), err)
}

// inFile is a file copied into a container before it starts.
type inFile struct {
	// Name is its path in the container, relative to the root.
	Name string
	Mode int64
	Data []byte
}

// copyIn copies the corral binary (to /.corral/corral, when binary) and
// files into a created container: a remote engine sees none of this
// machine's files. Each file's directory is created 0755.
func (d *Driver) copyIn(ctx context.Context, containerID string, binary bool, files ...inFile) error {
	pr, pw := io.Pipe()
	go func() {
		tw := tar.NewWriter(pw)
		var err error
		if binary {
			err = d.writeBinary(tw, ".corral/corral")
		}
		dirs := map[string]bool{}
		for _, in := range files {
			// Only the file's own directory: the engine makes missing
			// parents, and the image's own directories keep their modes.
			if dir := path.Dir(in.Name); err == nil && dir != "." && !dirs[dir] {
				dirs[dir] = true
				err = tw.WriteHeader(&tar.Header{Name: dir + "/", Typeflag: tar.TypeDir, Mode: 0o755})
			}
			if err == nil {
				err = tw.WriteHeader(&tar.Header{Name: in.Name, Typeflag: tar.TypeReg, Mode: in.Mode, Size: int64(len(in.Data))})
			}
			if err == nil {
				_, err = tw.Write(in.Data)
			}
		}
		if err == nil {
			err = tw.Close()
		}
		pw.CloseWithError(err)
	}()
	cctx, cancel := context.WithTimeout(ctx, 2*d.cfg.CallTimeout)
	defer cancel()
	_, err := d.cli.CopyToContainer(cctx, containerID, client.CopyToContainerOptions{DestinationPath: "/", Content: pr})
	pr.Close()
	if err != nil {
		return d.engineErr("copy the corral binary", err)
	}
	return nil
}

// writeBinary writes the corral binary into tw as name, in its directory.
func (d *Driver) writeBinary(tw *tar.Writer, name string) error {
	f, err := os.Open(d.cfg.CorralBinary)
	if err != nil {
		return fmt.Errorf("corral binary: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if dir := path.Dir(name); dir != "." {
		if err := tw.WriteHeader(&tar.Header{Name: dir + "/", Typeflag: tar.TypeDir, Mode: 0o755}); err != nil {
			return err
		}
	}
	if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o555, Size: fi.Size()}); err != nil {
		return err
	}
	_, err = io.Copy(tw, f)
	return err
}

// runscPids bounds a runsc sandbox's processes at pids. The host pids
// cgroup counts the Sentry's threads and stubs, not the sandbox's
// processes, so it only bounds the whole with room for them
// (driver.RunscHostPids); the sandbox's tasks are bounded by
// RLIMIT_NPROC, which the Sentry keeps per user of the sandbox (nothing
// in it holds CAP_SYS_RESOURCE).
func runscPids(host *container.HostConfig, pids int64) {
	limit := driver.RunscHostPids(pids)
	host.Resources.PidsLimit = &limit
	host.Resources.Ulimits = append(host.Resources.Ulimits, &container.Ulimit{Name: "nproc", Soft: pids, Hard: pids})
}
