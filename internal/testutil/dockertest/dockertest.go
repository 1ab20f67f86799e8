// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

// Package dockertest is the Docker tier's: its gate (RequireDocker, which
// skips unless CORRAL_TEST_DOCKER=1 and fails if it is set but no engine
// answers) and the busybox test image imported into the engine. Of the
// test helpers only it imports the Docker Engine client, so the others'
// test binaries do not link it. Tests import it (internal/archtest
// checks).
package dockertest

import (
	"bytes"
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/corral-dev/corral/internal/testutil"
	"github.com/corral-dev/corral/internal/testutil/registry"
)

// RequireDocker skips unless CORRAL_TEST_DOCKER=1; when it is set, the
// test fails if no Docker engine answers (so CI cannot skip silently).
func RequireDocker(t testing.TB) {
	t.Helper()
	if os.Getenv(testutil.EnvDocker) != "1" {
		t.Skipf("docker tier: set %s=1 to run", testutil.EnvDocker)
	}
	cli, err := client.New(client.FromEnv)
	if err != nil {
		t.Fatalf("%s=1 but no Docker client: %v", testutil.EnvDocker, err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cli.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		t.Fatalf("%s=1 but the Docker engine does not answer (start dockerd): %v", testutil.EnvDocker, err)
	}
}

// BusyboxImage is the test image Busybox imports: busybox and its
// applets, nothing else.
const BusyboxImage = "corral-test/busybox:1"

var busyboxOnce sync.Mutex

// Busybox imports BusyboxImage into the local engine from this
// machine's static busybox (no registry is reachable in tests) and
// returns its reference. Importing again is cheap: the same layer.
func Busybox(t testing.TB) string {
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
	buf, err := registry.BusyboxLayer()
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
