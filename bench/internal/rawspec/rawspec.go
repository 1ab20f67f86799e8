// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

// Package rawspec makes the runtime spec of the benches' raw baselines
// from the one corral wrote for a sandbox: runc alone, in corral's bundle
// shape (namespaces, ID mapping, seccomp, capabilities, limits, masked
// paths), without what corral adds to it.
package rawspec

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// FromTemplate is the runtime spec of a runc-alone container: template
// (a corral sandbox's) with PID 1 args on rootfs, read-only,
// without corral's binds and overlays, its namespaces new; nil template:
// runc's default spec.
func FromTemplate(template []byte, dir, rootfs string, args []string) (*specs.Spec, error) {
	if template == nil {
		if out, err := exec.Command("runc", "spec", "--bundle", dir).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("runc spec: %v %s", err, out)
		}
		b, err := os.ReadFile(filepath.Join(dir, "config.json"))
		if err != nil {
			return nil, err
		}
		template = b
	}
	var s specs.Spec
	if err := json.Unmarshal(template, &s); err != nil {
		return nil, err
	}
	if s.Process == nil || s.Linux == nil {
		return nil, errors.New("the template has no process or no linux section")
	}
	s.Process.Terminal, s.Process.Args = false, args
	s.Process.Env, s.Process.Cwd = []string{"PATH=/bin"}, "/"
	s.Root = &specs.Root{Path: rootfs, Readonly: true}
	s.Hooks, s.Annotations = nil, nil
	var mounts []specs.Mount
	for _, m := range s.Mounts {
		if m.Type == "bind" || m.Type == "overlay" || slices.Contains(m.Options, "bind") || slices.Contains(m.Options, "rbind") {
			continue
		}
		mounts = append(mounts, m)
	}
	s.Mounts = mounts
	for i := range s.Linux.Namespaces {
		s.Linux.Namespaces[i].Path = ""
	}
	// Every mount point exists in the shared root: runc cannot make one
	// in a read-only root, nor as the user namespace's root in the host's.
	for _, m := range s.Mounts {
		if err := os.MkdirAll(filepath.Join(rootfs, m.Destination), 0o755); err != nil {
			return nil, err
		}
	}
	return &s, nil
}

// Shift moves ID mappings to the i-th range past the ones given (the
// sandbox's whose spec was taken, long gone by then).
func Shift(ms []specs.LinuxIDMapping, i int) []specs.LinuxIDMapping {
	out := slices.Clone(ms)
	for k := range out {
		out[k].HostID += uint32(i+1) * max(out[k].Size, 65536)
	}
	return out
}
