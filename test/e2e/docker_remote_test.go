// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/moby/moby/client"

	"github.com/corral-dev/corral/internal/testutil"
	"github.com/corral-dev/corral/internal/testutil/netlab"
)

// A remote engine's addresses: its bridge (the sandboxes' gateway), and
// the two ends of the link from this machine, where it publishes ports.
const (
	remoteBridge        = "10.218.0.1/24"
	remoteBridgeGateway = "10.218.0.1"
	remoteLinkHost      = "198.51.100.1"
	remoteLinkEngine    = "198.51.100.2"
)

// remoteEngine starts a private dockerd "on another machine": in the
// World's uplink namespace, with its bridge and NAT there (so whatever
// its containers send reaches the World or nothing), publishing ports on
// its end of a veth from this machine. It returns the engine, the
// server flags that make it a remote engine, and a busybox image loaded
// into it.
func remoteEngine(t *testing.T, w netlab.World) (*privateEngine, []string, string) {
	t.Helper()
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	id := hex.EncodeToString(b)
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v %s", args, err, out)
		}
	}
	host, eng := "crh"+id, "cre"+id
	run("link", "add", host, "type", "veth", "peer", "name", eng)
	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", host).Run() })
	run("link", "set", eng, "netns", w.Uplink)
	run("addr", "add", remoteLinkHost+"/30", "dev", host)
	run("link", "set", host, "up")
	run("-n", w.Uplink, "addr", "add", remoteLinkEngine+"/30", "dev", eng)
	run("-n", w.Uplink, "link", "set", eng, "up")

	e := startPrivateEngine(t, engineOpts{netns: w.Uplink, bridge: remoteBridge})
	// The image carries a health check that tries to change the network:
	// the engine must never run it (it would, beside PID 1's tree, with
	// the container's capabilities).
	ref := e.loadBusybox(t, &v1.HealthConfig{Test: []string{"CMD-SHELL", hostileHealthcheck}, Interval: 500 * time.Millisecond})
	// The engine's own addresses on the way to the World and to this
	// machine are its host's: the operator denies them, as docs/egress.md
	// says (the bridge and its gateway are denied by the driver itself).
	args := []string{"--docker-host", "unix://" + e.sock, "--docker-remote", "--docker-publish-ip", remoteLinkEngine,
		"--egress-deny", "192.0.2.0/24," + remoteLinkEngine + "/30"}
	return e, args, ref
}

// hostileHealthcheck is the remote test image's health check.
const hostileHealthcheck = "touch /tmp/healthcheck-ran; ip addr add 10.218.0.251/24 dev eth0"

// loadBusybox loads the e2e busybox image into the engine (which may
// not reach this machine's registries), with a health check when hc is
// set, and returns its reference.
func (e *privateEngine) loadBusybox(t *testing.T, hc *v1.HealthConfig) string {
	t.Helper()
	const ref = "corral-test/busybox:private"
	img := busyboxImage(t)
	if hc != nil {
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		cf = cf.DeepCopy()
		cf.Config.Healthcheck = hc
		if img, err = mutate.ConfigFile(img, cf); err != nil {
			t.Fatal(err)
		}
	}
	var tarBuf bytes.Buffer
	if err := tarball.Write(name.MustParseReference(ref), img, &tarBuf); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := e.client().ImageLoad(ctx, &tarBuf)
	if err != nil {
		t.Fatalf("load the image into the private engine: %v", err)
	}
	_, _ = io.Copy(io.Discard, res)
	res.Close()
	return ref
}

// logsOf is the end of what a container of the engine printed.
func (e *privateEngine) logsOf(t *testing.T, container string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	logs, err := e.client().ContainerLogs(ctx, container, client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true, Tail: "200"})
	if err != nil {
		return err.Error()
	}
	defer logs.Close()
	b, _ := io.ReadAll(logs)
	return strings.ToValidUTF8(string(b), "?")
}

// stopContainer stops a container of the engine (its restart policy
// then leaves it stopped); startContainer starts it again.
func (e *privateEngine) stopContainer(t *testing.T, container string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := e.client().ContainerStop(ctx, container, client.ContainerStopOptions{}); err != nil {
		t.Fatalf("stop %s: %v", container, err)
	}
}

func (e *privateEngine) startContainer(t *testing.T, container string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := e.client().ContainerStart(ctx, container, client.ContainerStartOptions{}); err != nil {
		t.Fatalf("start %s: %v", container, err)
	}
}

// pidOf is the pid, on this machine, of a running container's first
// process.
func (e *privateEngine) pidOf(t *testing.T, container string) int {
	t.Helper()
	var pid int
	testutil.WaitFor(t, 20*time.Second, container+" to run", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		res, err := e.client().ContainerInspect(ctx, container, client.ContainerInspectOptions{})
		if err != nil || res.Container.State == nil || !res.Container.State.Running {
			return false
		}
		pid = res.Container.State.Pid
		return pid > 0 && running(pid)
	})
	return pid
}
