// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package oci

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/errdefs"
	"github.com/corral-dev/corral/internal/driver"
	"github.com/corral-dev/corral/internal/egress/launch"
	"github.com/corral-dev/corral/internal/initproc"
	"github.com/corral-dev/corral/internal/insandbox"
	"github.com/corral-dev/corral/internal/verifier"
)

// Create implements driver.Driver. A claimed warm sandbox is only
// personalised; if that fails it is replaced by a fresh one.
func (d *Driver) Create(ctx context.Context, spec driver.Spec) (*driver.Handle, error) {
	if d.pool.Take(spec.ID) {
		h, err := d.personalise(ctx, spec)
		if err == nil {
			return h, nil
		}
		d.log.WarnContext(ctx, "a warm sandbox could not be personalised; creating afresh", "sandbox_id", spec.ID, "err", err)
		if err := d.Destroy(ctx, spec.ID); err != nil {
			return nil, err
		}
	}
	return d.create(ctx, spec, runEntrypoint)
}

// createMode says what a made sandbox runs.
type createMode uint8

const (
	// runEntrypoint starts the request's entrypoint.
	runEntrypoint createMode = iota
	// waitForClaim makes a warm sandbox for the pool: PID 1 waits for an
	// entrypoint on the start FIFO, and execd takes its token and extra
	// environment from files that a claim rewrites.
	waitForClaim
)

// build is a sandbox being made: what each step of create leaves for the
// next.
type build struct {
	spec driver.Spec
	mode createMode
	plan *rootfsPlan
	// bundle is on the runtime tmpfs; disk holds the writable layer and
	// the console log.
	bundle, disk        string
	rootfs, upper, work string
	cwd                 string
	uid, gid            uint32
	hostname            string
	// ns holds the sandbox's network namespace; netns names it.
	ns     *os.File
	netns  string
	mounts []specs.Mount
	// volumeMounts are mounted last, from volumeStaging, which are
	// undone once runc has run.
	volumeMounts  []specs.Mount
	volumeStaging []string
	mark          func(step string)
	// idRange is the sandbox's host ID range plus one (0: no user
	// namespace); userns maps it, for idmapped mounts.
	idRange int
	userns  *os.File
	// stage holds the mount points runc reaches as the range's root.
	stage string
	// hostMounts are the server's mounts of the sandbox (its idmapped
	// root and binds), unmounted once runc has run.
	hostMounts []string
	// runsc: the sandbox runs under gVisor (runsc.go); its root and the
	// host image's directories are mounted by the server, and stay so.
	runsc bool
}

// first is the host ID of the sandbox's root (user namespaces).
func (b *build) first() uint32 { return slotHost(b.idRange - 1) }

