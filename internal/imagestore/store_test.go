// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package imagestore

import (
	"archive/tar"
	"bytes"
	"encoding/base64"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"golang.org/x/sys/unix"

	"github.com/corral-dev/corral/errdefs"
	"github.com/corral-dev/corral/internal/testutil"
	"github.com/corral-dev/corral/internal/testutil/registry"
)

type entry struct {
	name, body, link string
	typ              byte
	mode             int64
}

func layerOf(t *testing.T, entries ...entry) v1.Layer {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Typeflag: e.typ, Mode: e.mode, Linkname: e.link, Size: int64(len(e.body))}
		if h.Typeflag == 0 {
			h.Typeflag = tar.TypeReg
		}
		if h.Mode == 0 {
			h.Mode = 0o644
		}
		if h.Typeflag != tar.TypeReg {
			h.Size = 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Size > 0 {
			_, _ = tw.Write([]byte(e.body))
		}
	}
	_ = tw.Close()
	b := buf.Bytes()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil })
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func imageOf(t *testing.T, layers ...v1.Layer) v1.Image {
	t.Helper()
	img, err := mutate.AppendLayers(empty.Image, layers...)
	if err != nil {
		t.Fatal(err)
	}
	cf, _ := img.ConfigFile()
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", strings.TrimPrefix(HostPlatform(), "linux/")
	cf.Config.Env = []string{"PATH=/bin", "GREETING=hi"}
	cf.Config.WorkingDir, cf.Config.Cmd = "/work", []string{"/bin/sh"}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// sampleImage has a base layer and a layer that deletes, replaces and
// makes a directory opaque.
func sampleImage(t *testing.T) v1.Image {
	base := layerOf(t,
		entry{name: "bin/", typ: tar.TypeDir, mode: 0o755},
		entry{name: "bin/tool", body: "#!/bin/sh\n", mode: 0o4755},
		entry{name: "etc/", typ: tar.TypeDir, mode: 0o755},
		entry{name: "etc/old.conf", body: "old"},
		entry{name: "etc/keep.conf", body: "keep"},
		entry{name: "data/", typ: tar.TypeDir, mode: 0o755},
		entry{name: "data/a", body: "a"},
		entry{name: "bin/link", typ: tar.TypeSymlink, link: "tool"},
		entry{name: "bin/hard", typ: tar.TypeLink, link: "bin/tool"},
	)
	top := layerOf(t,
		entry{name: "etc/.wh.old.conf", body: ""},
		entry{name: "data/.wh..wh..opq", body: ""},
		entry{name: "data/b", body: "b"},
	)
	return imageOf(t, base, top)
}

func TestPullUnpacksForOverlay(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	reg := registry.Start(t)
	registry.Push(t, reg+"/test/sample:v1", sampleImage(t))
	s, err := Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	img, err := s.Pull(t.Context(), reg+"/test/sample:v1", PullOptions{})
	if err != nil {
		t.Fatalf("Pull = %v", err)
	}
	if len(img.Layers) != 2 || img.Config.WorkingDir != "/work" || img.Config.Env[1] != "GREETING=hi" {
		t.Fatalf("image = %+v", img)
	}
	base, top := s.LayerDir(img.Layers[0]), s.LayerDir(img.Layers[1])
	if fi, err := os.Stat(filepath.Join(base, "bin/tool")); err != nil || fi.Mode()&os.ModeSetuid == 0 {
		t.Errorf("setuid tool: %v %v", fi, err)
	}
	if l, _ := os.Readlink(filepath.Join(base, "bin/link")); l != "tool" {
		t.Errorf("symlink = %q", l)
	}
	var st1, st2 unix.Stat_t
	_ = unix.Stat(filepath.Join(base, "bin/tool"), &st1)
	_ = unix.Stat(filepath.Join(base, "bin/hard"), &st2)
	if st1.Ino != st2.Ino {
		t.Errorf("hard link is a copy")
	}
	var wh unix.Stat_t
	if err := unix.Lstat(filepath.Join(top, "etc/old.conf"), &wh); err != nil || wh.Mode&unix.S_IFMT != unix.S_IFCHR || wh.Rdev != 0 {
		t.Errorf("whiteout is not a 0/0 char device: %+v %v", wh, err)
	}
	buf := make([]byte, 8)
	if n, err := unix.Getxattr(filepath.Join(top, "data"), "trusted.overlay.opaque", buf); err != nil || string(buf[:n]) != "y" {
		t.Errorf("opaque xattr: %q %v", buf[:n], err)
	}
	// Overlay them as a sandbox would and check the merged view.
	merged, upper, work := t.TempDir(), t.TempDir(), t.TempDir()
	if err := unix.Mount("overlay", merged, "overlay", 0, "lowerdir="+top+":"+base+",upperdir="+upper+",workdir="+work); err != nil {
		t.Fatalf("mount overlay: %v", err)
	}
	defer unix.Unmount(merged, unix.MNT_DETACH)
	for p, want := range map[string]bool{"etc/old.conf": false, "etc/keep.conf": true, "data/a": false, "data/b": true} {
		_, err := os.Stat(filepath.Join(merged, p))
		if (err == nil) != want {
			t.Errorf("merged %s exists=%v, want %v", p, err == nil, want)
		}
	}
	// Same image again: nothing is unpacked twice.
	before, _ := os.Stat(base)
	if _, err := s.Pull(t.Context(), reg+"/test/sample:v1", PullOptions{}); err != nil {
		t.Fatal(err)
	}
	after, _ := os.Stat(base)
	if !before.ModTime().Equal(after.ModTime()) {
		t.Errorf("a second pull unpacked the layer again")
	}
	got, err := s.Get(reg + "/test/sample:v1")
	if err != nil || got.Digest != img.Digest {
		t.Errorf("Get = %+v, %v", got, err)
	}
	if got, err := s.Get(img.Digest); err != nil || got.Name != img.Name {
		t.Errorf("Get by digest = %+v, %v", got, err)
	}
}

func TestConcurrentPullsShareWork(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	reg := registry.Start(t)
	registry.Push(t, reg+"/test/sample:v1", sampleImage(t))
	registry.Push(t, reg+"/test/other:v1", sampleImage(t))
	s, _ := Open(t.TempDir(), nil)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		wg.Go(func() {
			ref := reg + "/test/sample:v1"
			if i%2 == 1 {
				ref = reg + "/test/other:v1"
			}
			_, err := s.Pull(t.Context(), ref, PullOptions{})
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	entries, _ := os.ReadDir(filepath.Join(s.Dir(), "layers"))
	if len(entries) != 2 {
		t.Errorf("%d layer directories, want 2 shared by both images", len(entries))
	}
	if tmp, _ := os.ReadDir(filepath.Join(s.Dir(), "tmp")); len(tmp) != 0 {
		t.Errorf("temporary directories left: %v", tmp)
	}
}

func TestPullErrors(t *testing.T) {
	t.Parallel()
	reg := registry.Start(t)
	s, _ := Open(t.TempDir(), nil)
	cases := []struct {
		ref  string
		kind error
	}{
		{reg + "/test/missing:v1", errdefs.ErrInvalidArgument},
		{"UPPER/case::bad", errdefs.ErrInvalidArgument},
		{"127.0.0.1:1/nothing/listens:here", errdefs.ErrUnavailable},
	}
	for _, tc := range cases {
		if _, err := s.Pull(t.Context(), tc.ref, PullOptions{}); !errors.Is(err, tc.kind) {
			t.Errorf("Pull(%s) = %v, want %v", tc.ref, err, tc.kind)
		}
	}
	if _, err := s.Get("nothing:here"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Get of a missing image = %v", err)
	}
}

func TestUnpackRefusesEscapes(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	outside := t.TempDir()
	for name, l := range map[string][]entry{
		"dot-dot":             {{name: "../escape", body: "x"}},
		"symlink parent":      {{name: "evil", typ: tar.TypeSymlink, link: outside}, {name: "evil/pwned", body: "x"}},
		"hard link out":       {{name: "h", typ: tar.TypeLink, link: "../../etc/passwd"}},
		"symlink hard parent": {{name: "d", typ: tar.TypeSymlink, link: "/etc"}, {name: "h", typ: tar.TypeLink, link: "d/passwd"}},
	} {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		for _, e := range l {
			typ := e.typ
			if typ == 0 {
				typ = tar.TypeReg
			}
			_ = tw.WriteHeader(&tar.Header{Name: e.name, Typeflag: typ, Linkname: e.link, Mode: 0o644, Size: int64(len(e.body))})
			_, _ = tw.Write([]byte(e.body))
		}
		_ = tw.Close()
		dir := t.TempDir()
		if _, _, err := unpack(&buf, dir); err == nil {
			t.Errorf("%s: unpack accepted the layer", name)
		}
		if entries, _ := os.ReadDir(outside); len(entries) != 0 {
			t.Fatalf("%s: wrote outside the layer: %v", name, entries)
		}
	}
}

func TestImportDockerAndOCILayout(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	img := sampleImage(t)
	dir := t.TempDir()
	tag, _ := name.NewTag("example.com/team/tool:1.0")
	tarPath := filepath.Join(dir, "image.tar")
	if err := tarball.WriteToFile(tarPath, tag, img); err != nil {
		t.Fatal(err)
	}
	s, _ := Open(t.TempDir(), nil)
	got, err := s.Import(t.Context(), tarPath, ImportOptions{})
	if err != nil || len(got) != 1 || got[0].Name != "example.com/team/tool:1.0" {
		t.Fatalf("Import(docker tarball) = %+v, %v", got, err)
	}
	got, err = s.Import(t.Context(), tarPath, ImportOptions{Name: "renamed:latest"})
	if err != nil || got[0].Name != "index.docker.io/library/renamed:latest" {
		t.Fatalf("Import with --name = %+v, %v", got, err)
	}
	lp := filepath.Join(dir, "layout")
	p, err := layout.Write(lp, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": "oci/tool:2"})); err != nil {
		t.Fatal(err)
	}
	got, err = s.Import(t.Context(), lp, ImportOptions{})
	if err != nil || len(got) != 1 || got[0].Name != "index.docker.io/oci/tool:2" {
		t.Fatalf("Import(OCI layout) = %+v, %v", got, err)
	}
	list, _ := s.List()
	if len(list) != 3 {
		t.Errorf("List = %d images", len(list))
	}
	bad := filepath.Join(dir, "bad.tar")
	_ = os.WriteFile(bad, []byte("not a tar"), 0o600)
	if _, err := s.Import(t.Context(), bad, ImportOptions{}); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("Import(garbage) = %v", err)
	}
	// Removing every image lets GC drop the layers, unless a sandbox uses one.
	for _, im := range list {
		if err := s.Remove(im.Name); err != nil {
			t.Fatal(err)
		}
	}
	n, err := s.GC(map[string]bool{list[0].Layers[0]: true})
	if err != nil || n != 1 {
		t.Errorf("GC removed %d (%v), want 1 (one layer in use)", n, err)
	}
}

// Images are tenant-scoped: what one tenant pulled from a private
// repository another gets only if the registry accepts that other
// tenant's credentials; no pull borrows this machine's registry login;
// and no image config's DiffIDs or digest reference open a layer or image
// the requester did not bring.
func TestImagesAreTenantScoped(t *testing.T) {
	testutil.RequireRoot(t)
	reg := registry.StartAuth(t,
		registry.User{Name: "alice", Password: "a-secret", Prefixes: []string{"acme/"}},
		registry.User{Name: "bob", Password: "b-secret", Prefixes: []string{"bob/"}})
	private := imageOf(t, layerOf(t, entry{name: "secret.txt", body: "acme's secret"}))
	registry.PushAs(t, reg+"/acme/internal:prod", private, "alice", "a-secret")
	s, _ := Open(t.TempDir(), nil)
	ctx := t.Context()
	img, err := s.Resolve(ctx, reg+"/acme/internal:prod", PullOptions{Tenant: "a", Username: "alice", Password: "a-secret"})
	if err != nil {
		t.Fatal(err)
	}
	if img.Public || len(img.Tenants) != 1 || img.Tenants[0] != "a" {
		t.Fatalf("a tenant's pull = %+v, want it that tenant's only", img)
	}
	// Tenant b, without credentials or with its own, gets the registry's
	// refusal, not the cached image.
	for _, opts := range []PullOptions{{Tenant: "b"}, {Tenant: "b", Username: "bob", Password: "b-secret"}} {
		if _, err := s.Resolve(ctx, reg+"/acme/internal:prod", opts); !errors.Is(err, errdefs.ErrInvalidArgument) ||
			!strings.Contains(err.Error(), "refused") {
			t.Errorf("another tenant's Resolve (user %q) = %v, want the registry's refusal", opts.Username, err)
		}
	}
	// Not through this machine's registry login either (the Docker config
	// of whoever runs the server).
	cfgDir := t.TempDir()
	auth := base64.StdEncoding.EncodeToString([]byte("alice:a-secret"))
	if err := os.WriteFile(filepath.Join(cfgDir, "config.json"), []byte(`{"auths":{"`+reg+`":{"auth":"`+auth+`"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("DOCKER_CONFIG", cfgDir)
	if _, err := s.Resolve(ctx, reg+"/acme/internal:prod", PullOptions{Tenant: "b"}); err == nil {
		t.Error("a tenant's pull without credentials used this machine's registry login")
	}
	if _, err := s.Resolve(ctx, reg+"/acme/internal:prod", PullOptions{Tenant: "b", Keychain: authn.DefaultKeychain}); err != nil {
		t.Errorf("with the keychain the operator allows: %v", err)
	}
	// The registry accepting a tenant's credentials makes it that tenant's.
	if _, err := s.Resolve(ctx, reg+"/acme/internal:prod", PullOptions{Tenant: "c", Username: "alice", Password: "a-secret"}); err != nil {
		t.Errorf("with credentials the registry accepts: %v", err)
	}
	if got, _ := s.Get(reg + "/acme/internal:prod"); !slices.Contains(got.Tenants, "c") {
		t.Errorf("tenants after a re-authorised resolve = %v", got.Tenants)
	}

	// A digest reference into another repository is not the cached image.
	if _, err := s.Resolve(ctx, reg+"/bob/anything@"+img.Digest, PullOptions{Tenant: "b", Username: "bob", Password: "b-secret"}); err == nil {
		t.Error("a digest reference of another repository resolved to the private image")
	}
	// An image whose config claims the private layer's DiffID, with bytes
	// of its own, gets nothing of the private layer.
	forged := imageOf(t, layerOf(t, entry{name: "mine.txt", body: "bob's bytes"}))
	cf, _ := forged.ConfigFile()
	cf = cf.DeepCopy()
	h, _ := v1.NewHash(img.Layers[0])
	cf.RootFS.DiffIDs = []v1.Hash{h}
	forged, err = mutate.ConfigFile(forged, cf)
	if err != nil {
		t.Fatal(err)
	}
	registry.PushAs(t, reg+"/bob/forged:1", forged, "bob", "b-secret")
	if got, err := s.Resolve(ctx, reg+"/bob/forged:1", PullOptions{Tenant: "b", Username: "bob", Password: "b-secret"}); !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), "hashes to") {
		t.Fatalf("an image claiming another's DiffID = %+v, %v; want it refused", got, err)
	}
}

// Layers are stored under their whole DiffID.
func TestLayerDirIsTheWholeDiffID(t *testing.T) {
	t.Parallel()
	s, _ := Open(t.TempDir(), nil)
	id := "sha256:" + strings.Repeat("ab", 32)
	if got := filepath.Base(s.LayerDir(id)); got != strings.Repeat("ab", 32) {
		t.Fatalf("LayerDir = %s", got)
	}
}

func TestUnpackKeepsOnlySafeXattrs(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]bool{"user.mime": true, "system.posix_acl_access": true, "trusted.overlay.redirect": false,
		"trusted.overlay.opaque": false, "security.capability": false, "security.selinux": false, "security.ima": false, "trusted.x": false} {
		if safeXattr(name) != want {
			t.Errorf("safeXattr(%s) = %v, want %v", name, !want, want)
		}
	}
}
