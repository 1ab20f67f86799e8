// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/errdefs"
	"github.com/corral-dev/corral/internal/driver"
	"github.com/corral-dev/corral/internal/sandbox"
)

func (m *Manager) volumer() (driver.Volumer, error) {
	v, ok := m.d.(driver.Volumer)
	if !ok {
		return nil, errdefs.Newf(errdefs.ErrNotImplemented, api.CodeVolumeUnsupported, "the %s runtime does not mount volumes", m.cfg.DriverName)
	}
	return v, nil
}

// admitVolumes checks a create's volumes against this server: the
// runtime mounts volumes, and each host volume is under a prefix the
// operator allows, links resolved (resolveHost).
func (m *Manager) admitVolumes(vols []sandbox.Volume) ([]sandbox.Volume, error) {
	if len(vols) == 0 {
		return nil, nil
	}
	if _, err := m.volumer(); err != nil {
		return nil, err
	}
	out := slices.Clone(vols)
	for i := range out {
		if out[i].Kind == sandbox.VolumeNamed {
			if err := m.sizeVolume(&out[i]); err != nil {
				return nil, err
			}
		}
		if out[i].Kind == sandbox.VolumeHost {
			if why := m.cfg.HostVolumesUnsupported; why != "" {
				return nil, errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeVolumeUnsupported, "volume %q: the %s runtime mounts no host volumes: %s", out[i].Name, m.cfg.DriverName, why)
			}
			if err := resolveHost(&out[i], m.cfg.AllowedHostPaths); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// sizeVolume bounds a named volume a create may make: its pvc.storage
// no more than the server's maximum, and the maximum when it gives none,
// so that no tenant's volume can fill the disk the server's own state is
// on. A runtime that cannot size a volume refuses pvc.storage.
func (m *Manager) sizeVolume(v *sandbox.Volume) error {
	if why := m.cfg.VolumeSizeUnsupported; why != "" {
		if v.SizeBytes > 0 {
			return errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeInvalidParameter,
				"volume %q: pvc.storage cannot be honoured: %s; leave it out", v.Name, why)
		}
		return nil
	}
	limit := m.cfg.Storage.MaxVolumeBytes
	switch {
	case limit <= 0:
	case v.SizeBytes > limit:
		return errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeInvalidParameter,
			"volume %q: pvc.storage %s is more than this server allows a named volume (%s, set by --max-volume)",
			v.Name, sandbox.FormatBytes(v.SizeBytes), sandbox.FormatBytes(limit))
	case v.SizeBytes == 0:
		v.SizeBytes = limit
	}
	return nil
}

// under reports whether p is prefix or beneath it.
func under(p, prefix string) bool {
	return prefix == "/" || p == prefix || strings.HasPrefix(p, prefix+"/")
}

func underAny(p string, prefixes []string) bool {
	return slices.ContainsFunc(prefixes, func(pre string) bool { return under(p, pre) })
}

// resolveHost sets v.Resolved: the host directory v names (with its
// sub-path), every link resolved, still under an allowed prefix. A link
// that leads out, a missing directory and a file are refused, each
// naming the rule.
func resolveHost(v *sandbox.Volume, allowed []string) error {
	if len(allowed) == 0 {
		return errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeVolumeHostPathForbidden,
			"volume %q: host volumes are off on this server (the operator allows them with --allowed-host-paths)", v.Name)
	}
	if !underAny(v.HostPath, allowed) {
		return errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeVolumeHostPathForbidden,
			"volume %q: host.path %q is not under an allowed prefix (%s)", v.Name, v.HostPath, strings.Join(allowed, ", "))
	}
	want := filepath.Join(v.HostPath, v.SubPath)
	real, err := filepath.EvalSymlinks(want)
	if errors.Is(err, fs.ErrNotExist) {
		return errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeVolumeHostPathNotFound, "volume %q: %s does not exist on this server", v.Name, want)
	}
	if err != nil {
		return errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeVolumeInvalidHostPath, "volume %q: %s cannot be resolved", v.Name, want)
	}
	if !underAny(real, allowed) {
		return errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeVolumeHostPathForbidden,
			"volume %q: %s leads through a link out of the allowed prefixes (%s)", v.Name, want, strings.Join(allowed, ", "))
	}
	fi, err := os.Stat(real)
	if err != nil || !fi.IsDir() {
		return errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeVolumeInvalidHostPath, "volume %q: %s is not a directory", v.Name, want)
	}
	v.Resolved = real
	return nil
}

// ListVolumes returns a tenant's named volumes.
func (m *Manager) ListVolumes(ctx context.Context, tenant string) ([]driver.VolumeInfo, error) {
	v, err := m.volumer()
	if err != nil {
		return nil, err
	}
	// A runtime's error keeps its kind; its text reaches only the log.
	return v.ListVolumes(ctx, tenant)
}

// DeleteVolume deletes a tenant's named volume and its files; one a
// sandbox mounts is refused.
func (m *Manager) DeleteVolume(ctx context.Context, tenant, name string) error {
	v, err := m.volumer()
	if err != nil {
		return err
	}
	err = v.RemoveVolume(ctx, tenant, name)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, errdefs.ErrNotFound):
		return errdefs.Newf(errdefs.ErrNotFound, api.CodeVolumeNotFound, "volume %s not found", name)
	case errors.Is(err, errdefs.ErrFailedPrecondition):
		return errdefs.Newf(errdefs.ErrFailedPrecondition, api.CodeVolumeInUse, "volume %s is mounted by a sandbox; delete the sandbox first", name)
	}
	return fmt.Errorf("volume %s: %w", name, err)
}
