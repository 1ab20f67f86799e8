// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package testutil

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"os"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"
)

// RequireDocker skips unless CORRAL_TEST_DOCKER=1; when it is set, the
// test fails if no Docker engine answers (so CI cannot skip silently).
func RequireDocker(t testing.TB) {
	t.Helper()
	if os.Getenv(EnvDocker) != "1" {
		t.Skipf("docker tier: set %s=1 to run", EnvDocker)
	}
	cli, err := client.New(client.FromEnv)
	if err != nil {
		t.Fatalf("%s=1 but no Docker client: %v", EnvDocker, err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cli.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		t.Fatalf("%s=1 but the Docker engine does not answer (start dockerd): %v", EnvDocker, err)
	}
}

// BusyboxImage is the test image DockerBusybox imports: busybox and its
// applets, nothing else.
const BusyboxImage = "corral-test/busybox:1"

var busyboxOnce sync.Mutex

// DockerBusybox imports BusyboxImage into the local engine from this
// machine's static busybox (no registry is reachable in tests) and
// returns its reference. Importing again is cheap: the same layer.
func DockerBusybox(t testing.TB) string {
	t.Helper()
	busyboxOnce.Lock()
	defer busyboxOnce.Unlock()
	cli, err := client.New(client.FromEnv)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := cli.ImageInspect(ctx, BusyboxImage); err == nil {
		return BusyboxImage
	}
	buf, err := BusyboxLayer()
	if err != nil {
		t.Fatal(err)
	}
	res, err := cli.ImageImport(ctx, client.ImageImportSource{Source: bytes.NewReader(buf), SourceName: "-"}, BusyboxImage,
		client.ImageImportOptions{Changes: []string{"ENV PATH=/bin", "CMD [\"sh\"]"}})
	if err != nil {
		t.Fatalf("import %s: %v", BusyboxImage, err)
	}
	_, _ = bytes.NewBuffer(nil).ReadFrom(res)
	res.Close()
	return BusyboxImage
}

// BusyboxLayer is the one layer of the busybox test image, as a tar:
// this machine's static busybox, its applets, /etc/passwd, /tmp.
func BusyboxLayer() ([]byte, error) {
	bb, err := os.ReadFile("/bin/busybox")
	if err != nil {
		return nil, fmt.Errorf("a static busybox is needed (apt-get install busybox-static): %w", err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, d := range []string{"bin/", "tmp/", "etc/", "root/", "work/"} {
		mode := int64(0o755)
		if d == "tmp/" {
			mode = 0o1777
		}
		_ = tw.WriteHeader(&tar.Header{Name: d, Typeflag: tar.TypeDir, Mode: mode})
	}
	_ = tw.WriteHeader(&tar.Header{Name: "bin/busybox", Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(bb))})
	_, _ = tw.Write(bb)
	for _, applet := range []string{"sh", "sleep", "echo", "cat", "ls", "true", "false", "id", "ps", "kill", "wc", "head",
		"nc", "wget", "ip", "mount", "mknod", "unshare", "insmod", "dd", "seq", "test", "grep", "mkdir", "readlink", "stat",
		"sha256sum", "tr", "env", "pwd", "uname", "rm", "chmod", "printf", "sort", "tail", "od"} {
		_ = tw.WriteHeader(&tar.Header{Name: "bin/" + applet, Typeflag: tar.TypeSymlink, Linkname: "busybox"})
	}
	passwd := "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n"
	_ = tw.WriteHeader(&tar.Header{Name: "etc/passwd", Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(passwd))})
	_, _ = tw.Write([]byte(passwd))
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// TarOf is a tar of regular files (mode 0755), names sorted.
func TarOf(files map[string][]byte) ([]byte, error) {
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, n := range names {
		if err := tw.WriteHeader(&tar.Header{Name: n, Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(files[n]))}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(files[n]); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
