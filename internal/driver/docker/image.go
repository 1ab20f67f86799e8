// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package docker

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/distribution/reference"
	ggauthn "github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/moby/moby/api/types/image"
	"github.com/moby/moby/api/types/registry"
	"github.com/moby/moby/client"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/errdefs"
	"github.com/corral-dev/corral/internal/driver"
)

// imageOf is the image the sandbox runs (its snapshot's, or the spec's,
// pulled if need be) and that image's user.
func (d *Driver) imageOf(ctx context.Context, spec driver.Spec) (ref, user string, err error) {
	if spec.Snapshot == nil {
		ref = spec.Image.URI
		user, err = d.ensureImage(ctx, ref, spec)
		return ref, user, err
	}
	// The manager checked that the snapshot is this tenant's.
	var ss snapState
	if err := json.Unmarshal(spec.Snapshot.State, &ss); err != nil || ss.Image == "" {
		return "", "", fmt.Errorf("snapshot %s: bad reference: %w", spec.Snapshot.ID, errdefs.ErrInvalidArgument)
	}
	cctx, cancel := d.call(ctx)
	res, err := d.cli.ImageInspect(cctx, ss.Image)
	cancel()
	if err != nil {
		return "", "", d.engineErr("inspect snapshot "+ss.Image, err)
	}
	return ss.Image, userOf(res), nil
}

// ensureImage makes sure ref is present and spec's tenant may use it,
// pulling it with the spec's credentials when it is not there, and
// returns the image's user. A tenant may use an image the operator put
// on the engine (one with no registry digest: built or loaded there), or
// one the registry serves it: an image another tenant pulled is checked
// with the registry first, with this tenant's credentials (once per
// server run). Snapshots and images named by their ID are never an
// image.uri: a snapshot is restored with its snapshotId, whose tenant the
// manager checks.
func (d *Driver) ensureImage(ctx context.Context, ref string, spec driver.Spec) (string, error) {
	if ref == "" {
		return "", fmt.Errorf("image is empty: %w", errdefs.ErrInvalidArgument)
	}
	if imageIDLike(ref) {
		// The engine would take it for (a prefix of) a local image's ID:
		// another tenant's snapshot, say.
		return "", errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeImageInvalidReference,
			"image %q looks like an image ID: give a name (repository[:tag] or repository@sha256:...)", ref)
	}
	named, err := reference.ParseNormalizedNamed(ref)
	if err != nil {
		return "", errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeImageInvalidReference, "image %q is not a valid reference", ref)
	}
	if reference.Path(named) == snapshotRepo || reference.FamiliarName(named) == snapshotRepo {
		return "", errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeImageNotFound, "image %s was not found (a snapshot is restored with snapshotId)", ref)
	}
	cctx, cancel := d.call(ctx)
	res, err := d.cli.ImageInspect(cctx, ref)
	cancel()
	if err == nil && !namedBy(res.InspectResponse, named) {
		// The engine matched an image ID (or a prefix of one), not a name.
		err = cerrdefs.ErrNotFound
	}
	if err == nil && res.Config != nil && res.Config.Labels[LabelSnapshotID] != "" {
		return "", errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeImageNotFound, "image %s was not found (a snapshot is restored with snapshotId)", ref)
	}
	if err == nil {
		if len(res.RepoDigests) == 0 || d.imageAllowed(spec.Tenant, res.ID) {
			return userOf(res), nil
		}
		current, aerr := d.registryHas(ctx, ref, named, res.InspectResponse, spec.Image)
		if aerr != nil {
			return "", aerr
		}
		if current {
			d.allowImage(spec.Tenant, res.ID)
			return userOf(res), nil
		}
		// The tag has moved on in the registry: pull what it is now.
	} else if !cerrdefs.IsNotFound(err) {
		return "", d.engineErr("inspect image "+ref, err)
	}
	if err := d.pull(ctx, ref, spec.Image); err != nil {
		return "", err
	}
	cctx, cancel = d.call(ctx)
	res, err = d.cli.ImageInspect(cctx, ref)
	cancel()
	if err != nil {
		return "", d.engineErr("inspect image "+ref, err)
	}
	if !d.imageAllowed(spec.Tenant, res.ID) && knownAs(res.InspectResponse, named) {
		// The engine had this image's config under another name, and so
		// took none of the layers from this registry: a config naming
		// another image's layers would open them. The registry must
		// serve the bytes of every layer.
		if err := proveLayers(ctx, ref, res.InspectResponse, spec.Image); err != nil {
			rctx, cancel := d.call(context.WithoutCancel(ctx))
			_, _ = d.cli.ImageRemove(rctx, ref, client.ImageRemoveOptions{})
			cancel()
			return "", err
		}
	}
	d.allowImage(spec.Tenant, res.ID)
	return userOf(res), nil
}

