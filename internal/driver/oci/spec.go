// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package oci

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/moby/profiles/seccomp"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/corral-dev/corral/internal/driver"
	"github.com/corral-dev/corral/internal/insandbox"
)

// Paths inside a sandbox.
const (
	statusInSandbox = insandbox.BinaryDir + "/status"
	// specVersion is the runtime-spec version the bundles declare: the
	// oldest that has every field they use. Runtimes check it (crun 1.8
	// refuses "1.3.0", the library's own), runc does not.
	specVersion = "1.0.2"
)

// ConsoleLimit bounds a sandbox's console log (what its entrypoint and
// init print), which lives on the data disk beside its writable layer.
const ConsoleLimit = 1 << 20

// DefaultPids bounds the processes and threads of a sandbox that asks for
// no pids limit.
const DefaultPids = 4096

// capabilities is the capability set of a sandbox's processes
// (insandbox.Capabilities), as the OCI spec names them.
func capabilities() []string {
	caps := insandbox.Capabilities()
	for i, c := range caps {
		caps[i] = "CAP_" + c
	}
	return caps
}

func maskedPaths() []string {
	return []string{
		"/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys", "/proc/latency_stats", "/proc/timer_list",
		"/proc/timer_stats", "/proc/sched_debug", "/proc/scsi", "/proc/interrupts", "/sys/firmware",
		"/sys/devices/virtual/powercap", "/sys/kernel/debug",
	}
}

func readonlyPaths() []string {
	return []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"}
}

// specParams is what a sandbox's runtime spec is made from.
type specParams struct {
	id       string
	rootfs   string
	hostname string
	args     []string
	env      []string
	cwd      string
	// netns is the network namespace to join; "" makes a new one (in the
	// user namespace, with one).
	netns       string
	cgroupsPath string
	// idFirst, when not 0, gives the sandbox a user namespace mapping its
	// IDs 0-65535 to host IDs from idFirst.
	idFirst     uint32
	annotations map[string]string
	// binds are extra mounts: the corral binary, the status dir, hosts.
	mounts []specs.Mount
	// cpuMillis, memoryBytes and pids are limits; 0 means none (pids: the default).
	cpuMillis, memoryBytes, pids int64
	// openFilesHard is the sandbox's hard open-file limit (0: the
	// default, SandboxOpenFilesHard).
	openFilesHard uint64
	// runsc: the spec is gVisor's (runsc.go): the pids bound the
	// sandbox's tasks by RLIMIT_NPROC, with host room for the Sentry's.
	runsc bool
}

// The open-file limit of a sandbox's processes: the soft one most
// programs expect (select(2) breaks above 1024), and a hard one a
// program may raise its own soft limit to, as containerd gives containers
// — or the server's own hard limit where that is lower, since the runtime
// (which sets it, as the server's child) cannot go above that without
// CAP_SYS_RESOURCE.
const (
	SandboxOpenFiles     = 1024
	SandboxOpenFilesHard = 524288
)

// sandboxOpenFilesHard is the hard open-file limit sandboxes get from
// this process: SandboxOpenFilesHard or its own hard limit, the lower.
func sandboxOpenFilesHard() uint64 {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil || lim.Max >= SandboxOpenFilesHard {
		return SandboxOpenFilesHard
	}
	return lim.Max
}

