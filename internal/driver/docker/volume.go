// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package docker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"
	"github.com/moby/moby/client/pkg/versions"
	"golang.org/x/sys/unix"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/errdefs"
	"github.com/corral-dev/corral/internal/driver"
	"github.com/corral-dev/corral/internal/safefile"
	"github.com/corral-dev/corral/internal/sandbox"
)

// Volumes. A named volume is a Docker named volume,
// corral-TENANT-KEY-NAME, labelled with its tenant and name and the
// sandbox that made it, so another tenant's volume of the same name is
// another volume. A host volume needs the engine on this machine: the
// directory the lifecycle resolved is opened again without following any
// link and bind-mounted from that descriptor onto a staging directory
// under the state directory, which the engine binds when the container
// starts (the engine follows links in a bind's source, and another
// sandbox writing the same directory could otherwise swap one in); the
// staging mount is undone once the container runs.

const (
	// LabelVolume names a named volume's claim.
	LabelVolume = "corral.dev/volume"
	// labelVolumeCreatedBy is the sandbox whose create made a volume.
	labelVolumeCreatedBy = "corral.dev/created-by"
	// labelDeleteVolumes lists, on a container, the named volumes it
	// takes with it if it made them.
	labelDeleteVolumes = "corral.dev/delete-volumes"
)

func volumeName(tenant, claim string) string {
	return "corral-" + sandbox.TenantKey(tenant) + "-" + claim
}

// volumeMounts makes spec's mounts: named volumes made where asked, host
// volumes staged. It returns the staging mounts to undo once the
// container runs.
func (d *Driver) volumeMounts(ctx context.Context, spec driver.Spec, host *container.HostConfig, cfg *container.Config) (staged []string, err error) {
	defer func() {
		if err != nil {
			unstage(staged)
			staged = nil
		}
	}()
	var deleteWith []string
	for _, v := range spec.Volumes {
		m := mount.Mount{Target: v.Target, ReadOnly: v.ReadOnly}
		switch v.Kind {
		case sandbox.VolumeHost:
			if d.cfg.Remote {
				return staged, errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeVolumeUnsupported,
					"volume %q: host volumes need the Docker engine on the server's machine; this server's is remote", v.Name)
			}
			dir, err := d.stageHost(spec.ID, v)
			if err != nil {
				return staged, err
			}
			staged = append(staged, dir)
			m.Type, m.Source = mount.TypeBind, dir
		case sandbox.VolumeNamed:
			if v.SubPath != "" {
				// The engine resolves a volume's sub-path inside the
				// volume itself, from API 1.45 on.
				if ver := d.cli.ClientVersion(); versions.LessThan(ver, "1.45") {
					return staged, errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeVolumeInvalidSubPath,
						"volume %q: a subPath of a named volume needs Docker Engine API 1.45; this engine speaks %s", v.Name, ver)
				}
				m.VolumeOptions = &mount.VolumeOptions{Subpath: v.SubPath}
			}
			if err := d.ensureVolume(ctx, spec, v); err != nil {
				return staged, err
			}
			m.Type, m.Source = mount.TypeVolume, volumeName(spec.Tenant, v.Claim)
			if v.DeleteWithSandbox {
				deleteWith = append(deleteWith, v.Claim)
			}
		}
		host.Mounts = append(host.Mounts, m)
	}
	if len(deleteWith) > 0 {
		cfg.Labels[labelDeleteVolumes] = strings.Join(deleteWith, ",")
	}
	return staged, nil
}

// stageHost bind-mounts a host volume's directory, opened without
// following a link, onto a directory only root reaches.
func (d *Driver) stageHost(id string, v sandbox.Volume) (string, error) {
	f, err := safefile.OpenDirNoLinks(v.Resolved)
	if err != nil {
		return "", errdefs.Wrap(errdefs.ErrInvalidArgument, api.CodeVolumeInvalidHostPath,
			fmt.Sprintf("volume %q: its host directory changed since it was checked", v.Name), err)
	}
	defer f.Close()
	if d.cfg.StateDir == "" {
		return "", errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeVolumeUnsupported, "volume %q: this server keeps no state directory for host volumes", v.Name)
	}
	dir := filepath.Join(d.cfg.StateDir, "volumes", id, v.Name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	if err := bindFD(f, dir); err != nil {
		return "", fmt.Errorf("volume %q: stage: %w", v.Name, err)
	}
	return dir, nil
}

// ensureVolume makes a named volume that does not exist, if allowed.
func (d *Driver) ensureVolume(ctx context.Context, spec driver.Spec, v sandbox.Volume) error {
	name := volumeName(spec.Tenant, v.Claim)
	cctx, cancel := d.call(ctx)
	defer cancel()
	_, err := d.cli.VolumeInspect(cctx, name, client.VolumeInspectOptions{})
	if err == nil {
		return nil
	}
	if !cerrdefs.IsNotFound(err) {
		return d.engineErr("inspect volume "+v.Claim, err)
	}
	if !v.Create {
		return errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeVolumePVCNotFound,
			"volume %q: named volume %s does not exist (and createIfNotExists is false)", v.Name, v.Claim)
	}
	labels := map[string]string{sandbox.LabelManaged: "true", sandbox.LabelTenant: spec.Tenant, LabelVolume: v.Claim, labelVolumeCreatedBy: spec.ID}
	if d.cfg.ServerID != "" {
		labels[sandbox.LabelServer] = d.cfg.ServerID
	}
	if _, err := d.cli.VolumeCreate(cctx, client.VolumeCreateOptions{Name: name, Labels: labels}); err != nil {
		return d.engineErr("create volume "+v.Claim, err)
	}
	return nil
}

