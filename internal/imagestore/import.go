// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package imagestore

import (
	"archive/tar"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/errdefs"
)

func importError(format string, args ...any) error {
	return errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeImageInvalidArchive, format, args...)
}

// ImportOptions tune an import.
type ImportOptions struct {
	// Name, when set, picks the image of that name (or names an archive's
	// one untagged image).
	Name string
	// Tenant, when set, is the only tenant that may use the images;
	// otherwise they are for every tenant.
	Tenant string
	// Progress, when set, is called as layers are unpacked.
	Progress func(Progress)
}

// Import adds the images of a `docker save` tarball or an OCI layout (a
// directory or a tar of one). It returns the images added. Every layer is
// checked against its bytes, even one already on disk.
func (s *Store) Import(ctx context.Context, path string, opts ImportOptions) ([]*Image, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, importError("%s: %v", path, err)
	}
	if fi.IsDir() {
		return s.importLayout(ctx, path, opts)
	}
	entries, err := tarEntries(path)
	if err != nil {
		return nil, importError("%s is neither a directory nor a tar archive: %v", path, err)
	}
	switch {
	case entries["manifest.json"]:
		return s.importDocker(ctx, path, opts)
	case entries["oci-layout"] && entries["index.json"]:
		dir, err := os.MkdirTemp(filepath.Join(s.dir, "tmp"), "layout-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		if err := extractPlain(path, dir); err != nil {
			return nil, importError("%s: %v", path, err)
		}
		return s.importLayout(ctx, dir, opts)
	}
	return nil, importError("%s has neither manifest.json (docker save) nor oci-layout and index.json (OCI layout)", path)
}

// tarEntries lists the top-level files of a tar.
func tarEntries(path string) (map[string]bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	out := map[string]bool{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		out[strings.TrimPrefix(filepath.Clean(h.Name), "./")] = true
	}
}

// extractPlain extracts an OCI layout tar: only regular files and
// directories, inside dir.
func extractPlain(path, dir string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		n, err := cleanName(h.Name)
		if err != nil {
			return err
		}
		target := filepath.Join(dir, n)
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o700); err != nil {
				return err
			}
		case tar.TypeReg: // the reader reports the old TypeRegA as TypeReg
			if err := os.MkdirAll(filepath.Dir(target), 0o700); err != nil {
				return err
			}
			out, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o600)
			if err != nil {
				return err
			}
			_, err = io.Copy(out, tr)
			if cerr := out.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		}
	}
}

func (s *Store) importDocker(ctx context.Context, path string, opts ImportOptions) ([]*Image, error) {
	as := opts.Name
	opener := func() (io.ReadCloser, error) { return os.Open(path) }
	m, err := tarball.LoadManifest(opener)
	if err != nil {
		return nil, importError("%s: %v", path, err)
	}
	var out []*Image
	for _, desc := range m {
		var tag *name.Tag
		imgName := ""
		switch {
		case len(desc.RepoTags) > 0:
			t, err := name.NewTag(desc.RepoTags[0])
			if err != nil {
				return nil, importError("%s: tag %q: %v", path, desc.RepoTags[0], err)
			}
			tag, imgName = &t, t.Name()
			if as != "" && !matchesName(desc.RepoTags, as) && len(m) > 1 {
				continue
			}
			if as != "" && len(m) == 1 {
				if imgName, err = normalize(as); err != nil {
					return nil, importError("name %q: %v", as, err)
				}
			}
		case as != "" && len(m) == 1:
			if imgName, err = normalize(as); err != nil {
				return nil, importError("name %q: %v", as, err)
			}
		default:
			return nil, importError("%s holds an image without a tag: give it a name with --name", path)
		}
		img, err := tarball.Image(opener, tag)
		if err != nil {
			return nil, importError("%s: %v", path, err)
		}
		added, err := s.addLocal(ctx, imgName, img, opts)
		if err != nil {
			return nil, err
		}
		out = append(out, added)
	}
	if len(out) == 0 {
		return nil, importError("%s has no image named %q", path, as)
	}
	return out, nil
}

func matchesName(tags []string, want string) bool {
	w, err := normalize(want)
	for _, t := range tags {
		if n, _ := normalize(t); t == want || err == nil && n == w {
			return true
		}
	}
	return false
}

func (s *Store) importLayout(ctx context.Context, dir string, opts ImportOptions) ([]*Image, error) {
	as := opts.Name
	p, err := layout.FromPath(dir)
	if err != nil {
		return nil, importError("%s is not an OCI layout: %v", dir, err)
	}
	idx, err := p.ImageIndex()
	if err != nil {
		return nil, importError("%s: %v", dir, err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, importError("%s: %v", dir, err)
	}
	plat, _ := parsePlatform("")
	var out []*Image
	for _, d := range im.Manifests {
		refName := d.Annotations["org.opencontainers.image.ref.name"]
		if full := d.Annotations["io.containerd.image.name"]; full != "" {
			refName = full
		}
		imgName := refName
		if as != "" {
			if len(im.Manifests) > 1 && refName != as {
				continue
			}
			imgName = as
		}
		if imgName == "" {
			return nil, importError("%s holds an image without a name: give it one with --name", dir)
		}
		if n, err := normalize(imgName); err == nil {
			imgName = n
		} else {
			return nil, importError("name %q: %v", imgName, err)
		}
		var img v1.Image
		if d.MediaType.IsIndex() {
			child, err := idx.ImageIndex(d.Digest)
			if err != nil {
				return nil, importError("%s: %v", dir, err)
			}
			if img, err = pickPlatform(child, plat); err != nil {
				return nil, err
			}
		} else if img, err = idx.Image(d.Digest); err != nil {
			return nil, importError("%s: %v", dir, err)
		}
		added, err := s.addLocal(ctx, imgName, img, opts)
		if err != nil {
			return nil, err
		}
		out = append(out, added)
	}
	if len(out) == 0 {
		return nil, importError("%s has no image named %q", dir, as)
	}
	return out, nil
}

func pickPlatform(idx v1.ImageIndex, plat v1.Platform) (v1.Image, error) {
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	for _, d := range im.Manifests {
		if d.Platform != nil && d.Platform.OS == plat.OS && d.Platform.Architecture == plat.Architecture {
			return idx.Image(d.Digest)
		}
	}
	return nil, importError("no image for %s/%s in the index", plat.OS, plat.Architecture)
}

// addLocal adds an image read from a file, with the platform its config
// names.
func (s *Store) addLocal(ctx context.Context, imgName string, img v1.Image, opts ImportOptions) (*Image, error) {
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, importError("image %s: config: %v", imgName, err)
	}
	plat := v1.Platform{OS: cf.OS, Architecture: cf.Architecture}
	if plat.OS == "" {
		plat, _ = parsePlatform("")
	}
	if got := plat.OS + "/" + plat.Architecture; got != HostPlatform() {
		return nil, importError("image %s is for %s; this machine runs %s", imgName, got, HostPlatform())
	}
	return s.add(ctx, imgName, img, plat, addOptions{progress: opts.Progress, tenant: opts.Tenant})
}
