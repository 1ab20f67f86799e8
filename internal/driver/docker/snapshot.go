// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package docker

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/errdefs"
	"github.com/corral-dev/corral/internal/driver"
	"github.com/corral-dev/corral/internal/sandbox"
)

// Snapshot implements driver.Snapshotter: the container's filesystem is
// committed (paused meanwhile) to the local image corral-snapshot:<id>.
// Bind mounts and execd's volume are not part of it, and neither is the
// sandbox's access token.
func (d *Driver) Snapshot(ctx context.Context, id, snapshotID string) (*driver.SnapshotRef, error) {
	if err := validID(snapshotID); err != nil {
		return nil, err
	}
	c, err := d.inspect(ctx, id)
	if err != nil {
		return nil, err
	}
	if !c.State.Running {
		return nil, fmt.Errorf("sandbox %s is not running: %w", id, errdefs.ErrFailedPrecondition)
	}
	size, err := d.checkSnapshotSize(ctx, id)
	if err != nil {
		return nil, err
	}
	ref := snapshotRepo + ":" + strings.ToLower(snapshotID)
	tenant := c.Config.Labels[sandbox.LabelTenant]
	var env []string
	for _, kv := range c.Config.Env {
		if !strings.HasPrefix(kv, "EXECD_ACCESS_TOKEN=") {
			env = append(env, kv)
		}
	}
	if claim, _, claimed := d.claimOf(id, c.Config.Labels); claimed {
		// A warm container's tenant and environment came at its claim.
		tenant, env = claim.Tenant, append(env, claim.Env...)
	}
	labels := map[string]string{sandbox.LabelManaged: "true", LabelSnapshotID: snapshotID, sandbox.LabelSandboxID: id,
		sandbox.LabelTenant: tenant}
	if d.cfg.ServerID != "" {
		labels[sandbox.LabelServer] = d.cfg.ServerID
	}
	cctx, cancel := context.WithTimeout(ctx, 10*d.cfg.CallTimeout)
	defer cancel()
	_, err = d.cli.ContainerCommit(cctx, c.ID, client.ContainerCommitOptions{
		Reference: ref,
		Comment:   "corral snapshot " + snapshotID + " of sandbox " + id,
		Config:    &container.Config{Env: env, Labels: labels},
	})
	if err != nil {
		return nil, d.engineErr("snapshot "+id, err)
	}
	st, _ := json.Marshal(snapState{Image: ref})
	return &driver.SnapshotRef{ID: snapshotID, Driver: Name, Version: stateVersion, State: st, Labels: labels, Bytes: size}, nil
}

// DefaultSnapshotLimit is Config.SnapshotLimit's default.
const DefaultSnapshotLimit = 8 << 30

// checkSnapshotSize refuses a snapshot whose commit would write more than
// the limit. The engine's commit writes a sparse file in full: without
// this, a sandbox with a terabyte of hole fills the engine's disk.
func (d *Driver) checkSnapshotSize(ctx context.Context, id string) (int64, error) {
	limit := d.cfg.SnapshotLimit
	if limit <= 0 {
		limit = DefaultSnapshotLimit
	}
	cctx, cancel := context.WithTimeout(ctx, 10*d.cfg.CallTimeout)
	defer cancel()
	res, err := d.cli.ContainerInspect(cctx, containerName(id), client.ContainerInspectOptions{Size: true})
	if err != nil {
		return 0, d.engineErr("size of "+id, err)
	}
	size := res.Container.SizeRw
	if size == nil {
		return 0, nil
	}
	if *size > limit {
		return 0, errdefs.Newf(errdefs.ErrFailedPrecondition, api.CodeSnapshotInvalidSource,
			"sandbox %s changed %d MiB of files (holes counted: the docker runtime's snapshots write them in full), more than this server's snapshot limit of %d MiB",
			id, *size>>20, limit>>20)
	}
	return *size, nil
}

// RemoveSnapshot implements driver.Snapshotter. Sandboxes still running
// from the snapshot keep their layers; the image is gone from the list.
func (d *Driver) RemoveSnapshot(ctx context.Context, ref *driver.SnapshotRef) error {
	var ss snapState
	if err := json.Unmarshal(ref.State, &ss); err != nil || ss.Image == "" {
		// No state: a capture the server did not see finish (it was
		// stopped during the commit, which the engine may still have
		// completed). The image is named after the snapshot.
		if validID(ref.ID) != nil {
			return nil
		}
		ss.Image = snapshotRepo + ":" + strings.ToLower(ref.ID)
	}
	cctx, cancel := d.call(ctx)
	defer cancel()
	_, err := d.cli.ImageRemove(cctx, ss.Image, client.ImageRemoveOptions{Force: true, PruneChildren: true})
	if err != nil && !cerrdefs.IsNotFound(err) {
		return d.engineErr("remove snapshot "+ref.ID, err)
	}
	d.pruneSnapshots(ctx)
	return nil
}

// pruneSnapshots removes snapshot images that were removed while a
// sandbox still ran from them (the engine then only untags them) once no
// container uses them.
func (d *Driver) pruneSnapshots(ctx context.Context) {
	cctx, cancel := d.call(ctx)
	defer cancel()
	res, err := d.cli.ImageList(cctx, client.ImageListOptions{Filters: client.Filters{}.Add("dangling", "true").Add("label", LabelSnapshotID)})
	if err != nil {
		return
	}
	for _, img := range res.Items {
		_, _ = d.cli.ImageRemove(cctx, img.ID, client.ImageRemoveOptions{PruneChildren: true})
	}
}

// ListSnapshots implements driver.Snapshotter.
func (d *Driver) ListSnapshots(ctx context.Context) ([]driver.SnapshotRef, error) {
	cctx, cancel := d.call(ctx)
	defer cancel()
	filters := client.Filters{}.Add("label", sandbox.LabelManaged+"=true").Add("label", LabelSnapshotID)
	if d.cfg.ServerID != "" {
		filters = filters.Add("label", sandbox.LabelServer+"="+d.cfg.ServerID)
	}
	res, err := d.cli.ImageList(cctx, client.ImageListOptions{Filters: filters})
	if err != nil {
		return nil, d.engineErr("list snapshots", err)
	}
	var out []driver.SnapshotRef
	for _, img := range res.Items {
		id := img.Labels[LabelSnapshotID]
		tag := snapshotRepo + ":" + strings.ToLower(id)
		if id == "" || !slices.Contains(img.RepoTags, tag) {
			continue // removed, kept only while a sandbox runs from it
		}
		st, _ := json.Marshal(snapState{Image: tag})
		out = append(out, driver.SnapshotRef{ID: id, Driver: Name, Version: stateVersion, State: st, Labels: img.Labels})
	}
	return out, nil
}
