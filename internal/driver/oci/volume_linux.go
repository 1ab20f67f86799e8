// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package oci

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/errdefs"
	"github.com/corral-dev/corral/internal/driver"
	"github.com/corral-dev/corral/internal/safefile"
	"github.com/corral-dev/corral/internal/sandbox"
)

// Volumes. A host volume is the directory the lifecycle resolved,
// opened again here without following any link (one put in its way since
// is refused). A named volume is a directory per tenant and name,
// Root/volumes/TENANT-KEY/NAME/data (the tenant's key a digest of its
// name), made on first use; its sub-path is resolved inside it as a
// program in the sandbox would (its links never lead out). Either is then
// bind-mounted from that descriptor onto a staging directory in the
// bundle, which only root can reach, and runc binds the staging mount:
// runc follows links in a mount's source, and another sandbox that writes
// the same directory could otherwise swap one in between the check and
// the mount. The staging mounts are undone once runc has run (the
// sandbox keeps its own). Every volume is mounted nosuid and nodev. A bundle's meta.json lists the named volumes the
// sandbox mounts: a volume in use is never removed.

// volumeMeta describes a named volume.
type volumeMeta struct {
	Name    string    `json:"name"`
	Tenant  string    `json:"tenant"`
	Created time.Time `json:"created"`
	// CreatedBy is the sandbox whose create made it.
	CreatedBy string `json:"createdBy"`
	// SizeBytes is the size of its own file system (fs.img, mounted at
	// fs, its files in fs/data); 0: its files are in data, on the data
	// directory's file system.
	SizeBytes int64 `json:"sizeBytes,omitempty"`
}

// volumeData is where a named volume's files are, its file system
// mounted again if it has one that a reboot unmounted.
func volumeData(dir string) (string, error) {
	img, mnt := filepath.Join(dir, "fs.img"), filepath.Join(dir, "fs")
	if _, err := os.Lstat(img); err != nil {
		return filepath.Join(dir, "data"), nil
	}
	if !isMountPoint(mnt) {
		if err := remountFS(img, mnt); err != nil {
			return "", err
		}
	}
	return filepath.Join(mnt, "data"), nil
}

// makeVolume makes a named volume's directory: a file system of its own
// when it has a size.
func makeVolume(ctx context.Context, dir string, size int64) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	data := filepath.Join(dir, "data")
	if size > 0 {
		mnt := filepath.Join(dir, "fs")
		if err := os.Mkdir(mnt, 0o700); err != nil {
			return err
		}
		if err := makeFS(ctx, filepath.Join(dir, "fs.img"), mnt, size); err != nil {
			return err
		}
		data = filepath.Join(mnt, "data")
	}
	return os.Mkdir(data, 0o755)
}

// dropVolumeDir removes a named volume's directory, its file system
// unmounted first.
func dropVolumeDir(dir string) error {
	if mnt := filepath.Join(dir, "fs"); isMountPoint(mnt) {
		if err := unmount(mnt); err != nil {
			return err
		}
	}
	return os.RemoveAll(dir)
}

func (d *Driver) tenantVolumes(tenant string) string {
	return filepath.Join(d.cfg.Root, "volumes", sandbox.TenantKey(tenant))
}

// volumeClaims are the named volumes spec mounts, and those of them it
// deletes with the sandbox (if it made them).
func volumeClaims(spec driver.Spec) (claims, deleteWith []string) {
	for _, v := range spec.Volumes {
		if v.Kind == sandbox.VolumeNamed {
			claims = append(claims, v.Claim)
			if v.DeleteWithSandbox {
				deleteWith = append(deleteWith, v.Claim)
			}
		}
	}
	return claims, deleteWith
}

