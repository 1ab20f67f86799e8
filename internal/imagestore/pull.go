// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package imagestore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/errdefs"
)

// PullOptions tune a pull.
type PullOptions struct {
	// Tenant is who asks: the image is recorded as usable by it. Empty is
	// the operator, whose images are for every tenant.
	Tenant string
	// Username and Password authenticate to the registry; without them the
	// pull is anonymous, unless Keychain is set.
	Username, Password string
	// Keychain supplies credentials when no Username and Password are
	// given (the operator's own, such as authn.DefaultKeychain; never set
	// it for a tenant's pull unless the operator says so).
	Keychain authn.Keychain
	// Platform is "os/arch"; empty means this machine's.
	Platform string
	// Progress, when set, is called as layers are unpacked.
	Progress func(Progress)
}

// Progress reports a pull or import as it goes.
type Progress struct {
	Image        string
	LayersDone   int
	LayersTotal  int
	BytesWritten int64
}

func normalize(ref string) (string, error) {
	r, err := name.ParseReference(ref)
	if err != nil {
		return "", err
	}
	return r.Name(), nil
}

func parsePlatform(p string) (v1.Platform, error) {
	if p == "" {
		p = HostPlatform()
	}
	osName, arch, ok := strings.Cut(p, "/")
	if !ok || osName == "" || arch == "" {
		return v1.Platform{}, errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeImageInvalidPlatform, "platform %q: want os/arch such as linux/amd64", p)
	}
	return v1.Platform{OS: osName, Architecture: arch}, nil
}

// Resolve returns the image ref from the store for opts.Tenant, pulling
// it if it is not there. An image in the store that the tenant may not
// use yet (another tenant pulled it) is checked with the registry first,
// with this tenant's credentials: the same content is then the tenant's
// too; a refusal is the registry's answer; a tag that moved is pulled.
func (s *Store) Resolve(ctx context.Context, ref string, opts PullOptions) (*Image, error) {
	img, err := s.Get(ref)
	if err == nil && img.UsableBy(opts.Tenant) {
		return img, nil
	}
	if err == nil && img.Repository != "" {
		r, perr := name.ParseReference(ref)
		if perr != nil {
			return nil, errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeImageInvalidReference, "image %q is not a valid reference: %v", ref, perr)
		}
		desc, herr := remote.Head(r, s.remoteOptions(ctx, opts)...)
		if herr != nil {
			return nil, registryError(ref, herr)
		}
		if d := desc.Digest.String(); d == img.RefDigest || d == img.Digest {
			if err := s.allow(img.Name, opts.Tenant); err != nil {
				return nil, err
			}
			return img, nil
		}
	}
	return s.Pull(ctx, ref, opts)
}

// remoteOptions are a pull's registry options: its credentials (none
// unless given), its platform.
func (s *Store) remoteOptions(ctx context.Context, opts PullOptions) []remote.Option {
	ropts := []remote.Option{remote.WithContext(ctx), remote.WithUserAgent("corral")}
	switch {
	case opts.Username != "" || opts.Password != "":
		ropts = append(ropts, remote.WithAuth(authn.FromConfig(authn.AuthConfig{Username: opts.Username, Password: opts.Password})))
	case opts.Keychain != nil:
		ropts = append(ropts, remote.WithAuthFromKeychain(opts.Keychain))
	default:
		ropts = append(ropts, remote.WithAuth(authn.Anonymous))
	}
	return ropts
}

// Pull fetches ref from its registry and unpacks the layers the store does
// not have yet.
func (s *Store) Pull(ctx context.Context, ref string, opts PullOptions) (*Image, error) {
	r, err := name.ParseReference(ref)
	if err != nil {
		return nil, errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeImageInvalidReference, "image %q is not a valid reference: %v", ref, err)
	}
	plat, err := parsePlatform(opts.Platform)
	if err != nil {
		return nil, err
	}
	desc, err := remote.Get(r, append(s.remoteOptions(ctx, opts), remote.WithPlatform(plat))...)
	if err != nil {
		return nil, registryError(ref, err)
	}
	img, err := desc.Image()
	if err != nil {
		return nil, registryError(ref, err)
	}
	return s.add(ctx, r.Name(), img, plat, addOptions{progress: opts.Progress, repository: r.Context().Name(),
		refDigest: desc.Digest.String(), tenant: opts.Tenant})
}

