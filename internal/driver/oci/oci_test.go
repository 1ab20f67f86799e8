// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package oci

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/internal/driver"
	"github.com/corral-dev/corral/internal/driver/drivertest"
	"github.com/corral-dev/corral/internal/hostnet/netns"
	"github.com/corral-dev/corral/internal/insandbox"
	"github.com/corral-dev/corral/internal/testutil"
	"github.com/corral-dev/corral/internal/testutil/corraltest"
	"golang.org/x/sys/unix"
)

var corralBin string

func TestMain(m *testing.M) { os.Exit(testutil.NoLeaks(corraltest.RunWithCorral(m, &corralBin))) }

// requireRunc gates the tier and fails when runc is missing in CI.
func requireRunc(t *testing.T) {
	t.Helper()
	testutil.RequireRoot(t)
	if _, err := exec.LookPath("runc"); err != nil {
		t.Fatalf("runc is not installed (apt-get install runc): %v", err)
	}
}

func newTestDriver(t *testing.T, root string) *Driver {
	t.Helper()
	return newTestDriverWith(t, Config{Root: root})
}

// newTestDriverWith is a driver of cfg, with the test's corral binary and
// the host image allowed.
func newTestDriverWith(t *testing.T, cfg Config) *Driver {
	t.Helper()
	cfg.CorralBinary, cfg.AllowHostImage = corralBin, true
	d, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

func TestConformance(t *testing.T) {
	conformance(t, false)
}

// TestConformanceUserNamespaces: the suite with every sandbox in a user
// namespace of its own.
func TestConformanceUserNamespaces(t *testing.T) {
	conformance(t, true)
}

// TestConformanceRunsc: the suite with every sandbox under gVisor (the
// runsc tier), user namespaces on for the server's runc sandboxes.
func TestConformanceRunsc(t *testing.T) {
	requireRunsc(t)
	conformanceIn(t, true, api.IsolationRunsc)
}

// requireRunsc skips without the root tier, and fails in it without
// runsc (scripts/test.sh installs it).
func requireRunsc(t *testing.T) {
	t.Helper()
	requireRunc(t)
	if _, err := exec.LookPath("runsc"); err != nil {
		t.Fatalf("the runsc tier needs gVisor's runsc (scripts/runtimes.sh runsc installs it): %v", err)
	}
}

func conformance(t *testing.T, userns bool) { conformanceIn(t, userns, "") }

func conformanceIn(t *testing.T, userns bool, tier string) {
	requireRunc(t)
	root := t.TempDir()
	t.Cleanup(func() { _ = UnmountRunDir(root) })
	runtime := "runc"
	if tier == api.IsolationRunsc {
		runtime = "runsc"
	}
	drivertest.Run(t, drivertest.Harness{
		New: func(t *testing.T) driver.Driver {
			return newTestDriverWith(t, Config{Root: root, UserNamespaces: userns})
		},
		Spec: func(*testing.T) driver.Spec {
			return driver.Spec{Image: driver.Image{URI: HostImage}, Entrypoint: []string{"sleep", "infinity"}, Labels: map[string]string{"team": "a"}, Isolation: tier}
		},
		ExitSpec: func(_ *testing.T, code int) driver.Spec {
			return driver.Spec{Image: driver.Image{URI: HostImage}, Entrypoint: []string{"sh", "-c", fmt.Sprintf("sleep 0.5; exit %d", code)}, Isolation: tier}
		},
		Kill: func(t *testing.T, id string) {
			out, err := exec.Command(runtime, "--root", filepath.Join(root, "run", runtime), "delete", "--force", id).CombinedOutput()
			if err != nil {
				t.Fatalf("%s delete: %v %s", runtime, err, out)
			}
		},
	})
	assertNoLeaks(t, root)
}

// assertNoLeaks checks that nothing of any sandbox is left: runc
// containers, mounts, network namespaces, bundles and cgroups.
func assertNoLeaks(t *testing.T, root string) {
	t.Helper()
	out, err := exec.Command("runc", "--root", filepath.Join(root, "run", "runc"), "list", "-q").Output()
	if err != nil || strings.TrimSpace(string(out)) != "" {
		t.Errorf("leak: runc containers %q (%v)", out, err)
	}
	if _, err := os.Stat(filepath.Join(root, "run", "runsc")); err == nil {
		out, err := exec.Command("runsc", "--root", filepath.Join(root, "run", "runsc"), "list", "-quiet").Output()
		if err != nil || strings.TrimSpace(string(out)) != "" {
			t.Errorf("leak: runsc containers %q (%v)", out, err)
		}
	}
	// What a user namespace's create staged is under the stage directory.
	stage := (&Driver{stage: filepath.Join(hostStage, stageName(root))}).stageDir("")
	f, _ := os.Open("/proc/self/mountinfo")
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && (strings.HasPrefix(fields[4], root) && fields[4] != filepath.Join(root, "run") || strings.HasPrefix(fields[4], stage)) {
			t.Errorf("leak: mount %s", fields[4])
		}
	}
	if entries, err := os.ReadDir(stage); err == nil {
		t.Errorf("leak: the stage directory %s is left, with %d entries", stage, len(entries))
	}
	// Nor a host ID range.
	slots, _ := filepath.Glob(filepath.Join(hostStage, "slots", "*"))
	for _, s := range slots {
		if b, err := os.ReadFile(s); err == nil && strings.HasPrefix(string(b), root+"/") {
			t.Errorf("leak: the range %s of %s", filepath.Base(s), strings.TrimSpace(string(b)))
		}
	}
	for _, sub := range []string{"sandboxes", "run/bundles", "run/netns"} {
		if entries, _ := os.ReadDir(filepath.Join(root, sub)); len(entries) > 0 {
			t.Errorf("leak: %s has %d entries", sub, len(entries))
		}
	}
	cgroups, _ := filepath.Glob("/sys/fs/cgroup/*/corral/dt*")
	if len(cgroups) > 0 {
		// What is in them, and since when, says who left them.
		var why []string
		for _, cg := range cgroups {
			fi, _ := os.Stat(cg)
			procs, _ := os.ReadFile(filepath.Join(cg, "cgroup.procs"))
			line := cg
			if fi != nil {
				line += " made " + fi.ModTime().Format("15:04:05.000")
			}
			for _, p := range strings.Fields(string(procs)) {
				cmd, _ := os.ReadFile("/proc/" + p + "/cmdline")
				line += fmt.Sprintf(" pid %s %q", p, strings.ReplaceAll(string(cmd), "\x00", " "))
			}
			why = append(why, line)
		}
		t.Errorf("leak: cgroups (now %s):\n%s", time.Now().Format("15:04:05.000"), strings.Join(why, "\n"))
	}
	// Network namespaces are held by the driver's descriptors.
	fds, _ := os.ReadDir("/proc/self/fd")
	for _, fd := range fds {
		if link, _ := os.Readlink(filepath.Join("/proc/self/fd", fd.Name())); strings.HasPrefix(link, "net:[") {
			t.Errorf("leak: descriptor %s holds a network namespace (%s)", fd.Name(), link)
		}
	}
}