// mountVolumes stages every volume of b for the runtime and adds its
// mount; the staging mounts stay until runc has run (b.volumeStaging).
func (d *Driver) mountVolumes(ctx context.Context, b *build) error {
	for _, v := range b.spec.Volumes {
		var dir *os.File
		var err error
		switch v.Kind {
		case sandbox.VolumeHost:
			if dir, err = safefile.OpenDirNoLinks(v.Resolved); err != nil {
				return errdefs.Wrap(errdefs.ErrInvalidArgument, api.CodeVolumeInvalidHostPath,
					fmt.Sprintf("volume %q: its host directory changed since it was checked", v.Name), err)
			}
		case sandbox.VolumeNamed:
			if dir, err = d.openNamed(ctx, b.spec, v); err != nil {
				return err
			}
		default:
			return fmt.Errorf("volume %q: unknown kind %d", v.Name, v.Kind)
		}
		staging := filepath.Join(b.bundle, "volumes", v.Name)
		if b.userns != nil {
			staging = filepath.Join(b.stage, "volumes", v.Name)
		}
		if b.userns != nil {
			// Its files keep their owners as the sandbox sees them.
			err = stageIdmapped(dir, staging, b.userns)
		} else if err = os.MkdirAll(staging, 0o700); err == nil {
			err = unix.Mount(fdPath(dir), staging, "", unix.MS_BIND|unix.MS_REC, "")
		}
		dir.Close()
		if err != nil {
			return fmt.Errorf("volume %q: stage: %w", v.Name, err)
		}
		b.volumeStaging = append(b.volumeStaging, staging)
		b.volumeMounts = append(b.volumeMounts, volumeMount(v, staging))
	}
	return nil
}

// volumeMount is the mount of volume v, staged at staging.
func volumeMount(v sandbox.Volume, staging string) specs.Mount {
	opts := []string{"rbind", "nosuid", "nodev"}
	if v.ReadOnly {
		opts = append(opts, "ro")
	}
	return specs.Mount{Destination: v.Target, Type: "bind", Source: staging, Options: opts}
}

// openNamed opens a named volume's directory (its sub-path), making the
// volume if it may.
func (d *Driver) openNamed(ctx context.Context, spec driver.Spec, v sandbox.Volume) (*os.File, error) {
	d.volMu.Lock()
	defer d.volMu.Unlock()
	dir := filepath.Join(d.tenantVolumes(spec.Tenant), v.Claim)
	if _, err := os.Lstat(filepath.Join(dir, "meta.json")); errors.Is(err, fs.ErrNotExist) {
		if !v.Create {
			return nil, errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeVolumePVCNotFound,
				"volume %q: named volume %s does not exist (and createIfNotExists is false)", v.Name, v.Claim)
		}
		// What a create that died midway left goes first.
		if err := dropVolumeDir(dir); err != nil {
			return nil, err
		}
		if err := makeVolume(ctx, dir, v.SizeBytes); err != nil {
			_ = dropVolumeDir(dir)
			return nil, err
		}
		meta, _ := json.Marshal(volumeMeta{Name: v.Claim, Tenant: spec.Tenant, Created: time.Now().UTC(), CreatedBy: spec.ID, SizeBytes: v.SizeBytes})
		if err := safefile.WriteFileAtomic(dir, "meta.json", meta, 0o600); err != nil {
			return nil, err
		}
	}
	data, err := volumeData(dir)
	if err != nil {
		return nil, err
	}
	root, err := safefile.OpenDir(data)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	if v.SubPath == "" {
		return safefile.OpenDirInRootAt(root, ".")
	}
	// The volume's files are the tenant's sandboxes': its links resolve
	// inside it.
	if _, err := safefile.MkdirAllInRootAt(root, "/"+v.SubPath, 0o755); err != nil {
		return nil, errdefs.Wrap(errdefs.ErrInvalidArgument, api.CodeVolumeInvalidSubPath,
			fmt.Sprintf("volume %q: subPath %s cannot be made in the volume", v.Name, v.SubPath), err)
	}
	f, err := safefile.OpenDirInRootAt(root, v.SubPath)
	if err != nil {
		return nil, errdefs.Wrap(errdefs.ErrInvalidArgument, api.CodeVolumeInvalidSubPath,
			fmt.Sprintf("volume %q: subPath %s is not a directory of the volume", v.Name, v.SubPath), err)
	}
	return f, nil
}