// knownAs reports whether the engine knows img by a repository other
// than named's.
func knownAs(img image.InspectResponse, named reference.Named) bool {
	for _, n := range append(slices.Clone(img.RepoTags), img.RepoDigests...) {
		if got, err := reference.ParseNormalizedNamed(n); err == nil && got.Name() != named.Name() {
			return true
		}
	}
	return false
}

// proveLayers fetches every layer of ref from its registry with auth's
// credentials and checks that its bytes are the layers img is made of.
func proveLayers(ctx context.Context, ref string, img image.InspectResponse, auth driver.Image) error {
	r, err := name.ParseReference(ref)
	if err != nil {
		return errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeImageInvalidReference, "image %q is not a valid reference", ref)
	}
	ropts := []remote.Option{remote.WithContext(ctx), remote.WithUserAgent("corral"),
		remote.WithPlatform(v1.Platform{OS: img.Os, Architecture: img.Architecture, Variant: img.Variant})}
	if auth.Username != "" || auth.Password != "" {
		ropts = append(ropts, remote.WithAuth(ggauthn.FromConfig(ggauthn.AuthConfig{Username: auth.Username, Password: auth.Password})))
	}
	remoteImg, err := remote.Image(r, ropts...)
	if err != nil {
		return errdefs.Wrap(errdefs.ErrInvalidArgument, api.CodeImageLayerMismatch,
			fmt.Sprintf("image %s: its layers could not be checked with its registry", ref), err)
	}
	layers, err := remoteImg.Layers()
	if err != nil || img.RootFS.Layers == nil || len(layers) != len(img.RootFS.Layers) {
		return errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeImageLayerMismatch, "image %s: its registry's layers are not the image's", ref)
	}
	for i, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			return errdefs.Wrap(errdefs.ErrInvalidArgument, api.CodeImageLayerMismatch, fmt.Sprintf("image %s: layer %d could not be fetched", ref, i), err)
		}
		h := sha256.New()
		_, err = io.Copy(h, rc)
		rc.Close()
		if err != nil || "sha256:"+hex.EncodeToString(h.Sum(nil)) != img.RootFS.Layers[i] {
			return errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeImageLayerMismatch,
				"image %s: layer %d from its registry is not the layer its config names", ref, i)
		}
	}
	return nil
}

