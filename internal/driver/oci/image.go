// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package oci

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/errdefs"
	"github.com/corral-dev/corral/internal/driver"
	"github.com/corral-dev/corral/internal/imagestore"
	"github.com/corral-dev/corral/internal/insandbox"
	"github.com/corral-dev/corral/internal/safefile"
	"github.com/corral-dev/corral/internal/sandbox"
)

// rootfsPlan is where a sandbox's root filesystem comes from.
type rootfsPlan struct {
	lowers []string // top first
	layers []string // DiffIDs, for GC
	config imagestore.Config
	host   bool
	// chain are the snapshots whose layers lie over the image, top first.
	chain []string
}

// base is what the bundle records of p, for snapshots.
func (p *rootfsPlan) base() *rootBase {
	return &rootBase{Host: p.host, Layers: p.layers, Config: p.config, Chain: p.chain}
}

func (d *Driver) plan(ctx context.Context, spec driver.Spec) (*rootfsPlan, error) {
	if spec.Snapshot != nil {
		return d.restorePlan(spec.Snapshot)
	}
	if spec.Image.URI == HostImage {
		if !d.cfg.AllowHostImage {
			return nil, errdefs.New(errdefs.ErrInvalidArgument, api.CodeImageHostImageDisabled, `the "host" image is disabled on this server`)
		}
		config := imagestore.Config{Env: []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root"}, WorkingDir: "/root"}
		return &rootfsPlan{lowers: []string{d.hostRoot}, host: true, config: config}, nil
	}
	platform := ""
	if spec.Platform.OS != "" {
		platform = spec.Platform.OS + "/" + spec.Platform.Arch
		if platform != imagestore.HostPlatform() {
			return nil, errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeInvalidParameter,
				"platform %s cannot run on this machine (%s)", platform, imagestore.HostPlatform())
		}
	}
	opts := imagestore.PullOptions{Tenant: spec.Tenant, Username: spec.Image.Username, Password: spec.Image.Password, Platform: platform,
		Progress: func(p imagestore.Progress) {
			d.log.InfoContext(ctx, "pulling image", "image", p.Image, "layers_done", p.LayersDone, "layers_total", p.LayersTotal)
		},
	}
	if spec.Tenant == "" || d.cfg.HostCredentials {
		// A warm pool's image (the operator's), or an operator who lets
		// tenants pull with this machine's registry logins.
		opts.Keychain = authn.DefaultKeychain
	}
	img, err := d.images.Resolve(ctx, spec.Image.URI, opts)
	if err != nil {
		return nil, err
	}
	p := &rootfsPlan{layers: img.Layers, config: img.Config}
	for i := len(img.Layers) - 1; i >= 0; i-- {
		p.lowers = append(p.lowers, d.images.LayerDir(img.Layers[i]))
	}
	if len(p.lowers) == 0 {
		return nil, errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeImageEmpty, "image %q has no layers", spec.Image.URI)
	}
	return p, nil
}

// prepareRoot resolves the image's user, makes its working directory and
// checks where the volumes go, in the root file system as the sandbox
// will see it (links resolve inside it, never on the host): the overlay
// mounted at rootfs (mounted says so), else one of the same layers
// attached nowhere, else (a kernel older than 6.8 with a stack longer
// than one fsconfig value) one mounted at rootfs for the time it takes.
func prepareRoot(plan *rootfsPlan, upper, work, rootfs, cwd string, vols []sandbox.Volume, mounted bool) (uid, gid uint32, err error) {
	var root *os.File
	if !mounted {
		if root, err = detachedOverlay(plan.lowers, upper, work); err != nil {
			if err := mountOverlay(plan.lowers, upper, work, rootfs); err != nil {
				return 0, 0, err
			}
			defer unmount(rootfs)
		}
	}
	if root == nil {
		if root, err = safefile.OpenDir(rootfs); err != nil {
			return 0, 0, err
		}
	}
	defer root.Close()
	if uid, gid, err = resolveUser(root, plan.config.User); err != nil {
		return 0, 0, errdefs.Wrap(errdefs.ErrInvalidArgument, api.CodeImageBadUser, err.Error(), err)
	}
	if err := checkMountTargets(root, plan, vols); err != nil {
		return 0, 0, err
	}
	// runc creates the mount points it needs; only a missing working
	// directory must be made here.
	if _, err := safefile.MkdirAllInRootAt(root, cwd, 0o755); err != nil {
		return 0, 0, errdefs.Wrap(errdefs.ErrInvalidArgument, api.CodeImageBadWorkdir,
			fmt.Sprintf("the image's working directory %q cannot be made: %v", cwd, err), err)
	}
	return uid, gid, nil
}

// checkMountTargets refuses a volume whose mount path passes through a
// link in the root file system (the image's, or a snapshot's the tenant
// made): the runtime would follow it, so /v/.corral with /v -> / would
// cover corral's own /.corral, whatever the path says. With no link on
// the way, the path is where the volume lands, and ParseVolumes checked
// it against the reserved paths. Volumes are not nested (ParseVolumes),
// so no volume's own files are on another's way. Under the host image,
// the system directories are the host's, mounted on their own: no
// volume goes there.
func checkMountTargets(root *os.File, plan *rootfsPlan, vols []sandbox.Volume) error {
	// Links where corral mounts its own files would only move them in
	// the sandbox's tree, but no image needs one there: refused too.
	for _, own := range []string{insandbox.BinaryDir, insandbox.SecretsDir} {
		if err := safefile.CheckNoLinksInRoot(root, own); err != nil {
			return errdefs.Wrap(errdefs.ErrInvalidArgument, api.CodeInvalidParameter,
				fmt.Sprintf("the image or snapshot holds a symbolic link at %s, where corral mounts its own files", own), err)
		}
	}
	for _, v := range vols {
		if plan.host {
			for _, dir := range hostSystemDirs() {
				if v.Target == dir || strings.HasPrefix(v.Target, dir+"/") {
					return errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeVolumeInvalidMountPath,
						"volume %q: mountPath %s is in %s, which the host image shares from this machine", v.Name, v.Target, dir)
				}
			}
		}
		if err := safefile.CheckNoLinksInRoot(root, v.Target); err != nil {
			msg := fmt.Sprintf("volume %q: mountPath %s cannot be used in this sandbox's root file system: %v", v.Name, v.Target, err)
			if errors.Is(err, safefile.ErrLink) {
				msg = fmt.Sprintf("volume %q: mountPath %s passes through a symbolic link in the image or snapshot; mount it at a path without links", v.Name, v.Target)
			}
			return errdefs.Wrap(errdefs.ErrInvalidArgument, api.CodeVolumeInvalidMountPath, msg, err)
		}
	}
	return nil
}

// workingDir checks an image's working directory: absolute, with no ".."
// (which could only be meant to leave the image's root).
func workingDir(dir string) (string, error) {
	if dir == "" {
		return "/", nil
	}
	if !path.IsAbs(dir) || slices.Contains(strings.Split(dir, "/"), "..") || strings.ContainsRune(dir, 0) {
		return "", errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeImageBadWorkdir,
			"the image's working directory %q is not an absolute path without \"..\"", dir)
	}
	return path.Clean(dir), nil
}
