// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

// Package imagestore owns container images on this machine for the native
// runtime: pulling from OCI and Docker registries (anonymous or with
// credentials, by tag or digest, for a platform), importing `docker save`
// tarballs and OCI layouts, unpacking each layer once into a
// content-addressed directory ready for overlayfs, the image index, and
// garbage collection of layers no image or sandbox uses. Concurrent pulls
// of a layer are coalesced; several processes may share a store (the index
// is written under a file lock). Used by the oci driver and the CLI's image
// commands.
package imagestore

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"golang.org/x/sync/singleflight"
	"golang.org/x/sys/unix"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/errdefs"
	"github.com/corral-dev/corral/internal/logctx"
)

// Image is an image in the store.
type Image struct {
	// Name is the normalized reference it was pulled or imported as.
	Name string `json:"name"`
	// Digest is the manifest digest.
	Digest string `json:"digest"`
	// Layers are the DiffIDs of its layers, bottom first.
	Layers   []string  `json:"layers"`
	Config   Config    `json:"config"`
	Platform string    `json:"platform"`
	Size     int64     `json:"size"`
	Added    time.Time `json:"added"`
	// Repository is the registry and repository it was pulled from;
	// empty for an import.
	Repository string `json:"repository,omitempty"`
	// RefDigest is what its reference resolved to in the registry (an
	// index's digest for a multi-platform image, else Digest).
	RefDigest string `json:"refDigest,omitempty"`
	// Public images are for every tenant: the operator put them here.
	Public bool `json:"public,omitempty"`
	// Tenants may use a private image: those the registry accepted for
	// it, or the one the operator imported it for.
	Tenants []string `json:"tenants,omitempty"`
}

// UsableBy reports whether tenant may use the image without asking its
// registry again ("" is the operator, who may use any).
func (img *Image) UsableBy(tenant string) bool {
	return tenant == "" || img.Public || slices.Contains(img.Tenants, tenant)
}

// Config is the part of an image's configuration a sandbox uses.
type Config struct {
	Env        []string `json:"env,omitempty"`
	WorkingDir string   `json:"workingDir,omitempty"`
	User       string   `json:"user,omitempty"`
	Entrypoint []string `json:"entrypoint,omitempty"`
	Cmd        []string `json:"cmd,omitempty"`
}

// Store is an image store in a directory.
type Store struct {
	dir string
	log *slog.Logger
	sf  singleflight.Group
	// mu serializes index updates within the process; the lock file does
	// so across processes.
	mu sync.Mutex
}

// Open opens (creating) a store in dir.
func Open(dir string, log *slog.Logger) (*Store, error) {
	if log == nil {
		log = logctx.Discard()
	}
	for _, sub := range []string{"layers", "tmp"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o700); err != nil {
			return nil, fmt.Errorf("image store: %w", err)
		}
	}
	return &Store{dir: dir, log: log}, nil
}

// Dir returns the store's directory.
func (s *Store) Dir() string { return s.dir }

// LayerDir returns the directory of an unpacked layer, named by its whole
// DiffID: a layer is never mistaken for another that shares a prefix.
func (s *Store) LayerDir(diffID string) string {
	return filepath.Join(s.dir, "layers", strings.TrimPrefix(diffID, "sha256:"))
}

// legacyLayerDir is where a store made before full names kept a layer
// (its first 16 hex digits): kept while sandboxes use it, never reused.
func (s *Store) legacyLayerDir(diffID string) string {
	hex := strings.TrimPrefix(diffID, "sha256:")
	return filepath.Join(s.dir, "layers", hex[:min(16, len(hex))])
}

type index struct {
	Images map[string]*Image `json:"images"`
	// Blobs are the layer blobs this store has fetched and checked, by
	// "repository@blob digest": the DiffID each unpacks to. A layer on
	// disk is reused for a pull only through one of these, so that an
	// image config naming another image's DiffIDs gets nothing it did not
	// bring the bytes of.
	Blobs map[string]string `json:"blobs,omitempty"`
}