// TestSandboxMountsStayInItsNamespace: a running sandbox adds no mount to
// the server's mount namespace (each would be copied by every later
// create), its root file system is an overlay inside its own, and a new
// driver instance (a restart) finds its network namespace through PID 1.
func TestSandboxMountsStayInItsNamespace(t *testing.T) {
	requireRunc(t)
	root := t.TempDir()
	t.Cleanup(func() { _ = UnmountRunDir(root) })
	d := newTestDriver(t, root)
	mountsUnderRoot := func() []string {
		b, _ := os.ReadFile("/proc/self/mountinfo")
		var out []string
		for line := range strings.SplitSeq(string(b), "\n") {
			if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], root) && f[4] != filepath.Join(root, "run") {
				out = append(out, f[4])
			}
		}
		return out
	}
	spec := driver.Spec{ID: "dtmounts", Image: driver.Image{URI: HostImage}, Entrypoint: []string{"sleep", "infinity"}}
	h, err := d.Create(t.Context(), spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Destroy(context.Background(), spec.ID) })
	if m := mountsUnderRoot(); len(m) > 0 {
		t.Errorf("a running sandbox has mounts in the server's namespace: %v", m)
	}
	sb := d.running(spec.ID)
	if sb == nil {
		t.Fatal("the sandbox is not running")
	}
	// execd's port is out of the namespace's ephemeral range, so a
	// readiness ping is never given it and connects to itself.
	var reserved []byte
	if err := netns.Do(fmt.Sprintf("/proc/%d/ns/net", sb.pid), func() (err error) {
		reserved, err = os.ReadFile("/proc/sys/net/ipv4/ip_local_reserved_ports")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(reserved)); got != strconv.Itoa(insandbox.ExecdPort) {
		t.Errorf("the namespace's reserved ports are %q, want execd's", got)
	}
	inside, err := os.ReadFile(fmt.Sprintf("/proc/%d/mountinfo", sb.pid))
	if err != nil {
		t.Fatal(err)
	}
	if first := strings.Fields(strings.SplitN(string(inside), "\n", 2)[0]); len(first) < 9 || first[4] != "/" || !slices.Contains(first, "overlay") {
		t.Errorf("the sandbox's root is not its overlay: %q", first)
	}
	// A new instance, as after a restart: the namespace comes from PID 1.
	d2 := newTestDriver(t, root)
	if err := d2.Recover(t.Context(), h); err != nil {
		t.Fatal(err)
	}
	sb2 := d2.running(spec.ID)
	if sb2 == nil || sb2.netns == "" {
		t.Fatalf("the recovered sandbox holds no network namespace: %+v", sb2)
	}
	want, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", sb.pid))
	if got, _ := os.Readlink(sb2.netns); got != want {
		t.Errorf("the recovered namespace is %q, PID 1's is %q", got, want)
	}
	if ok, err := pingExecd(t.Context(), sb2.netns); !ok {
		t.Errorf("execd does not answer through the recovered namespace: %v", err)
	}
	if err := d2.Destroy(t.Context(), spec.ID); err != nil {
		t.Fatal(err)
	}
	d.forget(spec.ID)
	assertNoLeaks(t, root)
}

