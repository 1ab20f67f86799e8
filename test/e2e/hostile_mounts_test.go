// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/internal/testutil/registry"
	"github.com/corral-dev/corral/sdk"
)

// reservedThroughLink are mount paths that, through the links /v -> /
// and /deep/w -> / planted in the sandbox's root, would land on what corral mounts or
// needs in every sandbox.
func reservedThroughLink() []string {
	return []string{"/v/.corral", "/v/run/corral", "/v/var/lib/corral-execd", "/v/etc/corral", "/v/proc/sys", "/deep/w/.corral"}
}

// linkImage is the rig's image with the links /v -> / and /deep/w -> /.
func (h *hostileRig) linkImage(t *testing.T) string {
	t.Helper()
	img, err := mutate.AppendLayers(busyboxImage(t), tarLayer(t, []tarFile{
		{name: "v", link: "/"}, {name: "deep/", dir: true, mode: 0o755}, {name: "deep/w", link: "/"},
	}))
	if err != nil {
		t.Fatal(err)
	}
	ref := strings.Replace(h.image, "/corral/busybox:1", "/corral/linked:1", 1)
	registry.Push(t, ref, img)
	h.refs = append(h.refs, ref)
	return ref
}

// volumeOverCorral is the review's H1: a tenant writes its own `corral`
// into a named volume, plants the link /v -> / in an image or in a
// snapshot of its own, and asks for that volume at /v/.corral, so that a
// runtime following the link would run the tenant's program as PID 1.
// Every such create is refused (400, the mount path named), on every
// tier the rig offers; the same volume at a path without links mounts,
// and the sandbox's PID 1 is corral's own binary.
func (h *hostileRig) volumeOverCorral(t *testing.T, linkImage string, tiers ...string) {
	tools := func(target string) []api.Volume {
		return []api.Volume{{Name: "tools", PVC: &api.PVCVolume{ClaimName: "tools"}, MountPath: target}}
	}
	// The tenant's program: says it ran, then waits as PID 1 would.
	writer := h.create(t, h.attacker, func(r *api.CreateSandboxRequest) { r.Volumes = tools("/tools") })
	if out, errOut, code := sandboxExecd(t, h.attacker, writer).run(
		"printf '#!/bin/sh\\necho TENANT-PID1-RAN\\nexec sleep 3600\\n' > /tools/corral && chmod 755 /tools/corral && echo ok"); code != 0 || out != "ok\n" {
		t.Fatalf("write the tenant's program: %q %q (exit %d)", out, errOut, code)
	}
	h.wantPID1IsCorral(t, writer)
	// A snapshot of a sandbox that made the link itself.
	var snapID string
	if h.runtime != "kube" {
		c := h.create(t, h.attacker, nil)
		if out, errOut, code := sandboxExecd(t, h.attacker, c).run("ln -s / /v && mkdir -p /deep && ln -s / /deep/w && echo ok"); code != 0 || out != "ok\n" {
			t.Fatalf("plant the link: %q %q (exit %d)", out, errOut, code)
		}
		snap, err := h.attacker.CreateSnapshot(ctx(t), c, "linked")
		if err != nil {
			t.Fatal(err)
		}
		testutilWaitSnapshot(t, h.attacker, snap.ID)
		snapID = snap.ID
	}
	for _, tier := range append([]string{""}, tiers...) {
		for _, from := range []string{"image", "snapshot"} {
			if from == "snapshot" && snapID == "" {
				continue
			}
			for _, target := range reservedThroughLink() {
				name := from + " " + tier + " " + target
				req := ociCreate(linkImage)
				if from == "snapshot" {
					req.Image, req.SnapshotID = nil, snapID
				}
				if tier != "" {
					req.Extensions = map[string]string{api.ExtensionIsolation: tier}
				}
				req.Volumes = tools(target)
				sb, err := h.attacker.CreateSandbox(ctx(t), req, sdk.CreateOptions{})
				var ae *sdk.APIError
				if err == nil {
					out, _, _ := sandboxExecd(t, h.attacker, sb.ID).run("cat /proc/1/cmdline | tr '\\0' ' '")
					t.Errorf("%s: the create was accepted (PID 1 runs %q)", name, out)
					if tier == "" {
						h.wantPID1IsCorral(t, sb.ID)
					}
					continue
				}
				if !errors.As(err, &ae) || ae.Status != 400 || ae.Code != api.CodeVolumeInvalidMountPath || !strings.Contains(ae.Message, target) {
					t.Errorf("%s: create = %v, want a 400 %s naming the mount path", name, err, api.CodeVolumeInvalidMountPath)
				}
			}
		}
	}
	// The same volume where no link leads: mounted, and PID 1 is corral.
	sb := h.create(t, h.attacker, func(r *api.CreateSandboxRequest) {
		r.Image = &api.ImageSpec{URI: linkImage}
		r.Volumes = tools("/opt/tools")
	})
	if out, _, code := sandboxExecd(t, h.attacker, sb).run("test -x /opt/tools/corral && echo mounted"); code != 0 || out != "mounted\n" {
		t.Errorf("the volume at a path without links: %q (exit %d)", out, code)
	}
	h.wantPID1IsCorral(t, sb)
	h.victimUnaffected(t)
}

// wantPID1IsCorral checks, from the host, that sandbox id's PID 1 runs
// the server's own corral binary (the same file: a bind mount keeps it).
func (h *hostileRig) wantPID1IsCorral(t *testing.T, id string) {
	t.Helper()
	var pid int
	switch h.runtime {
	case "oci":
		b, err := os.ReadFile(filepath.Join(h.dir, "oci", "run", "bundles", id, "init.pid"))
		if err != nil {
			t.Fatalf("sandbox %s: init.pid: %v", id, err)
		}
		pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
	case "docker":
		pid = dockerInitPid(t, requireDocker(t), id)
	default:
		return
	}
	var want, got syscall.Stat_t
	if err := syscall.Stat(binary, &want); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Stat("/proc/"+strconv.Itoa(pid)+"/exe", &got); err != nil {
		t.Fatalf("sandbox %s: PID 1 (%d): %v", id, pid, err)
	}
	if got.Dev != want.Dev || got.Ino != want.Ino {
		exe, _ := os.Readlink("/proc/" + strconv.Itoa(pid) + "/exe")
		t.Errorf("sandbox %s: PID 1 (host pid %d) runs %s, not the server's corral binary", id, pid, exe)
	}
}
