// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/internal/testutil"
	"github.com/corral-dev/corral/internal/testutil/netlab"
	"github.com/corral-dev/corral/sdk"
)

// privateEngine is a dockerd of the test's own, on its own socket and
// directories, so the test may kill it without touching anyone else's.
// Its containerd runs apart, as in production, so killing dockerd leaves
// containerd and the containers alone.
type privateEngine struct {
	t          *testing.T
	opts       engineOpts
	root       string
	sock       string
	cmd        *exec.Cmd
	containerd *exec.Cmd
	log        *testutil.LockedBuffer
}

// engineOpts place a private engine "on another machine".
type engineOpts struct {
	// netns runs dockerd in this network namespace (by name); empty: a
	// new one of its own.
	netns string
	// bridge is the CIDR of its default bridge, with iptables NAT in
	// netns; empty runs it with no bridge and no iptables.
	bridge string
}

func startPrivateEngine(t *testing.T, opts ...engineOpts) *privateEngine {
	t.Helper()
	root, err := os.MkdirTemp("", "cde") // short: containerd's socket paths have a length limit
	if err != nil {
		t.Fatal(err)
	}
	e := &privateEngine{t: t, root: root, sock: filepath.Join(root, "d.sock"), log: &testutil.LockedBuffer{}}
	if len(opts) > 0 {
		e.opts = opts[0]
	}
	if e.opts.netns == "" {
		// Never in this machine's namespace: a dockerd without a bridge
		// deletes any docker0 it finds there, the real engine's included.
		e.opts.netns = "cpe-" + filepath.Base(root)
		if out, err := exec.Command("ip", "netns", "add", e.opts.netns).CombinedOutput(); err != nil {
			t.Fatalf("ip netns add: %v %s", err, out)
		}
		ns := e.opts.netns
		t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
	}
	t.Cleanup(func() {
		e.stop()
		e.endShims()
		// Whatever the engine mounted under its root goes with it.
		if b, err := os.ReadFile("/proc/self/mountinfo"); err == nil {
			sc := bufio.NewScanner(strings.NewReader(string(b)))
			var mounts []string
			for sc.Scan() {
				if f := strings.Fields(sc.Text()); len(f) > 4 && strings.HasPrefix(f[4], root+"/") {
					mounts = append(mounts, f[4])
				}
			}
			for i := len(mounts) - 1; i >= 0; i-- {
				_ = syscall.Unmount(mounts[i], syscall.MNT_DETACH)
			}
		}
		_ = os.RemoveAll(root)
	})
	e.startContainerd()
	e.start()
	return e
}

// startContainerd runs a containerd on the engine's own directories.
func (e *privateEngine) startContainerd() {
	e.t.Helper()
	conf := filepath.Join(e.root, "containerd.toml")
	body := "version = 2\n" +
		"root = \"" + filepath.Join(e.root, "cd") + "\"\n" +
		"state = \"" + filepath.Join(e.root, "cs") + "\"\n" +
		"disabled_plugins = [\"io.containerd.grpc.v1.cri\"]\n" +
		"[grpc]\n  address = \"" + filepath.Join(e.root, "c.sock") + "\"\n" +
		"[ttrpc]\n  address = \"" + filepath.Join(e.root, "c.sock.ttrpc") + "\"\n"
	if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
		e.t.Fatal(err)
	}
	e.containerd = exec.Command("containerd", "--config", conf)
	e.containerd.Stdout, e.containerd.Stderr = e.log, e.log
	if err := e.containerd.Start(); err != nil {
		e.t.Fatal(err)
	}
	testutil.WaitFor(e.t, 30*time.Second, "containerd's socket", func() bool {
		_, err := os.Stat(filepath.Join(e.root, "c.sock"))
		return err == nil
	})
}