// TestHostImageSurvivesARestart: a new driver instance (a server restart)
// keeps the "host" image's bottom layer that running sandboxes have under
// their root overlay: their root still lists, a command still starts in
// their working directory, and the layer is the same directory.
func TestHostImageSurvivesARestart(t *testing.T) {
	requireRunc(t)
	root := t.TempDir()
	t.Cleanup(func() { _ = UnmountRunDir(root) })
	d := newTestDriver(t, root)
	spec := driver.Spec{ID: "dtrestart", Image: driver.Image{URI: HostImage}, Entrypoint: []string{"sleep", "infinity"}}
	if _, err := d.Create(t.Context(), spec); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Destroy(context.Background(), spec.ID) })
	list := func() string {
		t.Helper()
		// A fresh process resolves every path again: none is in its cache.
		out, err := exec.Command("runc", "--root", filepath.Join(root, "run", "runc"), "exec", "--cwd", "/work", spec.ID,
			"sh", "-c", "ls -a /; ls /etc").CombinedOutput()
		if err != nil {
			t.Fatalf("runc exec: %v: %s", err, out)
		}
		return string(out)
	}
	before := list()
	for _, want := range []string{"etc", "work", "tmp", "passwd", "ld.so.cache"} {
		if !slices.Contains(strings.Fields(before), want) {
			t.Fatalf("a new sandbox's root lacks %s:\n%s", want, before)
		}
	}
	d2 := newTestDriver(t, root)
	if d2.hostRoot != d.hostRoot {
		t.Errorf("a restart made a new host layer %s for the same host files (was %s)", d2.hostRoot, d.hostRoot)
	}
	if after := list(); after != before {
		t.Errorf("after a restart the running sandbox sees\n%s\nwhere it saw\n%s", after, before)
	}
	if err := d2.Destroy(t.Context(), spec.ID); err != nil {
		t.Fatal(err)
	}
	d.forget(spec.ID)
	assertNoLeaks(t, root)
}

