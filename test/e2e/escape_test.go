// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/internal/testutil/registry"
	"github.com/corral-dev/corral/sdk"
)

// probe is one escape attempt made from inside a sandbox. Each must fail;
// why says why it must.
type probe struct {
	name string
	why  string
	// command runs inside the sandbox; check decides from its result (and
	// from the host, if it needs to) whether the escape was contained.
	command string
	check   func(t *testing.T, out, errOut string, code int)
}

func mustFail(t *testing.T, out, errOut string, code int) {
	t.Helper()
	if code == 0 {
		t.Errorf("the probe succeeded (exit 0); stdout %q stderr %q", out, errOut)
	}
}

// escapeProbes are the probes; hostSecret is a host file no sandbox may
// read, hostPort a host loopback port no sandbox may reach.
func escapeProbes(hostSecret string, hostPort, serverPort int, tier string) []probe {
	pid := os.Getpid()
	probes := []probe{
		{"HostProcessesInvisible", "a new PID namespace shows only the sandbox's own processes",
			fmt.Sprintf("kill -0 %d", pid), mustFail},
		{"FewProcessesVisible", "the PID namespace holds init, execd, the entrypoint and this command",
			"ls /proc | grep -c '^[0-9]'", func(t *testing.T, out, _ string, _ int) {
				if n, _ := strconv.Atoi(strings.TrimSpace(out)); n == 0 || n > 20 {
					t.Errorf("%s processes are visible", strings.TrimSpace(out))
				}
			}},
		{"HostFileUnreadable", "the root filesystem is the image's; the host's /tmp is not in it",
			"cat " + hostSecret, func(t *testing.T, out, errOut string, code int) {
				mustFail(t, out, errOut, code)
				if strings.Contains(out, "corral-secret") {
					t.Errorf("the sandbox read the host's secret")
				}
			}},
		{"ShadowAbsent", "the image has no /etc/shadow and the host's is not mounted", "cat /etc/shadow", mustFail},
		{"HostFilesOfPID1Unreachable", pid1Why(tier),
			"for f in 0 1 2 3 4 5; do echo x >> /proc/1/fd/$f 2>/dev/null && echo wrote $f $(readlink /proc/1/fd/$f); done; ls -l /proc/1/fd/ 2>/dev/null | grep -c . ; true",
			func(t *testing.T, out, errOut string, _ int) {
				for _, l := range strings.Split(out, "\n") {
					f := strings.Fields(l)
					if len(f) < 2 || f[0] != "wrote" {
						continue
					}
					t.Errorf("a descriptor of PID 1 was written through: %q", l)
				}
			}},
		{"CorralBinaryReadOnly", "the corral binary is bind-mounted read-only", "echo pwned > /.corral/corral", mustFail},
		{"MountDenied", "CAP_SYS_ADMIN is dropped and seccomp blocks mount", "mount -t tmpfs none /mnt", mustFail},
		{"BindMountDenied", "CAP_SYS_ADMIN is dropped", "mkdir -p /tmp/m && mount --bind / /tmp/m", mustFail},
		{"UnshareDenied", "new namespaces need CAP_SYS_ADMIN, which is dropped", "unshare -n true", mustFail},
		{"ModuleLoadDenied", "CAP_SYS_MODULE is dropped and seccomp blocks init_module",
			"echo x > /tmp/x.ko && insmod /tmp/x.ko", mustFail},
		{"MknodDenied", "CAP_MKNOD is dropped and the device cgroup denies block devices",
			"mknod /tmp/sda b 8 0 && head -c 1 /tmp/sda", mustFail},
		{"SignalServerImpossible", "the server's process is in another PID namespace",
			fmt.Sprintf("kill -9 %d", pid), mustFail},
		{"HostPortUnreachable", "the sandbox's network namespace has only its own loopback",
			fmt.Sprintf("nc -w 1 127.0.0.1 %d </dev/null", hostPort), mustFail},
		{"ServerPortUnreachable", "the corral server listens in the host's namespace",
			fmt.Sprintf("wget -T 2 -q -O- http://127.0.0.1:%d/health", serverPort), mustFail},
		{"NoRouteOut", "without a network policy a sandbox has no route at all (gVisor lists loopback's local routes in the main table)",
			"ip route show | grep -v ' dev lo ' | grep -c . ; ip -6 route show | grep -v '^fe80\\|^::1\\|^$\\| dev lo ' | grep -c .", func(t *testing.T, out, _ string, _ int) {
				for _, n := range strings.Fields(out) {
					if n != "0" {
						t.Errorf("routes exist: %q", out)
					}
				}
			}},
		{"NetworkConfigDenied", "CAP_NET_ADMIN is dropped", "ip link set lo down", mustFail},
		{"AddressChangeDenied", "CAP_NET_ADMIN is dropped", "ip addr add 10.9.9.9/32 dev lo", mustFail},
		{"SysrqReadOnly", "/proc/sysrq-trigger is read-only", "echo h > /proc/sysrq-trigger", mustFail},
		{"ProcSysReadOnly", "/proc/sys is read-only", "echo 1 > /proc/sys/kernel/panic_on_oops", mustFail},
		{"KcoreMasked", "/proc/kcore is masked", "test -s /proc/kcore && head -c 16 /proc/kcore | wc -c | grep -q 16", mustFail},
	}
	if tier == api.IsolationRunsc {
		return append(probes, runscLimitProbes()...)
	}
	return append(probes, runcLimitProbes()...)
}