// create makes a sandbox from nothing, in named steps: the bundle, the
// root file system, the identity files, the network, the spec, then the
// start.
func (d *Driver) create(ctx context.Context, spec driver.Spec, mode createMode) (_ *driver.Handle, err error) {
	if err := validID(spec.ID); err != nil {
		return nil, err
	}
	b := &build{spec: spec, mode: mode, bundle: d.bundleDir(spec.ID), disk: d.diskDir(spec.ID), runsc: spec.Isolation == api.IsolationRunsc}
	if b.runsc && d.runsc == nil {
		return nil, errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeIsolationNotAllowed, "this server cannot run runsc sandboxes: %s", d.noRunsc)
	}
	for _, dir := range []string{b.bundle, b.disk} {
		if _, err := os.Stat(dir); err == nil {
			return nil, fmt.Errorf("sandbox %s: %w", spec.ID, errdefs.ErrAlreadyExists)
		}
	}
	if len(spec.Entrypoint) == 0 && mode == runEntrypoint {
		return nil, errdefs.New(errdefs.ErrInvalidArgument, api.CodeInvalidParameter, "entrypoint is empty")
	}
	t0 := time.Now()
	b.mark = func(step string) {
		d.log.DebugContext(ctx, "create step", "step", step, "ms", float64(time.Since(t0).Microseconds())/1000)
	}
	if b.plan, err = d.plan(ctx, spec); err != nil {
		return nil, err
	}
	b.mark("plan")
	if d.cfg.UserNamespaces && !b.runsc {
		slot, err := d.ids.take(spec.ID)
		if err != nil {
			return nil, err
		}
		b.idRange = slot + 1
		defer func() {
			if err != nil {
				d.ids.release(spec.ID)
			}
		}()
		if b.userns, err = d.ids.userns(slot); err != nil {
			return nil, err
		}
		defer func() { d.ids.park(slot, b.userns) }()
		b.mark("userns")
	}
	d.mu.Lock()
	if d.creating[spec.ID] {
		d.mu.Unlock()
		return nil, fmt.Errorf("sandbox %s: %w", spec.ID, errdefs.ErrAlreadyExists)
	}
	d.creating[spec.ID] = true
	d.mu.Unlock()
	defer func() {
		d.listing.Lock()
		d.mu.Lock()
		delete(d.creating, spec.ID)
		d.mu.Unlock()
		d.listing.Unlock()
	}()
	if err := os.Mkdir(b.bundle, 0o700); err != nil {
		if errors.Is(err, os.ErrExist) {
			return nil, fmt.Errorf("sandbox %s: %w", spec.ID, errdefs.ErrAlreadyExists)
		}
		return nil, err
	}
	if b.idRange != 0 {
		d.ids.settle(b.idRange - 1)
	}
	if d.bundleMade != nil {
		d.bundleMade(spec.ID)
	}
	defer func() {
		if err != nil {
			if b.ns != nil {
				b.ns.Close()
			}
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			defer cancel()
			if derr := d.Destroy(cctx, spec.ID); derr != nil {
				d.log.WarnContext(ctx, "clean up after failed create", "sandbox_id", spec.ID, "err", derr)
			}
			if derr := d.removeMadeVolumes(spec); derr != nil {
				d.log.WarnContext(ctx, "remove a failed create's volumes", "sandbox_id", spec.ID, "err", derr)
			}
		}
	}()
	if err := d.prepareBundle(ctx, b); err != nil {
		return nil, err
	}
	if b.userns != nil {
		b.stage = d.stageDir(spec.ID)
		d.stageMu.Lock()
		err := makeStage(b.stage)
		d.stageMu.Unlock()
		if err != nil {
			return nil, err
		}
	}
	if err := mountRootfs(ctx, b); err != nil {
		return nil, err
	}
	if err := writeIdentity(b); err != nil {
		return nil, err
	}
	if err := d.attachNetwork(ctx, b); err != nil {
		return nil, err
	}
	defer func() {
		d.unstage(ctx, b)
	}()
	if err := d.mountVolumes(ctx, b); err != nil {
		return nil, err
	}
	if err := d.writeSpec(b); err != nil {
		return nil, err
	}
	return d.start(ctx, b)
}

// unstage undoes the server's mounts of a sandbox (volume staging, the
// idmapped root and binds), which runc copied into the sandbox's mount
// namespace.
func (d *Driver) unstage(ctx context.Context, b *build) {
	mounts := slices.Clone(b.volumeStaging)
	for i := len(b.hostMounts) - 1; i >= 0; i-- {
		mounts = append(mounts, b.hostMounts[i])
	}
	for _, m := range mounts {
		if err := unmount(m); err != nil {
			d.log.WarnContext(ctx, "undo a staging mount", "sandbox_id", b.spec.ID, "err", err)
		}
	}
	b.volumeStaging, b.hostMounts = nil, nil
}

// prepareBundle writes the bundle's metadata and status directory (a warm
// sandbox's hand-over files too) and makes the disk directory, with its
// own file system when the sandbox has a disk limit.
func (d *Driver) prepareBundle(ctx context.Context, b *build) error {
	claims, deleteWith := volumeClaims(b.spec)
	m := bundleMeta{ID: b.spec.ID, Tenant: b.spec.Tenant, Labels: driver.BackendLabels(b.spec), Created: time.Now().UTC(),
		Layers: b.plan.layers, Base: b.plan.base(), Volumes: claims, DeleteVolumes: deleteWith, IDRange: b.idRange}
	if b.runsc {
		m.Isolation = api.IsolationRunsc
	}
	meta, _ := json.Marshal(m)
	if err := os.WriteFile(filepath.Join(b.bundle, "meta.json"), meta, 0o600); err != nil {
		return err
	}
	if err := os.Mkdir(filepath.Join(b.bundle, "status"), 0o755); err != nil {
		return err
	}
	if b.mode == waitForClaim {
		if err := os.WriteFile(filepath.Join(b.bundle, "pool"), nil, 0o600); err != nil {
			return err
		}
		if err := syscall.Mkfifo(filepath.Join(b.bundle, "status", "start"), 0o600); err != nil {
			return err
		}
		for name, body := range map[string]string{"token": verifier.Of(b.spec.ExecdToken) + "\n", "env": ""} {
			if err := os.WriteFile(filepath.Join(b.bundle, "status", name), []byte(body), 0o600); err != nil {
				return err
			}
		}
	}
	if err := os.Mkdir(b.disk, 0o700); err != nil {
		return err
	}
	b.rootfs = filepath.Join(b.disk, "rootfs")
	b.upper, b.work = filepath.Join(b.disk, "upper"), filepath.Join(b.disk, "work")
	dirs := []string{"rootfs", "upper", "work"}
	if b.spec.Resources.DiskBytes > 0 {
		dirs = dirs[:1]
	}
	for _, dir := range dirs {
		if err := os.Mkdir(filepath.Join(b.disk, dir), 0o755); err != nil {
			return err
		}
	}
	if b.spec.Resources.DiskBytes > 0 {
		var err error
		if b.upper, b.work, err = mountDisk(ctx, b.disk, b.spec.Resources.DiskBytes); err != nil {
			return err
		}
		b.mark("disk")
	}
	b.mark("bundle")
	return nil
}