// buildSpec makes the OCI runtime spec of a sandbox with corral's
// security defaults: new pid, mount, ipc, uts, network and cgroup
// namespaces; Docker's default seccomp profile, for the machine's native
// system call ABI only; no_new_privs; a small
// capability set; masked and read-only /proc and /sys paths; a minimal
// /dev; cgroup limits.
func buildSpec(p specParams) (*specs.Spec, error) {
	caps := capabilities()
	hard := p.openFilesHard
	if hard == 0 {
		hard = SandboxOpenFilesHard
	}
	pids := p.pids
	if pids == 0 {
		pids = DefaultPids
	}
	s := &specs.Spec{
		Version: specVersion,
		Process: &specs.Process{
			User:            specs.User{UID: 0, GID: 0},
			Args:            p.args,
			Env:             p.env,
			Cwd:             p.cwd,
			NoNewPrivileges: true,
			Capabilities:    &specs.LinuxCapabilities{Bounding: caps, Effective: caps, Permitted: caps},
			// Explicit, so a sandbox does not inherit the server's raised
			// limit through runc (the server raises its own to hold the
			// descriptors of thousands of sandboxes).
			Rlimits: []specs.POSIXRlimit{{Type: "RLIMIT_NOFILE", Soft: min(SandboxOpenFiles, hard), Hard: hard}},
		},
		Root:        &specs.Root{Path: p.rootfs},
		Hostname:    p.hostname,
		Annotations: p.annotations,
		Mounts: append([]specs.Mount{
			{Destination: "/proc", Type: "proc", Source: "proc", Options: []string{"nosuid", "noexec", "nodev"}},
			{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
			{Destination: "/dev/pts", Type: "devpts", Source: "devpts", Options: []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5"}},
			{Destination: "/dev/shm", Type: "tmpfs", Source: "shm", Options: []string{"nosuid", "noexec", "nodev", "mode=1777", "size=65536k"}},
			{Destination: "/dev/mqueue", Type: "mqueue", Source: "mqueue", Options: []string{"nosuid", "noexec", "nodev"}},
			{Destination: "/sys", Type: "sysfs", Source: "sysfs", Options: []string{"nosuid", "noexec", "nodev", "ro"}},
			{Destination: "/sys/fs/cgroup", Type: "cgroup", Source: "cgroup", Options: []string{"nosuid", "noexec", "nodev", "relatime", "ro"}},
		}, p.mounts...),
		Linux: &specs.Linux{
			Namespaces: []specs.LinuxNamespace{
				{Type: specs.PIDNamespace}, {Type: specs.IPCNamespace}, {Type: specs.UTSNamespace},
				{Type: specs.MountNamespace}, {Type: specs.CgroupNamespace},
				{Type: specs.NetworkNamespace, Path: p.netns},
			},
			CgroupsPath: p.cgroupsPath,
			Resources: &specs.LinuxResources{
				Devices: []specs.LinuxDeviceCgroup{{Allow: false, Access: "rwm"}},
				Pids:    &specs.LinuxPids{Limit: &pids},
			},
			MaskedPaths:   maskedPaths(),
			ReadonlyPaths: readonlyPaths(),
		},
	}
	if p.netns == "" {
		s.Linux.Namespaces[len(s.Linux.Namespaces)-1].Path = ""
	}
	if p.idFirst != 0 {
		m := []specs.LinuxIDMapping{{ContainerID: 0, HostID: p.idFirst, Size: usernsSize}}
		s.Linux.Namespaces = append(s.Linux.Namespaces, specs.LinuxNamespace{Type: specs.UserNamespace})
		s.Linux.UIDMappings, s.Linux.GIDMappings = m, m
	}
	if p.memoryBytes > 0 {
		limit := p.memoryBytes
		s.Linux.Resources.Memory = &specs.LinuxMemory{Limit: &limit, Swap: &limit}
	}
	if p.cpuMillis > 0 {
		period := uint64(100000)
		quota := p.cpuMillis * 100
		s.Linux.Resources.CPU = &specs.LinuxCPU{Period: &period, Quota: &quota}
	}
	if p.runsc {
		// Pids holds gVisor's threads and stubs; the sandbox's tasks are
		// held by RLIMIT_NPROC in the Sentry.
		host := driver.RunscHostPids(pids)
		s.Linux.Resources.Pids = &specs.LinuxPids{Limit: &host}
		n := uint64(pids)
		s.Process.Rlimits = append(s.Process.Rlimits, specs.POSIXRlimit{Type: "RLIMIT_NPROC", Hard: n, Soft: n})
	}
	sc, err := seccomp.GetDefaultProfile(s)
	if err != nil {
		return nil, fmt.Errorf("seccomp profile: %w", err)
	}
	// The machine's own system call ABI only: the 32-bit ones (i386,
	// x32) are refused. They are another kernel entry point to defend,
	// and the runtime compiles the filter once per ABI on every create,
	// which tripled its cost (docs/benchmarks.md#density).
	if len(sc.Architectures) > 1 {
		sc.Architectures = sc.Architectures[:1]
	}
	s.Linux.Seccomp = sc
	return s, nil
}

// bindMount returns a bind mount of src at dst.
func bindMount(src, dst string, readOnly bool) specs.Mount {
	opts := []string{"rbind", "nosuid", "nodev"}
	if readOnly {
		opts = append(opts, "ro")
	}
	return specs.Mount{Destination: dst, Type: "bind", Source: src, Options: opts}
}

// overlayMount returns an overlay of a host directory with a writable upper.
func overlayMount(lower, upper, work, dst string) specs.Mount {
	return specs.Mount{Destination: dst, Type: "overlay", Source: "overlay",
		Options: []string{"lowerdir=" + lower, "upperdir=" + upper, "workdir=" + work}}
}

// mergeEnv lays overrides over base (both KEY=VALUE lists) and makes sure
// PATH is set.
func mergeEnv(base []string, overrides map[string]string, extra ...string) []string {
	idx := map[string]int{}
	var out []string
	set := func(kv string) {
		k, _, _ := strings.Cut(kv, "=")
		if i, ok := idx[k]; ok {
			out[i] = kv
			return
		}
		idx[k] = len(out)
		out = append(out, kv)
	}
	for _, kv := range base {
		set(kv)
	}
	for _, k := range slices.Sorted(maps.Keys(overrides)) {
		set(k + "=" + overrides[k])
	}
	for _, kv := range extra {
		set(kv)
	}
	if _, ok := idx["PATH"]; !ok {
		set("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
	}
	return out
}

func formatUser(uid, gid uint32) string {
	return strconv.FormatUint(uint64(uid), 10) + ":" + strconv.FormatUint(uint64(gid), 10)
}