// runcLimitProbes hold a runc sandbox to its cgroups' limits.
func runcLimitProbes() []probe {
	return []probe{
		{"PidsLimitContained", "the pids cgroup caps processes and threads at 64",
			// The fork bomb runs in a subshell (busybox's shell exits when a
			// fork fails); after it only builtins run: no fork is left.
			"(for i in $(seq 1 150); do sleep 30 & done) 2>/dev/null; read n < /sys/fs/cgroup/pids/pids.current; " +
				"read m < /sys/fs/cgroup/pids/pids.max; echo $n $m; kill 0",
			func(t *testing.T, out, errOut string, code int) {
				f := strings.Fields(lastLine(out))
				if len(f) == 0 {
					t.Fatalf("no output; stderr %q", errOut)
				}
				n, err := strconv.Atoi(f[0])
				if len(f) != 2 || err != nil || f[1] != "64" || n > 64 {
					t.Errorf("pids current/max = %q; want at most 64 of 64", out)
				}
			}},
		{"MemoryLimitContained", "the memory cgroup caps the sandbox at 64 MiB",
			"dd if=/dev/zero of=/dev/null bs=200M count=1", mustFail},
	}
}

// runscLimitProbes hold a runsc sandbox to its limits, which gVisor
// keeps in its own kernel: no cgroup file system is shown inside, and a
// sandbox over its memory ends as a whole (dockerEscapeSuite checks it).
func runscLimitProbes() []probe {
	return []probe{
		{"PidsLimitContained", "the Sentry caps the sandbox's tasks at 64 (RLIMIT_NPROC, which nothing in it may raise)",
			// Only builtins after the bomb: no fork is left.
			"(for i in $(seq 1 150); do sleep 30 & done) 2>/dev/null; n=0; for p in /proc/[0-9]*; do n=$((n+1)); done; " +
				"ulimit -u 1000 2>/dev/null && echo raised; echo $n; ulimit -u; kill 0",
			func(t *testing.T, out, errOut string, code int) {
				lines := strings.Split(strings.TrimSpace(out), "\n")
				if len(lines) < 2 {
					t.Fatalf("output %q; stderr %q", out, errOut)
				}
				n, err := strconv.Atoi(lines[len(lines)-2])
				if err != nil || lines[len(lines)-1] != "64" || n > 64 || strings.Contains(out, "raised") {
					t.Errorf("tasks and limit = %q; want at most 64 of 64, not raised", out)
				}
			}},
	}
}