// Bounds of what an image may be made of.
const (
	MaxConfigBytes = 8 << 20
	MaxLayers      = 256
)

// addOptions say where an image being added comes from and who it is for.
type addOptions struct {
	progress func(Progress)
	// repository is the registry repository it is pulled from, empty for
	// an import (whose layers are always checked against their bytes).
	repository, refDigest string
	// tenant is who it is for; empty: every tenant (the operator's).
	tenant string
}

// registryError turns a registry failure into a user-facing error kind.
func registryError(ref string, err error) error {
	var te *transport.Error
	if errors.As(err, &te) {
		switch te.StatusCode {
		case http.StatusUnauthorized, http.StatusForbidden:
			return errdefs.Wrap(errdefs.ErrInvalidArgument, api.CodeImageUnauthorized,
				fmt.Sprintf("the registry refused access to image %q: check image.auth", ref), err)
		case http.StatusNotFound:
			return errdefs.Wrap(errdefs.ErrInvalidArgument, api.CodeImageNotFound,
				fmt.Sprintf("image %q was not found in its registry", ref), err)
		}
		for _, d := range te.Errors {
			if d.Code == transport.ManifestUnknownErrorCode || d.Code == transport.NameUnknownErrorCode {
				return errdefs.Wrap(errdefs.ErrInvalidArgument, api.CodeImageNotFound,
					fmt.Sprintf("image %q was not found in its registry", ref), err)
			}
		}
	}
	var ne net.Error
	var oe *net.OpError
	if errors.As(err, &oe) || errors.As(err, &ne) {
		return errdefs.Wrap(errdefs.ErrUnavailable, api.CodeImageRegistryUnreachable,
			fmt.Sprintf("the registry of image %q could not be reached", ref), err)
	}
	if strings.Contains(err.Error(), "no child with platform") {
		return errdefs.Wrap(errdefs.ErrInvalidArgument, api.CodeImagePlatformUnavailable,
			fmt.Sprintf("image %q has no variant for the requested platform", ref), err)
	}
	return fmt.Errorf("pull %s: %w", ref, err)
}

// add unpacks img's layers and records it under name.
func (s *Store) add(ctx context.Context, imgName string, img v1.Image, plat v1.Platform, ao addOptions) (*Image, error) {
	progress := ao.progress
	digest, err := img.Digest()
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", imgName, err)
	}
	// What the image's author wrote is read bounded: the manifest's size
	// of the config is checked before the config is fetched (and the
	// fetch stops at that size), and the stack is one overlayfs mounts.
	m, err := img.Manifest()
	if err != nil {
		return nil, fmt.Errorf("image %s: manifest: %w", imgName, err)
	}
	if m.Config.Size > MaxConfigBytes || len(m.Layers) > MaxLayers {
		return nil, errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeImageTooLarge,
			"image %s has a %d-byte config and %d layers; at most %d bytes and %d layers are taken", imgName, m.Config.Size, len(m.Layers), MaxConfigBytes, MaxLayers)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("image %s: config: %w", imgName, err)
	}
	layers, err := img.Layers()
	if err != nil {
		return nil, fmt.Errorf("image %s: layers: %w", imgName, err)
	}
	out := &Image{
		Name: imgName, Digest: digest.String(), Platform: plat.OS + "/" + plat.Architecture, Added: time.Now().UTC(),
		Config: Config{Env: cf.Config.Env, WorkingDir: cf.Config.WorkingDir, User: cf.Config.User,
			Entrypoint: cf.Config.Entrypoint, Cmd: cf.Config.Cmd},
		Repository: ao.repository, RefDigest: ao.refDigest, Public: ao.tenant == "",
	}
	if ao.tenant != "" {
		out.Tenants = []string{ao.tenant}
	}
	blobs := map[string]string{}
	if cf.OS != "" {
		out.Platform = cf.OS + "/" + cf.Architecture
	}
	var written atomic.Int64
	for i, l := range layers {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		diffID, err := l.DiffID()
		if err != nil {
			return nil, fmt.Errorf("image %s: layer %d: %w", imgName, i, err)
		}
		n, key, err := s.ensureLayer(ctx, ao.repository, diffID.String(), l)
		if err != nil {
			return nil, fmt.Errorf("image %s: layer %s: %w", imgName, diffID, err)
		}
		if key != "" {
			blobs[key] = diffID.String()
		}
		written.Add(n)
		out.Layers = append(out.Layers, diffID.String())
		if progress != nil {
			progress(Progress{Image: imgName, LayersDone: i + 1, LayersTotal: len(layers), BytesWritten: written.Load()})
		}
	}
	out.Size = written.Load()
	if err := s.put(out, blobs); err != nil {
		return nil, err
	}
	s.log.InfoContext(ctx, "image added", "image", imgName, "digest", out.Digest, "layers", len(out.Layers))
	return out, nil
}