// imageIDLike reports whether ref is what the engine matches against
// image IDs: "sha256:" and hex, or hex alone (12 digits or more).
func imageIDLike(ref string) bool {
	if strings.HasPrefix(ref, "sha256:") {
		return true
	}
	if len(ref) < 12 || len(ref) > 64 {
		return false
	}
	for _, c := range ref {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// namedBy reports whether the engine knows img by named (a tag or a
// digest of it), rather than having matched its ID.
func namedBy(img image.InspectResponse, named reference.Named) bool {
	want := reference.TagNameOnly(named).String()
	for _, n := range append(slices.Clone(img.RepoTags), img.RepoDigests...) {
		if got, err := reference.ParseNormalizedNamed(n); err == nil && (got.String() == want || got.String() == named.String()) {
			return true
		}
	}
	return false
}

// registryHas asks the registry, with the spec's credentials, what ref
// is: whether it is still img (same digest), or an error the user can act
// on (the registry refused these credentials, or has no such image).
func (d *Driver) registryHas(ctx context.Context, ref string, named reference.Named, img image.InspectResponse, auth driver.Image) (bool, error) {
	cctx, cancel := d.call(ctx)
	defer cancel()
	res, err := d.cli.DistributionInspect(cctx, ref, client.DistributionInspectOptions{EncodedRegistryAuth: registryAuth(auth)})
	if err != nil {
		return false, d.pullErr(ref, err)
	}
	for _, rd := range img.RepoDigests {
		if c, err := reference.ParseNormalizedNamed(rd); err == nil && c.Name() == named.Name() {
			if dg, ok := c.(reference.Digested); ok && dg.Digest() == res.Descriptor.Digest {
				return true, nil
			}
		}
	}
	return false, nil
}

// registryAuth is the X-Registry-Auth of an image's credentials, "" for
// none (the engine then asks anonymously: it has no logins of its own).
func registryAuth(img driver.Image) string {
	if img.Username == "" && img.Password == "" {
		return ""
	}
	b, _ := json.Marshal(registry.AuthConfig{Username: img.Username, Password: img.Password})
	return base64.URLEncoding.EncodeToString(b)
}

// imageAllowed reports whether tenant was found allowed to use image id
// in this server's run; allowImage records it.
func (d *Driver) imageAllowed(tenant, id string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return tenant == "" || d.allowed[tenant+"\x00"+id]
}

func (d *Driver) allowImage(tenant, id string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.allowed == nil || len(d.allowed) >= 65536 {
		d.allowed = map[string]bool{}
	}
	d.allowed[tenant+"\x00"+id] = true
}

func userOf(res client.ImageInspectResult) string {
	if res.Config == nil {
		return ""
	}
	u := res.Config.User
	if u == "0" || u == "root" || u == "0:0" || u == "root:root" {
		return ""
	}
	return u
}

// pull pulls ref, logging progress every few seconds.
func (d *Driver) pull(ctx context.Context, ref string, img driver.Image) error {
	opts := client.ImagePullOptions{RegistryAuth: registryAuth(img)}
	start := time.Now()
	d.cfg.Logger.InfoContext(ctx, "pulling image", "image", ref)
	res, err := d.cli.ImagePull(ctx, ref, opts)
	if err != nil {
		return d.pullErr(ref, err)
	}
	defer res.Close()
	layers := map[string][2]int64{}
	last := time.Now()
	for m, err := range res.JSONMessages(ctx) {
		if err != nil {
			return d.pullErr(ref, err)
		}
		if m.Error != nil {
			return d.pullErr(ref, errors.New(m.Error.Message))
		}
		if m.ID != "" && m.Progress != nil && m.Progress.Total > 0 {
			layers[m.ID] = [2]int64{m.Progress.Current, m.Progress.Total}
		}
		if time.Since(last) > 2*time.Second {
			var cur, total int64
			for _, l := range layers {
				cur, total = cur+l[0], total+l[1]
			}
			d.cfg.Logger.InfoContext(ctx, "pulling image", "image", ref, "layers", len(layers), "bytes", cur, "of", total)
			last = time.Now()
		}
	}
	d.cfg.Logger.InfoContext(ctx, "pulled image", "image", ref, "duration_ms", time.Since(start).Milliseconds())
	return nil
}

func (d *Driver) pullErr(ref string, err error) error {
	msg := err.Error()
	switch {
	case client.IsErrConnectionFailed(err):
		return d.engineErr("pull "+ref, err)
	case cerrdefs.IsNotFound(err) || strings.Contains(msg, "not found") || strings.Contains(msg, "manifest unknown"):
		return errdefs.Wrap(errdefs.ErrInvalidArgument, api.CodeImageNotFound, fmt.Sprintf("image %s was not found", ref), err)
	case cerrdefs.IsUnauthorized(err) || strings.Contains(msg, "unauthorized") || strings.Contains(msg, "denied") ||
		strings.Contains(msg, "no basic auth credentials") || strings.Contains(msg, "authentication required"):
		return errdefs.Wrap(errdefs.ErrInvalidArgument, api.CodeImageUnauthorized, fmt.Sprintf("image %s: the registry refused the credentials", ref), err)
	case strings.Contains(msg, "don't match image configuration"):
		return errdefs.Wrap(errdefs.ErrInvalidArgument, api.CodeImageLayerMismatch, fmt.Sprintf("image %s: its layers are not the ones its config names", ref), err)
	case cerrdefs.IsInvalidArgument(err) || strings.Contains(msg, "invalid reference"):
		return errdefs.Wrap(errdefs.ErrInvalidArgument, api.CodeImageInvalidReference, fmt.Sprintf("image %q is not a valid reference", ref), err)
	}
	return errdefs.Wrap(errdefs.ErrUnavailable, api.CodeImagePullFailed, fmt.Sprintf("image %s could not be pulled (details are in the server log)", ref), err)
}