// unstage undoes staging mounts (the containers keep their own).
func unstage(dirs []string) {
	for _, dir := range dirs {
		_ = unbind(dir)
		_ = os.Remove(dir)
	}
}

// ourVolume reports whether a volume is tenant's named volume of this
// server.
func (d *Driver) ourVolume(labels map[string]string, tenant string) bool {
	return labels[sandbox.LabelManaged] == "true" && labels[sandbox.LabelTenant] == tenant && labels[LabelVolume] != "" &&
		(d.cfg.ServerID == "" || labels[sandbox.LabelServer] == d.cfg.ServerID)
}

// ListVolumes implements driver.Volumer.
func (d *Driver) ListVolumes(ctx context.Context, tenant string) ([]driver.VolumeInfo, error) {
	cctx, cancel := d.call(ctx)
	defer cancel()
	res, err := d.cli.VolumeList(cctx, client.VolumeListOptions{Filters: client.Filters{}.Add("label", sandbox.LabelTenant+"="+tenant).Add("label", LabelVolume)})
	if err != nil {
		return nil, d.engineErr("list volumes", err)
	}
	var out []driver.VolumeInfo
	for _, v := range res.Items {
		if !d.ourVolume(v.Labels, tenant) || v.Name != volumeName(tenant, v.Labels[LabelVolume]) {
			continue
		}
		created, _ := time.Parse(time.RFC3339, v.CreatedAt)
		users, err := d.volumeUsers(cctx, v.Name)
		if err != nil {
			return nil, err
		}
		out = append(out, driver.VolumeInfo{Name: v.Labels[LabelVolume], CreatedAt: created, InUseBy: users})
	}
	return out, nil
}

// volumeUsers are the sandboxes whose containers mount a volume.
func (d *Driver) volumeUsers(ctx context.Context, name string) ([]string, error) {
	res, err := d.cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: client.Filters{}.Add("volume", name)})
	if err != nil {
		return nil, d.engineErr("list containers", err)
	}
	var out []string
	for _, c := range res.Items {
		if id := c.Labels[sandbox.LabelSandboxID]; id != "" && !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out, nil
}

// RemoveVolume implements driver.Volumer.
func (d *Driver) RemoveVolume(ctx context.Context, tenant, name string) error {
	return d.removeVolume(ctx, tenant, name, "")
}

// removeVolume removes tenant's named volume that no container mounts;
// with onlyMadeBy set, only if that sandbox made it.
func (d *Driver) removeVolume(ctx context.Context, tenant, claim, onlyMadeBy string) error {
	name := volumeName(tenant, claim)
	cctx, cancel := d.call(ctx)
	defer cancel()
	v, err := d.cli.VolumeInspect(cctx, name, client.VolumeInspectOptions{})
	if cerrdefs.IsNotFound(err) || err == nil && !d.ourVolume(v.Volume.Labels, tenant) {
		return fmt.Errorf("volume %s: %w", claim, errdefs.ErrNotFound)
	}
	if err != nil {
		return d.engineErr("inspect volume "+claim, err)
	}
	if onlyMadeBy != "" && v.Volume.Labels[labelVolumeCreatedBy] != onlyMadeBy {
		return nil
	}
	users, err := d.volumeUsers(cctx, name)
	if err != nil {
		return err
	}
	if len(users) > 0 {
		return fmt.Errorf("volume %s is mounted by %v: %w", claim, users, errdefs.ErrFailedPrecondition)
	}
	if _, err := d.cli.VolumeRemove(cctx, name, client.VolumeRemoveOptions{}); err != nil {
		if cerrdefs.IsConflict(err) {
			return fmt.Errorf("volume %s is in use: %w", claim, errdefs.ErrFailedPrecondition)
		}
		if cerrdefs.IsNotFound(err) {
			return fmt.Errorf("volume %s: %w", claim, errdefs.ErrNotFound)
		}
		return d.engineErr("remove volume "+claim, err)
	}
	return nil
}

// removeMadeVolumes removes the named volumes a failed create made.
func (d *Driver) removeMadeVolumes(ctx context.Context, spec driver.Spec) {
	for _, v := range spec.Volumes {
		if v.Kind == sandbox.VolumeNamed {
			if err := d.removeVolume(ctx, spec.Tenant, v.Claim, spec.ID); err != nil && !errorsIsAny(err, errdefs.ErrNotFound, errdefs.ErrFailedPrecondition) {
				d.cfg.Logger.WarnContext(ctx, "remove a failed create's volume", "sandbox_id", spec.ID, "volume", v.Claim, "err", err)
			}
		}
	}
}

// removeVolumesOf removes, once its container is gone, the named volumes
// a sandbox made and was to take with it, unless another mounts them.
func (d *Driver) removeVolumesOf(ctx context.Context, id string, labels map[string]string) {
	list := labels[labelDeleteVolumes]
	if list == "" {
		return
	}
	for _, claim := range strings.Split(list, ",") {
		if err := d.removeVolume(ctx, labels[sandbox.LabelTenant], claim, id); err != nil && !errorsIsAny(err, errdefs.ErrNotFound, errdefs.ErrFailedPrecondition) {
			d.cfg.Logger.WarnContext(ctx, "remove a sandbox's volume", "sandbox_id", id, "volume", claim, "err", err)
		}
	}
}

// bindFD bind-mounts the directory open at f onto dir.
func bindFD(f *os.File, dir string) error {
	return unix.Mount("/proc/self/fd/"+strconv.Itoa(int(f.Fd())), dir, "", unix.MS_BIND|unix.MS_REC, "")
}

// unbind detaches a staging mount.
func unbind(dir string) error {
	if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return err
	}
	return nil
}

func errorsIsAny(err error, kinds ...error) bool {
	return slices.ContainsFunc(kinds, func(k error) bool { return errors.Is(err, k) })
}