func (e *privateEngine) start() {
	e.t.Helper()
	args := []string{"--data-root", filepath.Join(e.root, "data"), "--exec-root", filepath.Join(e.root, "x"),
		"--pidfile", filepath.Join(e.root, "d.pid"), "-H", "unix://" + e.sock, "--containerd", filepath.Join(e.root, "c.sock")}
	if e.opts.bridge == "" {
		args = append(args, "--bridge", "none", "--iptables=false", "--ip-masq=false", "--live-restore")
	} else {
		args = append(args, "--bip", e.opts.bridge)
	}
	// nsenter execs dockerd in the namespace: the process is dockerd.
	e.cmd = exec.Command("nsenter", append([]string{"--net=" + netlab.NetnsPath(e.opts.netns), "dockerd"}, args...)...)
	e.cmd.Stdout, e.cmd.Stderr = e.log, e.log
	if err := e.cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	cli := e.client()
	deadline := time.Now().Add(60 * time.Second)
	for {
		cctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := cli.Ping(cctx, client.PingOptions{})
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("the private dockerd did not answer: %v\n%s", err, e.log.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (e *privateEngine) client() *client.Client {
	cli, err := client.New(client.WithHost("unix://" + e.sock))
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { cli.Close() })
	return cli
}

// kill9 kills dockerd without warning; its containers keep running.
func (e *privateEngine) kill9() {
	_ = e.cmd.Process.Signal(syscall.SIGKILL)
	_ = e.cmd.Wait()
}

// stopDockerd stops dockerd as an operator or systemd would (SIGTERM,
// its own shutdown), leaving containerd up; with --live-restore its
// containers keep running.
func (e *privateEngine) stopDockerd() {
	_ = e.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = e.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = e.cmd.Process.Kill()
		<-done
	}
}

// stop ends dockerd, then containerd.
func (e *privateEngine) stop() {
	for _, cmd := range []*exec.Cmd{e.cmd, e.containerd} {
		if cmd == nil || cmd.Process == nil || cmd.ProcessState != nil {
			continue
		}
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}
}

// endShims ends the containerd shims of this engine that outlive it, and
// what they run. A dockerd killed between creating a container and
// starting it forgets it (the restarted engine does not list it), while
// its shim and `runc init` go on; nothing that speaks the Docker API can
// see them, so the test removes them here, with their cgroups.
func (e *privateEngine) endShims() {
	sock := filepath.Join(e.root, "c.sock")
	for _, shim := range pidsWhere(func(args []string) bool {
		return len(args) > 0 && strings.HasSuffix(args[0], "containerd-shim-runc-v2") && slices.Contains(args, sock)
	}) {
		args := cmdline(shim)
		for _, child := range pidsWhere(func([]string) bool { return true }) {
			if parentOf(child) == shim {
				_ = syscall.Kill(child, syscall.SIGKILL)
			}
		}
		_ = syscall.Kill(shim, syscall.SIGKILL)
		if i := slices.Index(args, "-id"); i >= 0 && i+1 < len(args) {
			e.t.Logf("the engine had lost container %s (its shim outlived it); removed", args[i+1])
			cgs, _ := filepath.Glob("/sys/fs/cgroup/*/docker/" + args[i+1])
			testutil.WaitFor(e.t, 10*time.Second, "the lost container's cgroups to go", func() bool {
				left := 0
				for _, cg := range cgs {
					if err := os.Remove(cg); err != nil && !errors.Is(err, os.ErrNotExist) {
						left++
					}
				}
				return left == 0
			})
		}
	}
}

// TestDockerEngineOutage kills the engine under a running server: API
// calls that need it answer 503 at once, the sandboxes keep running, and
// once the engine is back the server carries on without manual steps.
func TestDockerEngineOutage(t *testing.T) {
	requireDocker(t)
	t.Parallel()
	eng := startPrivateEngine(t)
	ref := eng.loadBusybox(t, nil)
	s := startServer(t, t.TempDir(), "--runtime", "docker", "--docker-host", "unix://"+eng.sock)
	c := s.client(t)
	a, err := c.CreateSandbox(ctx(t), ociCreate(ref), sdk.CreateOptions{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	xa, err := c.Sandbox(ctx(t), a.ID, sdk.SandboxOptions{})
	if err != nil {
		t.Fatal(err)
	}

	eng.kill9()
	start := time.Now()
	cctx, cancel := context.WithTimeout(ctx(t), 45*time.Second)
	_, err = c.CreateSandbox(cctx, ociCreate(ref), sdk.CreateOptions{})
	cancel()
	var ae *sdk.APIError
	if !errors.As(err, &ae) || ae.Status != 503 || !strings.Contains(ae.Message, "Docker engine") {
		t.Errorf("create without an engine = %d %v, want a 503 that names the engine", ae.Status, err)
	}
	if d := time.Since(start); d > 35*time.Second {
		t.Errorf("create without an engine took %v", d)
	}
	if got, err := c.GetSandbox(ctx(t), a.ID); err != nil || got.Status.State != api.StateRunning {
		t.Errorf("get during the outage = %+v, %v", got, err)
	}
	// The container outlives its engine (live restore), and so does execd.
	if out, _, code, err := xa.Run(ctx(t), "echo during-outage", sdk.CommandOptions{}); err != nil || code != 0 || out != "during-outage\n" {
		t.Errorf("command during the outage: %q %d %v", out, code, err)
	}

	eng.start()
	b, err := c.CreateSandbox(ctx(t), ociCreate(ref), sdk.CreateOptions{Wait: true})
	if err != nil {
		t.Fatalf("create after the engine came back: %v", err)
	}
	for _, id := range []string{a.ID, b.ID} {
		x, err := c.Sandbox(ctx(t), id, sdk.SandboxOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if out, _, _, err := x.Run(ctx(t), "echo back", sdk.CommandOptions{}); err != nil || out != "back\n" {
			t.Errorf("sandbox %s after the outage: %q %v", id, out, err)
		}
	}
	if err := c.PauseSandbox(ctx(t), a.ID); err != nil {
		t.Errorf("pause after the outage: %v", err)
	}
	for _, id := range []string{a.ID, b.ID} {
		if err := c.DeleteSandbox(ctx(t), id); err != nil {
			t.Errorf("delete after the outage: %v", err)
		}
	}
	if t.Failed() {
		t.Logf("dockerd log:\n%s", eng.log.String())
	}
}
