// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/corral-dev/corral/internal/testutil"
	"github.com/corral-dev/corral/internal/testutil/registry"
)

// requireOCI gates the native-runtime tier: root, runc and a static
// busybox (Debian's busybox-static) to build test images from.
func requireOCI(t *testing.T) {
	t.Helper()
	testutil.RequireRoot(t)
	for _, bin := range []string{"runc", "/bin/busybox"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Fatalf("%s is needed for the native runtime tier (apt-get install runc busybox-static): %v", bin, err)
		}
	}
}

type tarFile struct {
	name, body, link string
	mode             int64
	dir              bool
}

func tarLayer(t *testing.T, files []tarFile) v1.Layer {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		h := &tar.Header{Name: f.name, Mode: f.mode, Size: int64(len(f.body)), Typeflag: tar.TypeReg}
		switch {
		case f.dir:
			h.Typeflag, h.Size = tar.TypeDir, 0
		case f.link != "":
			h.Typeflag, h.Linkname, h.Size = tar.TypeSymlink, f.link, 0
		}
		if h.Mode == 0 {
			h.Mode = 0o644
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		_, _ = io.WriteString(tw, f.body)
	}
	_ = tw.Close()
	b := buf.Bytes()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil })
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// busyboxImage is a two-layer image: busybox with its applets, and an app
// layer. Its config sets an environment variable and a working directory.
// busyboxInRegistry pushes busyboxImage to a registry of the test's own
// and returns its reference.
func busyboxInRegistry(t *testing.T) string {
	t.Helper()
	ref := registry.Start(t) + "/corral/busybox:1"
	registry.Push(t, ref, busyboxImage(t))
	return ref
}

func busyboxImage(t *testing.T) v1.Image {
	t.Helper()
	bb, err := os.ReadFile("/bin/busybox")
	if err != nil {
		t.Fatal(err)
	}
	list, err := exec.Command("/bin/busybox", "--list").Output()
	if err != nil {
		t.Fatal(err)
	}
	files := []tarFile{
		{name: "bin/", dir: true, mode: 0o755}, {name: "bin/busybox", body: string(bb), mode: 0o755},
		{name: "etc/", dir: true, mode: 0o755}, {name: "tmp/", dir: true, mode: 0o1777}, {name: "root/", dir: true, mode: 0o700},
		{name: "etc/passwd", body: "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n"},
		{name: "etc/group", body: "root:x:0:\nnogroup:x:65534:\n"},
		{name: "usr/", dir: true, mode: 0o755}, {name: "usr/bin/", dir: true, mode: 0o755},
	}
	for _, applet := range strings.Fields(string(list)) {
		if applet != "busybox" {
			files = append(files, tarFile{name: "bin/" + applet, link: "busybox"})
		}
	}
	app := []tarFile{{name: "app/", dir: true, mode: 0o755}, {name: "app/hello.sh", body: "#!/bin/sh\necho hello from the image\n", mode: 0o755}}
	img, err := mutate.AppendLayers(empty.Image, tarLayer(t, files), tarLayer(t, app))
	if err != nil {
		t.Fatal(err)
	}
	cf, _ := img.ConfigFile()
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", "amd64"
	cf.Config.Env = []string{"PATH=/bin:/usr/bin", "FROM_IMAGE=yes"}
	cf.Config.WorkingDir = "/app"
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func saveImage(t *testing.T, path, ref string, img v1.Image) {
	t.Helper()
	tag, err := name.NewTag(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := tarball.WriteToFile(path, tag, img); err != nil {
		t.Fatal(err)
	}
}