// volumesInUse maps each of tenant's named volumes that a bundle mounts
// to the sandboxes mounting it.
func (d *Driver) volumesInUse(tenant string) (map[string][]string, error) {
	out := map[string][]string{}
	entries, err := os.ReadDir(filepath.Join(runDir(d.cfg.Root), "bundles"))
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		m, err := readMeta(d.bundleDir(e.Name()))
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			return nil, err
		}
		if m.Tenant != tenant {
			continue
		}
		for _, c := range m.Volumes {
			out[c] = append(out[c], m.ID)
		}
	}
	return out, nil
}

// ListVolumes implements driver.Volumer.
func (d *Driver) ListVolumes(_ context.Context, tenant string) ([]driver.VolumeInfo, error) {
	entries, err := os.ReadDir(d.tenantVolumes(tenant))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	used, err := d.volumesInUse(tenant)
	if err != nil {
		return nil, err
	}
	var out []driver.VolumeInfo
	for _, e := range entries {
		b, _, err := safefile.ReadFile(filepath.Join(d.tenantVolumes(tenant), e.Name()), "meta.json", 1<<16)
		var vm volumeMeta
		if err != nil || json.Unmarshal(b, &vm) != nil || vm.Name != e.Name() {
			continue // being made
		}
		out = append(out, driver.VolumeInfo{Name: vm.Name, CreatedAt: vm.Created, InUseBy: used[vm.Name], SizeBytes: vm.SizeBytes})
	}
	return out, nil
}

// RemoveVolume implements driver.Volumer.
func (d *Driver) RemoveVolume(_ context.Context, tenant, name string) error {
	d.volMu.Lock()
	defer d.volMu.Unlock()
	return d.removeVolume(tenant, name, "")
}

// removeVolume removes a named volume no sandbox mounts; with onlyMadeBy
// set, only if that sandbox made it.
func (d *Driver) removeVolume(tenant, name, onlyMadeBy string) error {
	if validID(name) != nil {
		return fmt.Errorf("volume %s: %w", name, errdefs.ErrNotFound)
	}
	dir := filepath.Join(d.tenantVolumes(tenant), name)
	b, _, err := safefile.ReadFile(dir, "meta.json", 1<<16)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("volume %s: %w", name, errdefs.ErrNotFound)
	}
	if err != nil {
		return err
	}
	var vm volumeMeta
	if err := json.Unmarshal(b, &vm); err != nil {
		return fmt.Errorf("volume %s: corrupt description: %w", name, err)
	}
	if onlyMadeBy != "" && vm.CreatedBy != onlyMadeBy {
		return nil
	}
	used, err := d.volumesInUse(tenant)
	if err != nil {
		return err
	}
	if users := slices.DeleteFunc(used[name], func(id string) bool { return id == onlyMadeBy }); len(users) > 0 {
		return fmt.Errorf("volume %s is mounted by %v: %w", name, users, errdefs.ErrFailedPrecondition)
	}
	// The description first: a half-removed volume is no longer listed.
	if err := os.Remove(filepath.Join(dir, "meta.json")); err != nil {
		return err
	}
	return dropVolumeDir(dir)
}

// removeMadeVolumes removes the named volumes a failed create made.
func (d *Driver) removeMadeVolumes(spec driver.Spec) error {
	claims, _ := volumeClaims(spec)
	return d.removeVolumesOf(&bundleMeta{ID: spec.ID, Tenant: spec.Tenant, DeleteVolumes: claims})
}

// removeVolumesOf removes the named volumes a destroyed sandbox made
// and was to take with it, when no other sandbox mounts them.
func (d *Driver) removeVolumesOf(m *bundleMeta) error {
	if m == nil || len(m.DeleteVolumes) == 0 {
		return nil
	}
	d.volMu.Lock()
	defer d.volMu.Unlock()
	var errs []error
	for _, name := range m.DeleteVolumes {
		err := d.removeVolume(m.Tenant, name, m.ID)
		if err != nil && !errors.Is(err, errdefs.ErrNotFound) && !errors.Is(err, errdefs.ErrFailedPrecondition) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