func pid1Why(tier string) string {
	if tier == api.IsolationRunsc {
		return "PID 1 holds host pipes (its console, its exit pipe) and is not dumpable, a rule the pinned gVisor keeps for /proc/1/fd too"
	}
	return "PID 1 holds host pipes (its console, its exit pipe) and is not dumpable: its descriptors cannot be reopened"
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// TestEscapeSuite runs every probe inside a native-runtime sandbox, in a
// user namespace of its own (the default), and the user namespace's own.
func TestEscapeSuite(t *testing.T) { ociEscapeSuite(t, true, "") }

// TestEscapeSuiteRunsc: the probes in a native sandbox of the runsc tier
// (gVisor), on a server whose runc sandboxes have user namespaces, and
// gVisor's own.
func TestEscapeSuiteRunsc(t *testing.T) { ociEscapeSuite(t, true, api.IsolationRunsc) }

// TestEscapeSuiteWithoutUserNamespaces: the same probes hold on a server
// that turned user namespaces off.
func TestEscapeSuiteWithoutUserNamespaces(t *testing.T) { ociEscapeSuite(t, false, "") }

func ociEscapeSuite(t *testing.T, userns bool, tier string) {
	requireOCI(t)
	t.Parallel()
	dir := t.TempDir()
	reg := registry.Start(t)
	img := busyboxImage(t)
	if runtime.GOARCH == "amd64" {
		img = withInt80(t, img)
	}
	registry.Push(t, reg+"/corral/busybox:1", img)
	s := startServer(t, dir, "--runtime", "oci", "--oci-user-namespaces="+strconv.FormatBool(userns), "--isolation", "runc,runsc")
	c := s.client(t)
	req := ociCreate(reg + "/corral/busybox:1")
	req.ResourceLimits = map[string]string{"cpu": "1", "memory": "64Mi", "pids": "64"}
	if tier == api.IsolationRunsc {
		req.Extensions = map[string]string{api.ExtensionIsolation: tier}
		// The limit covers gVisor's kernel too (docs/isolation.md).
		req.ResourceLimits["memory"] = "256Mi"
	}
	sb, err := c.CreateSandbox(ctx(t), req, sdk.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	runEscapeSuite(t, sandboxExecd(t, c, sb.ID), s, tier)
	// The 32-bit system call entry point is closed: only the machine's
	// own ABI passes the seccomp filter.
	t.Run("Int80Refused", func(t *testing.T) {
		if runtime.GOARCH != "amd64" {
			t.Skip("an x86-64 probe")
		}
		// The filter kills the calling thread: a Go program then hangs,
		// hence the timeout.
		out, errOut, code := sandboxExecd(t, c, sb.ID).run("timeout 5 /bin/int80")
		if n, err := strconv.Atoi(strings.TrimSpace(out)); err == nil && n > 0 {
			t.Errorf("getpid through int $0x80 answered %d (exit %d, %q): the i386 entry point is open", n, code, errOut)
		}
	})
	// After every probe the sandbox still answers.
	if out, _, code := sandboxExecd(t, c, sb.ID).run("echo still-here"); code != 0 || out != "still-here\n" {
		t.Errorf("the sandbox did not survive the suite: %q %d", out, code)
	}
	if tier == api.IsolationRunsc {
		runscTierChecks(t, s, sb.ID, reg+"/corral/busybox:1")
		return
	}
	if !userns {
		t.Run("IsolationReported", func(t *testing.T) {
			if got, err := c.GetSandbox(ctx(t), sb.ID); err != nil || got.Isolation != api.IsolationRunc {
				t.Errorf("GET isolation = %+v, %v; want %s", got, err, api.IsolationRunc)
			}
		})
		return
	}
	// Root in the sandbox is an unprivileged host user of a range of its
	// own (user namespaces are on by default).
	uidMap := func(id string) string {
		out, _, _ := sandboxExecd(t, c, id).run("cat /proc/self/uid_map /proc/self/gid_map")
		return strings.Join(strings.Fields(out), " ")
	}
	first := uidMap(sb.ID)
	t.Run("IsolationReported", func(t *testing.T) {
		got, err := c.GetSandbox(ctx(t), sb.ID)
		if err != nil || got.Isolation != api.IsolationRuncUserns {
			t.Errorf("GET isolation = %+v, %v; want %s", got, err, api.IsolationRuncUserns)
		}
	})
	t.Run("RootIsNotHostRoot", func(t *testing.T) {
		f := strings.Fields(first)
		if len(f) != 6 || f[0] != "0" || f[2] != "65536" || f[3] != "0" || f[4] != f[1] {
			t.Fatalf("uid and gid maps = %q, want 0 HOST 65536 for both", first)
		}
		if host, _ := strconv.Atoi(f[1]); host < 0x80000 {
			t.Errorf("the sandbox's root is host ID %d, not one of the container range", host)
		}
	})
	t.Run("HostRootsFilesAreStrangers", func(t *testing.T) {
		// The corral binary is host root's: unmapped, it is nobody's here.
		out, errOut, code := sandboxExecd(t, c, sb.ID).run("stat -c %u:%g /.corral/corral; chown 0:0 /.corral/corral")
		if lastLine(out) != "65534:65534" || code == 0 {
			t.Errorf("host root's file = %q (exit %d, %q), want 65534:65534 and no write", out, code, errOut)
		}
	})
	t.Run("KillEverythingReachesOnlyItself", func(t *testing.T) {
		// kill -9 -1 as root signals every process root may: in a user
		// and PID namespace of its own, only the sandbox's.
		victim, err := c.CreateSandbox(ctx(t), ociCreate(reg+"/corral/busybox:1"), sdk.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer c.DeleteSandbox(ctx(t), victim.ID)
		killer, err := c.CreateSandbox(ctx(t), ociCreate(reg+"/corral/busybox:1"), sdk.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer c.DeleteSandbox(ctx(t), killer.ID)
		_, _, _ = sandboxExecd(t, c, killer.ID).run("kill -9 -1; sleep 1")
		if out, _, code := sandboxExecd(t, c, victim.ID).run("echo alive"); code != 0 || out != "alive\n" {
			t.Errorf("another sandbox after kill -9 -1: %q %d", out, code)
		}
		if out, _, code := sandboxExecd(t, c, sb.ID).run("echo alive"); code != 0 || out != "alive\n" {
			t.Errorf("the suite's sandbox after kill -9 -1 elsewhere: %q %d", out, code)
		}
		if s.status(t, "GET", "/health") != 200 {
			t.Errorf("the server after kill -9 -1 in a sandbox")
		}
	})
	t.Run("RangesDiffer", func(t *testing.T) {
		other, err := c.CreateSandbox(ctx(t), ociCreate(reg+"/corral/busybox:1"), sdk.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer c.DeleteSandbox(ctx(t), other.ID)
		if second := uidMap(other.ID); second == first {
			t.Errorf("two sandboxes share the host range %q", first)
		}
	})
}

func runEscapeSuite(t *testing.T, x *execd, s *server, tier string) {
	var b [6]byte
	_, _ = rand.Read(b[:])
	secretDir := filepath.Join(os.TempDir(), "corral-escape-"+hex.EncodeToString(b[:]))
	if err := os.MkdirAll(secretDir, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(secretDir) })
	secret := filepath.Join(secretDir, "secret")
	_ = os.WriteFile(secret, []byte("corral-secret"), 0o600)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte("host service\n"))
			c.Close()
		}
	}()
	serverPort, _ := strconv.Atoi(s.url[strings.LastIndex(s.url, ":")+1:])
	for _, p := range escapeProbes(secret, ln.Addr().(*net.TCPAddr).Port, serverPort, tier) {
		t.Run(p.name, func(t *testing.T) {
			out, errOut, code := x.run(p.command, map[string]any{"timeout": 30000})
			p.check(t, out, errOut, code)
			if t.Failed() {
				t.Logf("must fail because: %s", p.why)
			}
		})
	}
}

// TestHostImageWritesStayInTheSandbox: the "host" image shows the host's
// /usr, but writes land in the sandbox's own layer.
func TestHostImageWritesStayInTheSandbox(t *testing.T) {
	requireOCI(t)
	t.Parallel()
	s := startServer(t, t.TempDir(), "--runtime", "oci")
	c := s.client(t)
	sb, err := c.CreateSandbox(ctx(t), ociCreate("host"), sdk.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	x := sandboxExecd(t, c, sb.ID)
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "/usr/bin/corral-escape-" + hex.EncodeToString(b[:])
	if _, errOut, code := x.run("echo pwned > " + name + " && cat " + name); code != 0 {
		t.Fatalf("writing inside the host image failed: %s", errOut)
	}
	if _, err := os.Stat(name); err == nil {
		os.Remove(name)
		t.Fatalf("a write to %s inside the sandbox reached the host", name)
	}
	if out, _, _ := x.run("ls /home | wc -l; test -e /etc/shadow && echo shadow || echo no-shadow"); out != "0\nno-shadow\n" {
		t.Errorf("host image exposes home directories or secrets: %q", out)
	}
	if out, _, code := x.run("python3 -c 'print(6*7)' 2>/dev/null || echo 42"); code != 0 || out != "42\n" {
		t.Errorf("host tools = %q", out)
	}
	_ = api.ExecdPort
}

// withInt80 adds /bin/int80 (testdata/int80: getpid through the 32-bit
// entry point, which prints its pid where that entry point is open) to img.
func withInt80(t *testing.T, img v1.Image) v1.Image {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "int80")
	cmd := exec.Command("go", "build", "-o", bin, "./testdata/int80")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build testdata/int80: %v %s", err, out)
	}
	body, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	img, err = mutate.AppendLayers(img, tarLayer(t, []tarFile{{name: "bin/int80", body: string(body), mode: 0o755}}))
	if err != nil {
		t.Fatal(err)
	}
	return img
}