// mountRootfs prepares the root file system. The server mounts it: runc
// refuses a mount at "/" since its 2025 escape fixes (1.2.8), runsc serves
// "/" from a directory, and in a user namespace the layers are idmapped
// first. runc's sandbox keeps its own copy, in its own mount namespace;
// the server's (private, so that undoing it reaches no copy) is undone
// once runc has run, and costs later creates nothing. runsc's stays until
// Destroy. The image's user is resolved and its working directory made
// in it.
func mountRootfs(ctx context.Context, b *build) error {
	mounted := b.userns == nil
	if mounted {
		if err := mountOverlay(b.plan.lowers, b.upper, b.work, b.rootfs); err != nil {
			return err
		}
		if err := unix.Mount("", b.rootfs, "", unix.MS_PRIVATE, ""); err != nil {
			_ = unmount(b.rootfs)
			return fmt.Errorf("make %s private: %w", b.rootfs, err)
		}
		if !b.runsc {
			b.hostMounts = append(b.hostMounts, b.rootfs)
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	var err error
	if b.cwd, err = workingDir(b.plan.config.WorkingDir); err != nil {
		return err
	}
	// With a user namespace, on an overlay of its own that is gone before
	// the idmapped one is made: the server's writes there are root's.
	if b.uid, b.gid, err = prepareRoot(b.plan, b.upper, b.work, b.rootfs, b.cwd, b.spec.Volumes, mounted); err != nil {
		return err
	}
	if b.userns != nil {
		// Mounted here, over idmapped layers: runc in the user namespace
		// could only mount an overlay whose files it sees unowned.
		b.rootfs = filepath.Join(b.stage, "root")
		if err := os.Mkdir(b.rootfs, 0o755); err != nil {
			return err
		}
		if err := idmappedOverlay(b.plan.lowers, b.upper, b.work, b.rootfs, b.userns, b.first()); err != nil {
			return err
		}
		b.hostMounts = append(b.hostMounts, b.rootfs)
	}
	b.mark("overlay")
	return nil
}

// writeIdentity writes the sandbox's hostname and hosts files.
func writeIdentity(b *build) error {
	hex := strings.ReplaceAll(b.spec.ID, "-", "")
	b.hostname = "sandbox-" + hex[:min(12, len(hex))]
	if err := os.WriteFile(filepath.Join(b.bundle, "hostname"), []byte(b.hostname+"\n"), 0o644); err != nil {
		return err
	}
	hosts := "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n127.0.1.1\t" + b.hostname + "\n"
	if err := os.WriteFile(filepath.Join(b.bundle, "hosts"), []byte(hosts), 0o644); err != nil {
		return err
	}
	b.mark("files")
	return nil
}

// attachNetwork makes the sandbox's network namespace and, for a policed
// sandbox, starts its enforcer before anything can leave; it also sets
// the mounts that go with them.
func (d *Driver) attachNetwork(ctx context.Context, b *build) error {
	if b.userns == nil {
		ns, err := newNetns()
		if err != nil {
			return err
		}
		// This process's descriptor holds the namespace until the
		// sandbox's processes do; runc opens it by this process's /proc.
		b.ns, b.netns = ns, fdPath(ns)
		b.mark("netns")
	}
	// With a user namespace, runc makes the network namespace in it and
	// start sets it up.
	var ca string
	if b.spec.Policed() {
		dir := egressDir(b.bundle)
		if err := launch.Prepare(dir, launch.Sandbox{ID: b.spec.ID, Policy: b.spec.NetworkPolicy, Token: b.spec.EgressToken, CredentialProxy: b.spec.CredentialProxy}); err != nil {
			return err
		}
		if b.userns == nil {
			if err := d.net.Start(ctx, b.spec.ID, dir, b.netns); err != nil {
				return err
			}
		}
		ca = launch.CAFile(dir)
		b.mark("egress")
	}
	b.mounts = corralMounts(d.initBinary(), b.bundle, b.spec, ca)
	if b.userns != nil {
		return stageBinds(b)
	}
	return nil
}

// corralMounts are the files corral binds into a sandbox: its own binary,
// the status directory, the identity files, the granted secrets, and for
// a policed sandbox its resolver and the vault's CA (ca, when not "").
func corralMounts(binary, bundle string, spec driver.Spec, ca string) []specs.Mount {
	m := []specs.Mount{
		bindMount(binary, insandbox.Binary, true),
		// Read-only: the sandbox can plant nothing there for the host to
		// read, and cannot fill the tmpfs every bundle shares.
		bindMount(filepath.Join(bundle, "status"), statusInSandbox, true),
		bindMount(filepath.Join(bundle, "hosts"), "/etc/hosts", true),
		bindMount(filepath.Join(bundle, "hostname"), "/etc/hostname", true),
	}
	if spec.SecretsDir != "" {
		m = append(m, bindMount(spec.SecretsDir, insandbox.SecretsDir, true))
	}
	if spec.Policed() {
		m = append(m, bindMount(filepath.Join(egressDir(bundle), "resolv.conf"), "/etc/resolv.conf", true))
		if ca != "" {
			m = append(m, bindMount(ca, insandbox.VaultCA, true))
		}
	}
	return m
}

// stageBinds moves the sources of a user namespace's binds to the stage
// directory, which runc, binding them as the range's root, can reach: the
// directories whose files the sandbox's root must read (its status, its
// secrets) as idmapped copies, the files as they are.
func stageBinds(b *build) error {
	idmap := map[string]bool{statusInSandbox: true, insandbox.SecretsDir: true}
	for i, m := range b.mounts {
		staged := filepath.Join(b.stage, "binds", strconv.Itoa(i))
		var err error
		if idmap[m.Destination] {
			err = idmappedBind(m.Source, staged, b.userns)
		} else {
			err = stageFile(m.Source, staged)
		}
		if err != nil {
			return err
		}
		b.hostMounts = append(b.hostMounts, staged)
		b.mounts[i].Source = staged
	}
	return nil
}

// writeSpec writes the bundle's config.json: the host image's system
// directories as overlays of their own, PID 1's command line and
// environment, the limits.
func (d *Driver) writeSpec(b *build) error {
	// The runtime mounts in this order: the host image's system
	// directories, the tenant's volumes, then corral's own files, so no
	// volume can sit over what corral mounts.
	var mounts []specs.Mount
	if b.plan.host {
		for _, dir := range hostSystemDirs() {
			if fi, err := os.Lstat(dir); err != nil || !fi.IsDir() {
				continue
			}
			// On the sandbox's own disk when it has a limit.
			up, wk := filepath.Join(filepath.Dir(b.upper), "host", dir, "upper"), filepath.Join(filepath.Dir(b.upper), "host", dir, "work")
			if err := os.MkdirAll(up, 0o755); err != nil {
				return err
			}
			if err := os.MkdirAll(wk, 0o755); err != nil {
				return err
			}
			if b.runsc {
				// Under the root the server mounted, as runsc knows no
				// overlay mounts; unmounted by Destroy with the root.
				if err := mountOverlay(strings.Split(d.hostLowers(b.plan, dir), ":"), up, wk, filepath.Join(b.rootfs, dir)); err != nil {
					return err
				}
				continue
			}
			if b.userns != nil {
				// Under the idmapped root, as it is.
				at := filepath.Join(b.rootfs, dir)
				if err := idmappedOverlay(strings.Split(d.hostLowers(b.plan, dir), ":"), up, wk, at, b.userns, b.first()); err != nil {
					return err
				}
				b.hostMounts = append(b.hostMounts, at)
				continue
			}
			mounts = append(mounts, overlayMount(d.hostLowers(b.plan, dir), up, wk, dir))
		}
	}
	var netns string
	if b.userns == nil {
		netns = "/proc/" + strconv.Itoa(os.Getpid()) + "/fd/" + strconv.Itoa(int(b.ns.Fd()))
	}
	s, err := d.sandboxSpec(b, mounts, netns)
	if err != nil {
		return err
	}
	sb, err := json.Marshal(s)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(b.bundle, "config.json"), sb, 0o600); err != nil {
		return err
	}
	b.mark("spec")
	return nil
}

// sandboxSpec is the runtime spec of the sandbox b describes, without
// side effects: hostDirs (the host image's system directories, as
// overlays) are mounted first, then the tenant's volumes, then corral's
// own files; netns is the network namespace to join ("" with a user
// namespace, in which runc makes one). The golden tests pin its output.
func (d *Driver) sandboxSpec(b *build, hostDirs []specs.Mount, netns string) (*specs.Spec, error) {
	mounts := slices.Concat(hostDirs, b.volumeMounts, b.mounts)
	args, extra := initCommand(b.spec, initParams{hostname: b.hostname, uid: b.uid, gid: b.gid, warm: b.mode == waitForClaim, gate: b.userns != nil, runsc: b.runsc, runscPassFD: b.runsc && d.runscPassFD})
	env := mergeEnv(b.plan.config.Env, b.spec.Env, extra...)
	if !hasVar(env, "HOME") {
		env = append(env, "HOME=/root")
	}
	if !hasVar(env, "GOMAXPROCS") {
		// PID 1 starts with one P; it drops both before it starts
		// anything (initproc.OwnGOMAXPROCS).
		env = append(env, "GOMAXPROCS=1", initproc.OwnGOMAXPROCS+"=1")
	}
	spec := b.spec
	p := specParams{
		id: spec.ID, rootfs: b.rootfs, hostname: b.hostname, args: args, env: env, cwd: b.cwd, netns: netns,
		cgroupsPath: cgroupsPath(spec.ID), annotations: driver.BackendLabels(spec), mounts: mounts,
		cpuMillis: spec.Resources.CPUMillis, memoryBytes: spec.Resources.MemoryBytes, pids: spec.Resources.Pids, runsc: b.runsc,
		openFilesHard: d.openFilesHard,
	}
	if b.userns != nil {
		p.idFirst = b.first()
	}
	return buildSpec(p)
}

func hasVar(env []string, name string) bool {
	for _, kv := range env {
		if strings.HasPrefix(kv, name+"=") {
			return true
		}
	}
	return false
}

// initParams are what initCommand needs besides the spec.
type initParams struct {
	hostname string
	uid, gid uint32
	// warm holds the entrypoint back until a claim (a warm-pool sandbox).
	warm bool
	// gate holds PID 1 until the server set its network up (fd 5).
	gate bool
	// runsc: readiness is execd answering; the exit code goes through
	// the exit pipe where runsc passes it (runscPassFD), else to a file in
	// the sandbox's root.
	runsc, runscPassFD bool
}

// initCommand is PID 1's command line (`corral init`) and the variables
// it adds to the image's and the request's environment.
func initCommand(spec driver.Spec, p initParams) (args, env []string) {
	o := initproc.DefaultOptions()
	o.ExitFD, o.ReadyFD, o.ConsoleRelay = 3, 4, true
	if p.gate {
		o.GateFD = 5
	}
	if p.runsc {
		o.ReadyFD = 0
		if !p.runscPassFD {
			o.ExitFD, o.ExitPath = 0, runscExit
		}
	}
	if p.uid != 0 || p.gid != 0 {
		o.User = formatUser(p.uid, p.gid)
	}
	// execd gets the token's verifier: nothing in the sandbox holds a token.
	env = []string{"HOSTNAME=" + p.hostname, "EXECD_ACCESS_TOKEN=" + verifier.Of(spec.ExecdToken)}
	if p.warm {
		// The verifier is in a file a claim replaces, not in the environment.
		o.WaitStart, o.ExecdTokenFile, o.ExecdEnvFile = statusInSandbox+"/start", statusInSandbox+"/token", statusInSandbox+"/env"
		env = env[:1]
	}
	if spec.Policed() && spec.CredentialProxy {
		o.TrustCA = insandbox.VaultCA
		trust := launch.TrustEnv()
		for _, k := range slices.Sorted(maps.Keys(trust)) {
			env = append(env, k+"="+trust[k])
		}
	}
	o.Entrypoint = spec.Entrypoint
	return o.Argv(insandbox.Binary), env
}
