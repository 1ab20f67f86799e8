// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package testutil

import (
	"archive/tar"
	"bytes"
	"context"
	"os"
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
	bb, err := os.ReadFile("/bin/busybox")
	if err != nil {
		t.Fatalf("a static busybox is needed (apt-get install busybox-static): %v", err)
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
	_ = tw.Close()
	res, err := cli.ImageImport(ctx, client.ImageImportSource{Source: &buf, SourceName: "-"}, BusyboxImage,
		client.ImageImportOptions{Changes: []string{"ENV PATH=/bin", "CMD [\"sh\"]"}})
	if err != nil {
		t.Fatalf("import %s: %v", BusyboxImage, err)
	}
	_, _ = bytes.NewBuffer(nil).ReadFrom(res)
	res.Close()
	return BusyboxImage
}