// ensureLayer makes sure layer l (of an image from repository, "" for
// an import) is unpacked. A layer already on disk is reused only where
// this store has checked before that the blob the repository serves
// unpacks to it; otherwise l's bytes are fetched and hashed first, so a
// DiffID named in an image's config opens no layer the image did not
// bring. Concurrent calls for one layer share the work. It returns the
// bytes it wrote and the blob key to record.
func (s *Store) ensureLayer(ctx context.Context, repository, diffID string, l v1.Layer) (int64, string, error) {
	key := ""
	if repository != "" {
		d, err := l.Digest()
		if err != nil {
			return 0, "", err
		}
		key = repository + "@" + d.String()
		if got, ok := s.blob(key); ok && got == diffID && s.layerPresent(diffID) {
			return 0, key, nil
		}
	}
	v, err, _ := s.sf.Do(diffID, func() (any, error) {
		if s.layerPresent(diffID) {
			// On disk, but not known to be what this blob unpacks to:
			// prove it with the bytes.
			rc, err := l.Uncompressed()
			if err != nil {
				return int64(0), err
			}
			defer rc.Close()
			h := sha256.New()
			if _, err := io.Copy(h, ctxReader{ctx, rc}); err != nil {
				return int64(0), err
			}
			if got := "sha256:" + hex.EncodeToString(h.Sum(nil)); got != diffID {
				return int64(0), layerMismatch(got, diffID)
			}
			return int64(0), nil
		}
		tmp, err := os.MkdirTemp(filepath.Join(s.dir, "tmp"), "layer-")
		if err != nil {
			return int64(0), err
		}
		defer os.RemoveAll(tmp)
		rc, err := l.Uncompressed()
		if err != nil {
			return int64(0), err
		}
		defer rc.Close()
		got, n, err := unpack(ctxReader{ctx, rc}, tmp)
		if err != nil {
			return int64(0), err
		}
		if got != diffID {
			return int64(0), layerMismatch(got, diffID)
		}
		if err := os.Chmod(tmp, 0o755); err != nil {
			return int64(0), err
		}
		if err := os.Rename(tmp, s.LayerDir(diffID)); err != nil {
			// Another process unpacked it first.
			if s.layerPresent(diffID) {
				return int64(0), nil
			}
			return int64(0), err
		}
		return n, nil
	})
	if err != nil {
		return 0, "", err
	}
	return v.(int64), key, nil
}

// layerMismatch is the error of a layer whose bytes are not what its
// image's config says: the image's fault, never reused.
func layerMismatch(got, diffID string) error {
	return errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeImageLayerMismatch,
		"a layer's content hashes to %s, not to the DiffID %s its image's config gives", got, diffID)
}

// ctxReader stops a long read when ctx ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
