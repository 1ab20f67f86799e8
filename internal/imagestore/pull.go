// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package imagestore

import (
	"context"
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

	"github.com/corral-dev/corral/errdefs"
)

// PullOptions tune a pull.
type PullOptions struct {
	// Username and Password authenticate to the registry; without them the
	// pull is anonymous unless the Docker config has credentials.
	Username, Password string
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
		return v1.Platform{}, errdefs.Newf(errdefs.ErrInvalidArgument, "IMAGE::INVALID_PLATFORM", "platform %q: want os/arch such as linux/amd64", p)
	}
	return v1.Platform{OS: osName, Architecture: arch}, nil
}

// Resolve returns the image ref from the store, pulling it if it is not
// there.
func (s *Store) Resolve(ctx context.Context, ref string, opts PullOptions) (*Image, error) {
	if img, err := s.Get(ref); err == nil {
		return img, nil
	}
	return s.Pull(ctx, ref, opts)
}

// Pull fetches ref from its registry and unpacks the layers the store does
// not have yet.
func (s *Store) Pull(ctx context.Context, ref string, opts PullOptions) (*Image, error) {
	r, err := name.ParseReference(ref)
	if err != nil {
		return nil, errdefs.Newf(errdefs.ErrInvalidArgument, "IMAGE::INVALID_REFERENCE", "image %q is not a valid reference: %v", ref, err)
	}
	plat, err := parsePlatform(opts.Platform)
	if err != nil {
		return nil, err
	}
	ropts := []remote.Option{remote.WithContext(ctx), remote.WithPlatform(plat), remote.WithUserAgent("corral")}
	if opts.Username != "" || opts.Password != "" {
		ropts = append(ropts, remote.WithAuth(authn.FromConfig(authn.AuthConfig{Username: opts.Username, Password: opts.Password})))
	} else {
		ropts = append(ropts, remote.WithAuthFromKeychain(authn.DefaultKeychain))
	}
	img, err := remote.Image(r, ropts...)
	if err != nil {
		return nil, registryError(ref, err)
	}
	return s.add(ctx, r.Name(), img, plat, opts.Progress)
}

// registryError turns a registry failure into a user-facing error kind.
func registryError(ref string, err error) error {
	var te *transport.Error
	if errors.As(err, &te) {
		switch te.StatusCode {
		case http.StatusUnauthorized, http.StatusForbidden:
			return errdefs.Wrap(errdefs.ErrInvalidArgument, "IMAGE::UNAUTHORIZED",
				fmt.Sprintf("the registry refused access to image %q: check image.auth", ref), err)
		case http.StatusNotFound:
			return errdefs.Wrap(errdefs.ErrInvalidArgument, "IMAGE::NOT_FOUND",
				fmt.Sprintf("image %q was not found in its registry", ref), err)
		}
		for _, d := range te.Errors {
			if d.Code == transport.ManifestUnknownErrorCode || d.Code == transport.NameUnknownErrorCode {
				return errdefs.Wrap(errdefs.ErrInvalidArgument, "IMAGE::NOT_FOUND",
					fmt.Sprintf("image %q was not found in its registry", ref), err)
			}
		}
	}
	var ne net.Error
	var oe *net.OpError
	if errors.As(err, &oe) || errors.As(err, &ne) {
		return errdefs.Wrap(errdefs.ErrUnavailable, "IMAGE::REGISTRY_UNREACHABLE",
			fmt.Sprintf("the registry of image %q could not be reached", ref), err)
	}
	if strings.Contains(err.Error(), "no child with platform") {
		return errdefs.Wrap(errdefs.ErrInvalidArgument, "IMAGE::PLATFORM_UNAVAILABLE",
			fmt.Sprintf("image %q has no variant for the requested platform", ref), err)
	}
	return fmt.Errorf("pull %s: %w", ref, err)
}

// add unpacks img's layers and records it under name.
func (s *Store) add(ctx context.Context, imgName string, img v1.Image, plat v1.Platform, progress func(Progress)) (*Image, error) {
	digest, err := img.Digest()
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", imgName, err)
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
	}
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
		n, err := s.ensureLayer(ctx, diffID.String(), l)
		if err != nil {
			return nil, fmt.Errorf("image %s: layer %s: %w", imgName, diffID, err)
		}
		written.Add(n)
		out.Layers = append(out.Layers, diffID.String())
		if progress != nil {
			progress(Progress{Image: imgName, LayersDone: i + 1, LayersTotal: len(layers), BytesWritten: written.Load()})
		}
	}
	out.Size = written.Load()
	if err := s.put(out); err != nil {
		return nil, err
	}
	s.log.InfoContext(ctx, "image added", "image", imgName, "digest", out.Digest, "layers", len(out.Layers))
	return out, nil
}

// ensureLayer unpacks a layer unless it is already there; concurrent calls
// for one layer share the work. It returns the bytes it wrote.
func (s *Store) ensureLayer(ctx context.Context, diffID string, l v1.Layer) (int64, error) {
	final := s.LayerDir(diffID)
	if _, err := os.Stat(final); err == nil {
		return 0, nil
	}
	v, err, _ := s.sf.Do(diffID, func() (any, error) {
		if _, err := os.Stat(final); err == nil {
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
			return int64(0), fmt.Errorf("layer content hashes to %s, not its DiffID %s", got, diffID)
		}
		if err := os.Chmod(tmp, 0o755); err != nil {
			return int64(0), err
		}
		if err := os.Rename(tmp, final); err != nil {
			// Another process unpacked it first.
			if _, serr := os.Stat(final); serr == nil {
				return int64(0), nil
			}
			return int64(0), err
		}
		return n, nil
	})
	if err != nil {
		return 0, err
	}
	return v.(int64), nil
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
