// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

// Package e2e drives the real corral binary, built once in TestMain, over
// HTTP with the public SDK: crashes, restarts and, for each runtime this
// machine has, the end-to-end flow.
package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/corral-dev/corral/internal/testutil"
	"github.com/corral-dev/corral/internal/testutil/corraltest"
	"github.com/corral-dev/corral/sdk"
)

// binary is the corral binary under test, built into binDir.
var binary, binDir string

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "corral-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	binDir = dir
	binary, err = corraltest.Build(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// A server started without --egress-uplink-netns links its policed
	// sandboxes through this machine's own namespace (the corral0 bridge
	// and the corral_uplink table), and leaves that there when it exits,
	// for its next run. What the tests made there goes once they are done.
	hadUplink := exec.Command("ip", "link", "show", uplinkBridge).Run() == nil
	code := m.Run()
	if !hadUplink {
		_ = exec.Command("nft", "delete", "table", "inet", uplinkTable).Run()
		_ = exec.Command("ip", "link", "del", uplinkBridge).Run()
	}
	return code
}

// The host uplink's names (internal/hostnet/uplink's defaults).
const (
	uplinkBridge = "corral0"
	uplinkTable  = "corral_uplink"
)

// server is a running `corral serve`.
type server struct {
	cmd *exec.Cmd
	url string
	// e2bURL is the E2B API's base URL when the server serves it
	// (--e2b-listen).
	e2bURL string
	stderr *testutil.LockedBuffer
	done   chan error
}

const testKey = "ck_e2e-admin-key-0123456789"

// startServer runs `corral serve` on a free loopback port with data in dir
// and returns once it serves. The process is killed at the end of the test.
func startServer(t *testing.T, dir string, args ...string) *server {
	t.Helper()
	return startServerOf(t, binary, dir, args...)
}

// startServerOf is startServer with another build of corral.
func startServerOf(t *testing.T, bin, dir string, args ...string) *server {
	t.Helper()
	full := append([]string{"serve", "--listen", "127.0.0.1:0", "--data-dir", dir, "--api-key", testKey, "--log-format", "json"}, args...)
	cmd := exec.Command(bin, full...)
	pr, pw := io.Pipe()
	s := &server{cmd: cmd, stderr: &testutil.LockedBuffer{}, done: make(chan error, 1)}
	cmd.Stderr = io.MultiWriter(pw, s.stderr)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { s.done <- cmd.Wait(); pw.Close() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-s.done
		if t.Failed() {
			t.Logf("server log:\n%s", s.stderr.String())
		}
		// The native runtime keeps bundles on a tmpfs in the data dir.
		_ = corraltest.Unmount(dir)
	})
	urlCh := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		e2bURL := ""
		for sc.Scan() {
			var line struct {
				Msg    string `json:"msg"`
				Listen string `json:"listen"`
			}
			if json.Unmarshal(sc.Bytes(), &line) != nil {
				continue
			}
			switch line.Msg {
			case "serving E2B's API":
				e2bURL = line.Listen
			case "serving":
				s.e2bURL = e2bURL
				urlCh <- line.Listen
			}
		}
	}()
	select {
	case s.url = <-urlCh:
	case err := <-s.done:
		s.done <- err // for the cleanup above, which waits on it
		t.Fatalf("corral serve exited: %v\n%s", err, s.stderr.String())
	case <-time.After(60 * time.Second):
		t.Fatalf("corral serve did not start:\n%s", s.stderr.String())
	}
	// Runs before the kill above: whatever the test left running, even
	// after a failure, is deleted through the API, so no sandbox outlives
	// the test.
	t.Cleanup(func() { s.deleteAll(t) })
	return s
}

// deleteAll deletes every sandbox of the server, if it still runs.
func (s *server) deleteAll(t *testing.T) {
	select {
	case err := <-s.done:
		s.done <- err
		return
	default:
	}
	c, err := sdk.New(sdk.WithBaseURL(s.url), sdk.WithAPIKey(testKey))
	if err != nil {
		return
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), time.Minute)
	defer cancel()
	list, err := c.ListSandboxes(cctx, sdk.ListOptions{PageSize: 200})
	if err != nil {
		return
	}
	for _, sb := range list.Items {
		if err := c.DeleteSandbox(cctx, sb.ID); err != nil && !errors.Is(err, sdk.ErrNotFound) {
			t.Errorf("cleanup: delete %s: %v", sb.ID, err)
		}
	}
}

// kill9 kills the server without warning.
func (s *server) kill9(t *testing.T) {
	t.Helper()
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.done
	s.done <- nil
}

// stop asks the server to shut down and waits for a clean exit.
func (s *server) stop(t *testing.T) {
	t.Helper()
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-s.done:
		if err != nil {
			t.Fatalf("server exit after SIGTERM: %v\n%s", err, s.stderr.String())
		}
		s.done <- nil
	case <-time.After(60 * time.Second):
		t.Fatalf("server did not stop on SIGTERM")
	}
}

func (s *server) client(t *testing.T) *sdk.Client {
	t.Helper()
	c, err := sdk.New(sdk.WithBaseURL(s.url), sdk.WithAPIKey(testKey))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func ctx(t *testing.T) context.Context {
	t.Helper()
	c, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	t.Cleanup(cancel)
	return c
}
