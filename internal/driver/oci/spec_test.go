// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package oci

import (
	"os"
	"runtime"
	"slices"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/internal/driver"
	"github.com/corral-dev/corral/internal/imagestore"
	"github.com/corral-dev/corral/internal/sandbox"
	"github.com/corral-dev/corral/internal/testutil/golden"
)

// The runtime spec of each kind of native sandbox is pinned by a file in
// testdata: what runc (or runsc) is asked for, capabilities, namespaces,
// mounts, limits, PID 1's command line. A change to any of it shows as a
// diff of those files in review. Needs no root: sandboxSpec has no side
// effects.
func TestSpecGolden(t *testing.T) {
	const bundle = "/var/lib/corral/run/bundles/sb-1"
	image := &rootfsPlan{config: imagestore.Config{Env: []string{"PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8"}, WorkingDir: "/app"}}
	host := &rootfsPlan{host: true, config: imagestore.Config{Env: []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root"}, WorkingDir: "/root"}}
	userns, err := os.Open(os.DevNull) // stands for the range's namespace: only its presence counts
	if err != nil {
		t.Fatal(err)
	}
	defer userns.Close()
	base := func() driver.Spec {
		return driver.Spec{
			ID: "sb-1", Tenant: "acme", Image: driver.Image{URI: "python:3.12"},
			Entrypoint: []string{"python3", "-m", "http.server"},
			Env:        map[string]string{"GREETING": "hello"},
			Labels:     map[string]string{"project": "golden"},
			ExecdToken: "execd-token", EgressToken: "egress-token",
			Resources: driver.Resources{CPUMillis: 500, MemoryBytes: 512 << 20},
		}
	}
	volume := sandbox.Volume{Name: "data", Kind: sandbox.VolumeHost, Resolved: "/srv/data", Target: "/data", ReadOnly: true}
	cases := []struct {
		name string
		b    func() *build
		// hostDirs: the host image's system directories, as overlays.
		hostDirs bool
		netns    string
		noPassFD bool
	}{
		{name: "runc", netns: "/proc/4242/fd/7", b: func() *build {
			s := base()
			s.Volumes = []sandbox.Volume{volume}
			s.SecretsDir = "/var/lib/corral/secrets/sb-1"
			s.NetworkPolicy = []byte(`{"defaultAction":"deny","egress":[{"action":"allow","target":"pypi.org"}]}`)
			s.CredentialProxy = true
			return &build{spec: s, plan: image, uid: 1000, gid: 1000}
		}},
		{name: "runc-userns", b: func() *build {
			s := base()
			s.Volumes = []sandbox.Volume{volume}
			return &build{spec: s, plan: image, idRange: 3, userns: userns}
		}},
		{name: "runc-host-image", hostDirs: true, netns: "/proc/4242/fd/7", b: func() *build {
			s := base()
			s.Image.URI, s.Entrypoint, s.Resources = HostImage, []string{"sleep", "infinity"}, driver.Resources{Pids: 256}
			return &build{spec: s, plan: host}
		}},
		{name: "runsc", b: func() *build {
			s := base()
			s.Isolation = api.IsolationRunsc
			return &build{spec: s, plan: image, runsc: true}
		}},
		{name: "runsc-without-pass-fd", noPassFD: true, b: func() *build {
			s := base()
			s.Isolation = api.IsolationRunsc
			return &build{spec: s, plan: image, runsc: true}
		}},
		{name: "warm", b: func() *build {
			s := base()
			s.Entrypoint = nil
			return &build{spec: s, plan: host, mode: waitForClaim, idRange: 1, userns: userns}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := &Driver{runscPassFD: !c.noPassFD}
			b := c.b()
			b.bundle, b.hostname, b.rootfs = bundle, "sandbox-sb1", bundle+"/rootfs"
			b.cwd = b.plan.config.WorkingDir
			for _, v := range b.spec.Volumes {
				b.volumeMounts = append(b.volumeMounts, volumeMount(v, bundle+"/volumes/"+v.Name))
			}
			ca := ""
			if b.spec.CredentialProxy {
				ca = egressDir(bundle) + "/ca.pem"
			}
			b.mounts = corralMounts("/usr/local/bin/corral", bundle, b.spec, ca)
			var hostDirs []specs.Mount
			if c.hostDirs {
				for _, dir := range hostSystemDirs() {
					hostDirs = append(hostDirs, overlayMount("/", bundle+"/host"+dir+"/upper", bundle+"/host"+dir+"/work", dir))
				}
			}
			s, err := d.sandboxSpec(b, hostDirs, c.netns)
			if err != nil {
				t.Fatal(err)
			}
			checkSpecInvariants(t, s)
			// The seccomp profile is Docker's default, per machine
			// architecture: pinned on its own below.
			s.Linux.Seccomp = nil
			golden.JSON(t, "spec-"+c.name, s)
		})
	}
}

// checkSpecInvariants holds what no golden update may take away.
func checkSpecInvariants(t *testing.T, s *specs.Spec) {
	t.Helper()
	if !s.Process.NoNewPrivileges {
		t.Error("no_new_privs is off")
	}
	for _, set := range [][]string{s.Process.Capabilities.Bounding, s.Process.Capabilities.Effective, s.Process.Capabilities.Permitted} {
		if !slices.Equal(set, capabilities()) {
			t.Errorf("capabilities %q, want the one set %q", set, capabilities())
		}
	}
	if s.Process.Capabilities.Inheritable != nil || s.Process.Capabilities.Ambient != nil {
		t.Error("inheritable or ambient capabilities are set")
	}
	var ns []specs.LinuxNamespaceType
	for _, n := range s.Linux.Namespaces {
		ns = append(ns, n.Type)
	}
	for _, want := range []specs.LinuxNamespaceType{specs.PIDNamespace, specs.IPCNamespace, specs.UTSNamespace, specs.MountNamespace, specs.CgroupNamespace, specs.NetworkNamespace} {
		if !slices.Contains(ns, want) {
			t.Errorf("no %s namespace", want)
		}
	}
	if s.Linux.Seccomp == nil || s.Linux.Seccomp.DefaultAction == specs.ActAllow {
		t.Error("no seccomp filter")
	}
	if s.Linux.Resources.Pids == nil || s.Linux.Resources.Pids.Limit == nil || *s.Linux.Resources.Pids.Limit <= 0 {
		t.Error("no pids limit")
	}
	// The open-file limit is the sandbox's own, never the server's.
	if !slices.ContainsFunc(s.Process.Rlimits, func(l specs.POSIXRlimit) bool {
		return l.Type == "RLIMIT_NOFILE" && l.Soft == SandboxOpenFiles && l.Hard >= l.Soft && l.Hard <= SandboxOpenFilesHard
	}) {
		t.Errorf("rlimits %v: no RLIMIT_NOFILE of the sandbox's own", s.Process.Rlimits)
	}
	// corral's own mounts come last: no volume sits over them.
	last := s.Mounts[len(s.Mounts)-1]
	if last.Destination != "/etc/hostname" && last.Destination != "/etc/resolv.conf" && last.Destination != "/etc/corral/vault-ca.pem" {
		t.Errorf("the last mount is %s, not one of corral's", last.Destination)
	}
}

// The seccomp filter every native sandbox gets: Docker's default profile
// for this machine's own system call ABI only.
func TestSeccompGolden(t *testing.T) {
	s, err := buildSpec(specParams{id: "sb-1", rootfs: "/rootfs", args: []string{"/bin/true"}})
	if err != nil {
		t.Fatal(err)
	}
	sc := s.Linux.Seccomp
	if len(sc.Architectures) != 1 {
		t.Errorf("architectures %q: want the machine's own only", sc.Architectures)
	}
	allowed := map[string]bool{}
	for _, r := range sc.Syscalls {
		if r.Action == specs.ActAllow && len(r.Args) == 0 {
			for _, n := range r.Names {
				allowed[n] = true
			}
		}
	}
	for _, n := range []string{"mount", "bpf", "kexec_load", "init_module", "unshare", "setns", "open_by_handle_at", "keyctl"} {
		if allowed[n] {
			t.Errorf("%s is allowed (the sandbox has no capability that needs it)", n)
		}
	}
	golden.JSON(t, "seccomp-"+runtime.GOARCH, sc)
}