// withIndex runs fn on the index under the store's locks; if write, the
// index fn left is saved atomically.
func (s *Store) withIndex(write bool, fn func(*index) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	lf, err := os.OpenFile(filepath.Join(s.dir, "lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	defer lf.Close()
	how := unix.LOCK_SH
	if write {
		how = unix.LOCK_EX
	}
	if err := unix.Flock(int(lf.Fd()), how); err != nil {
		return err
	}
	idx := &index{Images: map[string]*Image{}, Blobs: map[string]string{}}
	b, err := os.ReadFile(filepath.Join(s.dir, "index.json"))
	if err == nil {
		if err := json.Unmarshal(b, idx); err != nil {
			return fmt.Errorf("image index is corrupt: %w", err)
		}
		if idx.Images == nil {
			idx.Images = map[string]*Image{}
		}
		if idx.Blobs == nil {
			idx.Blobs = map[string]string{}
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err := fn(idx); err != nil {
		return err
	}
	if !write {
		return nil
	}
	out, err := json.MarshalIndent(idx, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(s.dir, "index.json.tmp")
	if err := os.WriteFile(tmp, out, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(s.dir, "index.json"))
}

// List returns every image, sorted by name.
func (s *Store) List() ([]*Image, error) {
	var out []*Image
	err := s.withIndex(false, func(idx *index) error {
		for _, img := range idx.Images {
			out = append(out, img)
		}
		return nil
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, err
}

// Get returns an image by name (as given or normalized), by its digest
// alone, or by a digest reference of the repository it came from (never
// another repository's image that happens to have the digest).
func (s *Store) Get(ref string) (*Image, error) {
	keys := []string{ref}
	repo, digest := "", ""
	if r, err := name.ParseReference(ref); err == nil {
		keys = append(keys, r.Name())
		if d, ok := r.(name.Digest); ok {
			repo, digest = d.Context().Name(), d.DigestStr()
		}
	}
	var found *Image
	err := s.withIndex(false, func(idx *index) error {
		for _, k := range keys {
			if img, ok := idx.Images[k]; ok {
				found = img
				return nil
			}
		}
		for _, img := range idx.Images {
			if img.Digest == ref || digest != "" && repo == imageRepo(img) && (img.Digest == digest || img.RefDigest == digest) {
				found = img
				return nil
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if found == nil {
		return nil, errdefs.Newf(errdefs.ErrNotFound, api.CodeImageNotFound, "image %q is not in the store", ref)
	}
	for _, l := range found.Layers {
		if !s.layerPresent(l) {
			return nil, errdefs.Newf(errdefs.ErrNotFound, api.CodeImageNotFound, "image %q is missing layer %s; pull or import it again", ref, l)
		}
	}
	return found, nil
}

// imageRepo is the repository an image's name is in.
func imageRepo(img *Image) string {
	if img.Repository != "" {
		return img.Repository
	}
	if r, err := name.ParseReference(img.Name); err == nil {
		return r.Context().Name()
	}
	return ""
}

// layerPresent reports whether a layer is unpacked under its full name.
func (s *Store) layerPresent(diffID string) bool {
	fi, err := os.Lstat(s.LayerDir(diffID))
	return err == nil && fi.IsDir()
}

// put records img; an image of the same name and content keeps the
// tenants it had.
func (s *Store) put(img *Image, blobs map[string]string) error {
	return s.withIndex(true, func(idx *index) error {
		if old := idx.Images[img.Name]; old != nil && old.Digest == img.Digest {
			img.Public = img.Public || old.Public
			for _, t := range old.Tenants {
				if !slices.Contains(img.Tenants, t) {
					img.Tenants = append(img.Tenants, t)
				}
			}
		}
		idx.Images[img.Name] = img
		maps.Copy(idx.Blobs, blobs)
		return nil
	})
}

// allow records that tenant may use the image named imgName.
func (s *Store) allow(imgName, tenant string) error {
	return s.withIndex(true, func(idx *index) error {
		if img := idx.Images[imgName]; img != nil && !img.UsableBy(tenant) {
			img.Tenants = append(img.Tenants, tenant)
		}
		return nil
	})
}

// blob returns the DiffID this store checked blob key unpacks to.
func (s *Store) blob(key string) (string, bool) {
	var diffID string
	err := s.withIndex(false, func(idx *index) error {
		diffID = idx.Blobs[key]
		return nil
	})
	return diffID, err == nil && diffID != ""
}

// Remove deletes an image from the index; its layers go at the next GC.
func (s *Store) Remove(ref string) error {
	img, err := s.Get(ref)
	if err != nil {
		return err
	}
	return s.withIndex(true, func(idx *index) error {
		delete(idx.Images, img.Name)
		return nil
	})
}

// GC removes layer directories that no image references and that are not
// in inUse (layers of live sandboxes). It returns how many it removed.
func (s *Store) GC(inUse map[string]bool) (int, error) {
	keep := map[string]bool{}
	for l := range inUse {
		keep[filepath.Base(s.LayerDir(l))] = true
		keep[filepath.Base(s.legacyLayerDir(l))] = true
	}
	var removed int
	err := s.withIndex(true, func(idx *index) error {
		for _, img := range idx.Images {
			for _, l := range img.Layers {
				keep[filepath.Base(s.LayerDir(l))] = true
			}
		}
		for key, diffID := range idx.Blobs {
			if !keep[filepath.Base(s.LayerDir(diffID))] {
				delete(idx.Blobs, key)
			}
		}
		entries, err := os.ReadDir(filepath.Join(s.dir, "layers"))
		if err != nil {
			return err
		}
		for _, e := range entries {
			if keep[e.Name()] {
				continue
			}
			if err := os.RemoveAll(filepath.Join(s.dir, "layers", e.Name())); err != nil {
				return err
			}
			removed++
		}
		return nil
	})
	return removed, err
}

// HostPlatform is "linux/<arch of this machine>".
func HostPlatform() string { return "linux/" + runtime.GOARCH }