// TestSweepHostSkeletons: a host layer that a bundle names stays, one
// that none names goes, as does the shared layer of older servers once no
// bundle names it; one being built by another instance is left alone.
func TestSweepHostSkeletons(t *testing.T) {
	root := t.TempDir()
	base, bundles, legacy := filepath.Join(root, "hostroots"), filepath.Join(root, "bundles"), filepath.Join(root, "hostroot")
	dirs := map[string]string{}
	for _, n := range []string{"current", "used", "unused", skeletonTemp + "x"} {
		dirs[n] = filepath.Join(base, n)
		if err := os.MkdirAll(filepath.Join(dirs[n], "etc"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	bundle := func(name, lower string) {
		if err := os.MkdirAll(filepath.Join(bundles, name), 0o700); err != nil {
			t.Fatal(err)
		}
		cfg := fmt.Sprintf(`{"mounts":[{"destination":"/","type":"overlay","options":["lowerdir=%s,upperdir=/u,workdir=/w"]}]}`, lower)
		if err := os.WriteFile(filepath.Join(bundles, name, "config.json"), []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	bundle("a", dirs["used"])
	if err := os.MkdirAll(filepath.Join(legacy, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	bundle("b", legacy)
	if err := sweepHostSkeletons(base, dirs["current"], legacy, bundles); err != nil {
		t.Fatal(err)
	}
	exists := func(p string) bool { _, err := os.Stat(p); return err == nil }
	for n, want := range map[string]bool{"current": true, "used": true, "unused": false, skeletonTemp + "x": true} {
		if exists(dirs[n]) != want {
			t.Errorf("%s: exists %v, want %v", n, !want, want)
		}
	}
	if !exists(legacy) {
		t.Error("the legacy layer went while a bundle names it")
	}
	if err := os.RemoveAll(filepath.Join(bundles, "b")); err != nil {
		t.Fatal(err)
	}
	if err := sweepHostSkeletons(base, dirs["current"], legacy, bundles); err != nil {
		t.Fatal(err)
	}
	if exists(legacy) {
		t.Error("the legacy layer stayed with no bundle naming it")
	}
}

// TestSandboxOpenFilesAreItsOwn: a sandbox's processes get the open-file
// limit of its spec — 1024, and a hard limit of SandboxOpenFilesHard or
// the server's, the lower — not the one of the server that started them
// (which raises its own to hold thousands of sandboxes' descriptors), and
// a process in there cannot raise its hard limit.
func TestSandboxOpenFilesAreItsOwn(t *testing.T) {
	requireRunc(t)
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	// The server's soft limit is its hard one (Go's runtime raises it):
	// what a sandbox would inherit.
	if lim.Cur <= SandboxOpenFiles {
		t.Fatalf("this process's open-file limit %d is no higher than a sandbox's: nothing to tell apart", lim.Cur)
	}
	hard := min(lim.Max, SandboxOpenFilesHard)
	root := t.TempDir()
	t.Cleanup(func() { _ = UnmountRunDir(root) })
	d := newTestDriver(t, root)
	spec := driver.Spec{ID: "dtnofile", Image: driver.Image{URI: HostImage}, Entrypoint: []string{"sleep", "infinity"}, ExecdToken: "nofile-token-0123456789"}
	if _, err := d.Create(t.Context(), spec); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Destroy(context.Background(), spec.ID) })
	sb := d.running(spec.ID)
	if sb == nil {
		t.Fatal("the sandbox is not running")
	}
	limits, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", sb.pid))
	if err != nil {
		t.Fatal(err)
	}
	// PID 1 is corral's, in Go, whose runtime raises its own soft limit
	// (and gives its children the one it started with): the hard one
	// tells here.
	var got []string
	for line := range strings.SplitSeq(string(limits), "\n") {
		if strings.HasPrefix(line, "Max open files") {
			got = strings.Fields(line)
		}
	}
	if len(got) != 6 || got[4] != strconv.FormatUint(hard, 10) {
		t.Errorf("the sandbox's PID 1 has %q, want the hard limit %d", got, hard)
	}
	// A command through execd (which, in Go, raises its own soft limit)
	// gets the sandbox's, and cannot raise its hard limit.
	out, status := execIn(t, d, spec.ID, spec.ExecdToken, fmt.Sprintf("ulimit -S -n; ulimit -H -n; ulimit -H -n %d 2>/dev/null && echo raised", hard+1))
	if status != 200 || out != fmt.Sprintf("%d\n%d\n", SandboxOpenFiles, hard) {
		t.Errorf("a command's open-file limits: %d %q, want %d and %d (and not raised)", status, out, SandboxOpenFiles, hard)
	}
	if err := d.Destroy(t.Context(), spec.ID); err != nil {
		t.Fatal(err)
	}
	d.forget(spec.ID)
	assertNoLeaks(t, root)
}

// TestPID1StartsWithOneP: corral init starts with GOMAXPROCS=1 (Go sizes
// its per-P caches before main runs) and nothing it starts sees that:
// not the entrypoint, not a command through execd; a sandbox whose
// request sets GOMAXPROCS keeps its own value everywhere.
func TestPID1StartsWithOneP(t *testing.T) {
	requireRunc(t)
	root := t.TempDir()
	t.Cleanup(func() { _ = UnmountRunDir(root) })
	d := newTestDriver(t, root)
	for _, c := range []struct {
		id, env, want string
	}{{"dtprocs", "", "unset"}, {"dtprocs3", "3", "3"}} {
		spec := driver.Spec{ID: c.id, Image: driver.Image{URI: HostImage}, ExecdToken: "procs-token-0123456789",
			Entrypoint: []string{"sh", "-c", `echo "entrypoint ${GOMAXPROCS-unset} ${CORRAL_EXECD_OWN_GOMAXPROCS-unset}"; exec sleep infinity`}}
		if c.env != "" {
			spec.Env = map[string]string{"GOMAXPROCS": c.env}
		}
		if _, err := d.Create(t.Context(), spec); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = d.Destroy(context.Background(), spec.ID) })
		sb := d.running(spec.ID)
		if sb == nil {
			t.Fatal("the sandbox is not running")
		}
		environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", sb.pid))
		if err != nil {
			t.Fatal(err)
		}
		want := "GOMAXPROCS=1"
		if c.env != "" {
			want = "GOMAXPROCS=" + c.env
		}
		if !slices.Contains(strings.Split(string(environ), "\x00"), want) {
			t.Errorf("%s: PID 1 started without %s", c.id, want)
		}
		out, status := execIn(t, d, spec.ID, spec.ExecdToken, `echo "command ${GOMAXPROCS-unset} ${CORRAL_EXECD_OWN_GOMAXPROCS-unset}"`)
		if status != 200 || out != "command "+c.want+" unset\n" {
			t.Errorf("%s: a command sees %d %q, want GOMAXPROCS %s and no marker", c.id, status, out, c.want)
		}
		var console []byte
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if console, _ = os.ReadFile(filepath.Join(d.diskDir(spec.ID), consoleFile)); strings.Contains(string(console), "entrypoint") {
				break
			}
		}
		if !strings.Contains(string(console), "entrypoint "+c.want+" unset\n") {
			t.Errorf("%s: the entrypoint printed %q, want GOMAXPROCS %s and no marker", c.id, console, c.want)
		}
		if err := d.Destroy(t.Context(), spec.ID); err != nil {
			t.Fatal(err)
		}
		d.forget(spec.ID)
	}
	assertNoLeaks(t, root)
}

// TestListLeavesOutCreatesInFlight: a sandbox whose create is still
// running is not listed (its bundle is there before its metadata, and a
// sweep would take it, ownerless, for an orphan: a warm sandbox was
// destroyed mid-create that way); once the create returns, it is. The
// List runs at the worst moment: the bundle made, nothing in it yet.
func TestListLeavesOutCreatesInFlight(t *testing.T) {
	requireRunc(t)
	root := t.TempDir()
	t.Cleanup(func() { _ = UnmountRunDir(root) })
	d := newTestDriver(t, root)
	spec := driver.Spec{ID: "dtinflight", Image: driver.Image{URI: HostImage}, Entrypoint: []string{"sleep", "infinity"}, ExecdToken: "inflight-token-0123456789"}
	var during []driver.Listing
	var listErr error
	bundleSeen := false
	d.bundleMade = func(id string) {
		if id != spec.ID {
			return
		}
		_, err := os.Stat(d.bundleDir(id))
		bundleSeen = err == nil
		during, listErr = d.List(t.Context())
	}
	if _, err := d.Create(t.Context(), spec); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Destroy(context.Background(), spec.ID) })
	if !bundleSeen || listErr != nil {
		t.Fatalf("the List during the create: bundle there %v, err %v", bundleSeen, listErr)
	}
	for _, l := range during {
		if l.ID == spec.ID {
			t.Fatalf("listed while its create runs: %+v", l)
		}
	}
	ls, err := d.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(ls) != 1 || ls[0].ID != spec.ID {
		t.Fatalf("after the create: %+v, want %s", ls, spec.ID)
	}
	if err := d.Destroy(t.Context(), spec.ID); err != nil {
		t.Fatal(err)
	}
	d.forget(spec.ID)
	assertNoLeaks(t, root)
}
