// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/internal/sandbox"
	"github.com/corral-dev/corral/internal/store"
	"github.com/corral-dev/corral/internal/testutil"
	"github.com/corral-dev/corral/sdk"
)

// chaos drives one data directory through server kills at random points
// of lifecycle calls, and checks after every restart what a user relies
// on: each sandbox acknowledged to a client is usable or failed with a
// reason, no call answers 500, and at the end nothing is left behind.
type chaos struct {
	dir, image string
	args       []string
	rng        *rand.Rand
	snapshots  bool
	// window is how long after the calls start the kill may come: about
	// the runtime's slowest call, so kills land everywhere in them. It
	// starts at a guess and grows on a loaded machine: to twice the
	// slowest call that finished, and by half whenever a kill cut every
	// call of its round (a window shorter than every create would leave
	// nothing to recover but interrupted creates).
	window time.Duration

	// mu guards the fields below, written by the calls in flight.
	mu sync.Mutex
	// acked are the sandboxes a create acknowledged, deleted those a
	// delete was sent for (one cut by the kill may still have happened);
	// seen is every sandbox ever listed.
	acked, deleted, seen map[string]bool
	calls                map[string]int
}

func newChaos(t *testing.T, dir, image string, args ...string) *chaos {
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("CORRAL_CHAOS_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("CORRAL_CHAOS_SEED=%q: %v", v, err)
		}
		seed = n
	}
	t.Logf("chaos seed %d (CORRAL_CHAOS_SEED=%d replays the same choices)", seed, seed)
	// A failed run may stop with no server up to delete what is left:
	// the runtime's own tools remove it then (registered first, so it
	// runs after the servers' cleanups).
	t.Cleanup(func() {
		if t.Failed() && strings.Contains(strings.Join(args, " "), "oci") {
			rescueOCI(t, dir)
		}
	})
	return &chaos{dir: dir, image: image, args: args, rng: rand.New(rand.NewPCG(seed, 0)), window: 300 * time.Millisecond,
		acked: map[string]bool{}, deleted: map[string]bool{}, seen: map[string]bool{}, calls: map[string]int{}}
}

// oneShot is a client that tries once: a kill must not be papered over
// by retries.
func oneShot(t *testing.T, url string) *sdk.Client {
	c, err := sdk.New(sdk.WithBaseURL(url), sdk.WithAPIKey(testKey), sdk.WithRetry(sdk.RetryPolicy{Attempts: 1}))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// check fails the test if err is a 500: a kill is the server's business,
// never a reason to answer "internal error".
func (ch *chaos) check(t *testing.T, what string, err error) {
	var ae *sdk.APIError
	if errors.As(err, &ae) && ae.Status >= 500 && ae.Status != 503 {
		t.Errorf("%s answered %d: %v", what, ae.Status, err)
	}
}

func (ch *chaos) create(ctx context.Context, t *testing.T, c *sdk.Client, policed bool) error {
	req := ociCreate(ch.image)
	if policed {
		req.NetworkPolicy = &api.NetworkPolicy{DefaultAction: "deny"}
	}
	sb, err := c.CreateSandbox(ctx, req, sdk.CreateOptions{})
	ch.check(t, "create", err)
	if err == nil {
		ch.mu.Lock()
		ch.acked[sb.ID] = true
		ch.mu.Unlock()
	}
	return err
}

// op runs one lifecycle call on sandbox id (or a create: policed ones
// have an egress enforcer, a process of their own to recover).
// It reports whether the call finished (well or not) before the kill.
func (ch *chaos) op(ctx context.Context, t *testing.T, c *sdk.Client, kind, id string, policed bool) bool {
	ch.mu.Lock()
	ch.calls[kind]++
	ch.mu.Unlock()
	start := time.Now()
	var err error
	switch kind {
	case "create":
		err = ch.create(ctx, t, c, policed)
	case "pause":
		err = c.PauseSandbox(ctx, id)
	case "resume":
		err = c.ResumeSandbox(ctx, id)
	case "renew":
		_, err = c.RenewSandbox(ctx, id, time.Now().Add(time.Hour))
	case "snapshot":
		_, err = c.CreateSnapshot(ctx, id, "chaos")
	case "fork":
		var res *api.ForkResponse
		if res, err = c.Fork(ctx, id, api.ForkRequest{Count: 2}); err == nil {
			ch.mu.Lock()
			for _, sb := range res.Sandboxes {
				ch.acked[sb.ID] = true
			}
			ch.mu.Unlock()
		}
	case "delete":
		ch.mu.Lock()
		ch.deleted[id] = true
		ch.mu.Unlock()
		err = c.DeleteSandbox(ctx, id)
	}
	ch.check(t, kind+" "+id, err)
	var ae *sdk.APIError
	if err != nil && !errors.As(err, &ae) {
		return false // cut by the kill
	}
	ch.mu.Lock()
	ch.window = max(ch.window, 2*time.Since(start))
	ch.mu.Unlock()
	return true
}

// settled waits until no sandbox is between states, then checks each:
// an acknowledged sandbox is still there; a running one runs commands; a
// failed or terminated one says why. It returns the live ones.
func (ch *chaos) settled(t *testing.T, c *sdk.Client) []string {
	t.Helper()
	var items []api.Sandbox
	testutil.WaitFor(t, 2*time.Minute, "every sandbox to settle after the restart", func() bool {
		l, err := c.ListSandboxes(ctx(t), sdk.ListOptions{PageSize: 200})
		ch.check(t, "list", err)
		if err != nil {
			return false
		}
		items = l.Items
		for _, sb := range items {
			switch sb.Status.State {
			case api.StatePending, api.StatePausing, api.StateResuming, api.StateStopping:
				return false
			}
		}
		return true
	})
	if ch.snapshots {
		ch.snapshotsSettled(t, c)
	}
	listed := map[string]api.Sandbox{}
	var live []string
	for _, sb := range items {
		listed[sb.ID] = sb
		ch.seen[sb.ID] = true
		switch sb.Status.State {
		case api.StateRunning:
			x, err := c.Sandbox(ctx(t), sb.ID, sdk.SandboxOptions{})
			if err != nil {
				t.Errorf("sandbox %s is Running but cannot be reached: %v", sb.ID, err)
				continue
			}
			var out string
			var code int
			// A sandbox just recovered may still be coming back.
			testutil.WaitFor(t, time.Minute, "a command in running sandbox "+sb.ID, func() bool {
				out, _, code, err = x.Run(ctx(t), "echo ok", sdk.CommandOptions{})
				return err == nil
			})
			if out != "ok\n" || code != 0 {
				t.Errorf("sandbox %s is Running but a command gave %q, exit %d", sb.ID, out, code)
			}
			live = append(live, sb.ID)
		case api.StatePaused:
			live = append(live, sb.ID)
		case api.StateFailed, api.StateTerminated:
			if sb.Status.Reason == "" {
				t.Errorf("sandbox %s is %s without a reason", sb.ID, sb.Status.State)
			}
		}
	}
	for id := range ch.acked {
		if _, ok := listed[id]; !ok && !ch.deleted[id] {
			// Not listed: it must at least be found, ended with a reason.
			sb, err := c.GetSandbox(ctx(t), id)
			ch.check(t, "get "+id, err)
			if err != nil || sb.Status.Reason == "" {
				t.Errorf("sandbox %s was acknowledged and never deleted, and is gone: %+v %v", id, sb, err)
			}
		}
	}
	return live
}

// snapshotsSettled waits until no snapshot is being made or deleted (a
// cut one is resumed or failed by recovery); a failed one says why.
func (ch *chaos) snapshotsSettled(t *testing.T, c *sdk.Client) []api.Snapshot {
	t.Helper()
	var items []api.Snapshot
	testutil.WaitFor(t, 2*time.Minute, "every snapshot to settle after the restart", func() bool {
		l, err := c.ListSnapshots(ctx(t), sdk.ListSnapshotsOptions{PageSize: 200})
		ch.check(t, "list snapshots", err)
		if err != nil {
			return false
		}
		items = l.Items
		for _, sn := range items {
			if sn.Status.State == api.SnapshotCreating || sn.Status.State == api.SnapshotDeleting {
				return false
			}
		}
		return true
	})
	for _, sn := range items {
		if sn.Status.State == api.SnapshotFailed && sn.Status.Reason == "" && sn.Status.Message == "" {
			t.Errorf("snapshot %s failed without a reason", sn.ID)
		}
	}
	return items
}

// serverKills kills the server kills times, each at a random point while
// one to three lifecycle calls run.
func (ch *chaos) serverKills(t *testing.T, kills int) {
	kinds := []string{"create", "create", "pause", "resume", "renew", "delete"}
	if ch.snapshots {
		kinds = append(kinds, "snapshot", "fork")
	}
	for range kills {
		s := startServer(t, ch.dir, ch.args...)
		live := ch.settled(t, s.client(t))
		c := oneShot(t, s.url)
		cctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		var wg sync.WaitGroup
		var finished atomic.Int64
		for range 1 + ch.rng.IntN(3) {
			kind := kinds[ch.rng.IntN(len(kinds))]
			if len(live) < 2 || len(live) >= 6 && (kind == "create" || kind == "fork") {
				kind = map[bool]string{true: "create", false: "delete"}[len(live) < 2]
			}
			id := ""
			if len(live) > 0 {
				id = live[ch.rng.IntN(len(live))]
			}
			policed := ch.rng.IntN(3) == 0
			wg.Go(func() {
				if ch.op(cctx, t, c, kind, id, policed) {
					finished.Add(1)
				}
			})
		}
		// The kill point: anywhere from before the calls arrive to after
		// the slowest is done.
		ch.mu.Lock()
		window := ch.window
		ch.mu.Unlock()
		time.Sleep(time.Duration(ch.rng.Int64N(int64(window))))
		s.kill9(t)
		wg.Wait()
		cancel()
		if finished.Load() == 0 {
			ch.window = min(ch.window*3/2, 20*time.Second)
		}
	}
	t.Logf("calls under kills: %v; acknowledged creates %d, deletes sent %d; kill window at the end %v", ch.calls, len(ch.acked), len(ch.deleted), ch.window)
}

// ttlWhileDown moves one live sandbox's expiry into the past while no
// server runs: the next server must end it, with the TTL as reason.
func (ch *chaos) ttlWhileDown(t *testing.T) string {
	st, err := store.Open(ctx(t), filepath.Join(ch.dir, "corral.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	all, err := st.LoadSandboxes(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, sb := range all {
		// A paused sandbox's time to live does not run down: a Running one.
		if sb.Status.State.String() == api.StateRunning {
			sb.ExpiresAt = time.Now().Add(-time.Second)
			if err := st.UpdateSandbox(ctx(t), sb, nil); err != nil {
				t.Fatal(err)
			}
			return sb.ID
		}
	}
	t.Fatal("no running sandbox left to expire")
	return ""
}

// finish restarts the server once more (with a TTL that passed while it
// was down), deletes everything, stops it and checks for leaks.
func (ch *chaos) finish(t *testing.T, leaks func(t *testing.T, ids map[string]bool)) {
	s := startServer(t, ch.dir, ch.args...)
	ch.settled(t, s.client(t))
	// The kills may have left no sandbox Running (every create cut, the
	// rest paused): one is made, with no kill, for the TTL to end.
	if running, err := s.client(t).ListSandboxes(ctx(t), sdk.ListOptions{States: []string{api.StateRunning}}); err != nil || running.Pagination.TotalItems == 0 {
		ch.check(t, "create", ch.create(ctx(t), t, s.client(t), false))
	}
	s.stop(t)
	expired := ch.ttlWhileDown(t)
	s = startServer(t, ch.dir, ch.args...)
	c := s.client(t)
	testutil.WaitFor(t, time.Minute, "the sandbox whose TTL passed to end", func() bool {
		sb, err := c.GetSandbox(ctx(t), expired)
		return err == nil && sb.Status.State == api.StateTerminated
	})
	if sb, _ := c.GetSandbox(ctx(t), expired); sb.Status.Reason != "ttl_expiry" {
		t.Errorf("the expired sandbox ended with reason %q", sb.Status.Reason)
	}
	ch.settled(t, c)
	s.deleteAll(t)
	if ch.snapshots {
		for _, sn := range ch.snapshotsSettled(t, c) {
			ch.check(t, "delete snapshot", c.DeleteSnapshot(ctx(t), sn.ID))
		}
		testutil.WaitFor(t, time.Minute, "every snapshot to be gone", func() bool {
			l, err := c.ListSnapshots(ctx(t), sdk.ListSnapshotsOptions{PageSize: 200})
			return err == nil && len(l.Items) == 0
		})
	}
	testutil.WaitFor(t, time.Minute, "every sandbox to be gone", func() bool {
		l, err := c.ListSandboxes(ctx(t), sdk.ListOptions{PageSize: 200})
		if err != nil {
			return false
		}
		for _, sb := range l.Items {
			if sb.Status.State != api.StateTerminated && sb.Status.State != api.StateFailed {
				return false
			}
		}
		return true
	})
	s.stop(t)
	ch.noLeaks(t, leaks)
}

// noLeaks runs the runtime's leak check on every sandbox seen, once no
// server runs: nothing started for the data directory outlives the
// server either (no enforcer, forwarder or runc).
func (ch *chaos) noLeaks(t *testing.T, leaks func(t *testing.T, ids map[string]bool)) {
	for id := range ch.acked {
		ch.seen[id] = true
	}
	leaks(t, ch.seen)
	for id := range ch.seen {
		if name := vethName(id); vethExists(name) {
			t.Errorf("leak: veth %s of sandbox %s", name, id)
		}
	}
	for _, pid := range pidsWhere(func(args []string) bool { return strings.Contains(strings.Join(args, " "), ch.dir) }) {
		t.Errorf("leak: process %d (%s) still runs for the data directory", pid, strings.Join(cmdline(pid), " "))
	}
}

// ociLeaks: no runc container, mount, bundle, namespace file or cgroup of
// the native runtime is left in dir.
func ociLeaks(dir string) func(t *testing.T, ids map[string]bool) {
	return func(t *testing.T, ids map[string]bool) {
		root := filepath.Join(dir, "oci")
		out, err := exec.Command("runc", "--root", filepath.Join(root, "run", "runc"), "list", "-q").Output()
		if err != nil || strings.TrimSpace(string(out)) != "" {
			t.Errorf("leak: runc containers %q (%v)", out, err)
		}
		mounts, _ := os.ReadFile("/proc/self/mountinfo")
		for _, line := range strings.Split(string(mounts), "\n") {
			if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], root) && f[4] != filepath.Join(root, "run") {
				t.Errorf("leak: mount %s", f[4])
			}
		}
		for _, sub := range []string{"sandboxes", "run/bundles", "run/netns", "snapshots"} {
			if entries, _ := os.ReadDir(filepath.Join(root, sub)); len(entries) > 0 {
				t.Errorf("leak: %s has %d entries", sub, len(entries))
			}
		}
		for id := range ids {
			if cg, _ := filepath.Glob("/sys/fs/cgroup/*/corral/" + id + "*"); len(cg) > 0 {
				t.Errorf("leak: cgroups %v", cg)
			}
		}
	}
}

// rescueOCI removes, with runc and umount, what a failed test left of
// the native runtime's sandboxes in dir.
func rescueOCI(t *testing.T, dir string) {
	runcRoot := filepath.Join(dir, "oci", "run", "runc")
	out, _ := exec.Command("runc", "--root", runcRoot, "list", "-q").Output()
	for _, id := range strings.Fields(string(out)) {
		t.Logf("rescue: runc delete --force %s", id)
		_ = exec.Command("runc", "--root", runcRoot, "delete", "--force", id).Run()
	}
	mounts, _ := os.ReadFile("/proc/self/mountinfo")
	var under []string
	for _, line := range strings.Split(string(mounts), "\n") {
		if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], dir+"/") {
			under = append(under, f[4])
		}
	}
	slices.Sort(under)
	for i := len(under) - 1; i >= 0; i-- { // deepest first
		_ = syscall.Unmount(under[i], syscall.MNT_DETACH)
	}
}

// vethName is the host side of a policed sandbox's veth on the uplink
// (this machine's namespace): "cr" and the first 12 hex digits of its ID.
func vethName(id string) string { return "cr" + strings.ReplaceAll(id, "-", "")[:12] }

func vethExists(name string) bool {
	_, err := net.InterfaceByName(name)
	return err == nil
}

// cmdline is a process's arguments (nil once it is gone).
func cmdline(pid int) []string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil || len(b) == 0 {
		return nil
	}
	return strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
}

// pidsWhere lists the processes whose arguments match.
func pidsWhere(match func(args []string) bool) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		if args := cmdline(pid); args != nil && match(args) {
			out = append(out, pid)
		}
	}
	return out
}

// TestChaosServerKillsOCI: 30 kill -9s of the server on the native
// runtime, at random points of creates (some with an egress enforcer),
// pauses, resumes, renews, snapshots, forks and deletes, then a TTL that
// passes while it is down, and a leak check (snapshot layers included).
func TestChaosServerKillsOCI(t *testing.T) {
	requireOCI(t)
	t.Parallel()
	ref := busyboxInRegistry(t)
	dir := t.TempDir()
	ch := newChaos(t, dir, ref, "--runtime", "oci")
	ch.snapshots = true
	ch.serverKills(t, 30)
	ch.finish(t, ociLeaks(dir))
}

// TestChaosServerKillsDocker: the same 30 kills on the docker runtime; at the end no container of these
// sandboxes (egress sidecars included) and no snapshot image is left.
func TestChaosServerKillsDocker(t *testing.T) {
	cli := requireDocker(t)
	t.Parallel()
	ref := registryImage(t, cli)
	dir := t.TempDir()
	ch := newChaos(t, dir, ref, "--runtime", "docker")
	ch.snapshots, ch.window = true, 1500*time.Millisecond
	ch.serverKills(t, 30)
	ch.finish(t, func(t *testing.T, ids map[string]bool) {
		all := make([]string, 0, len(ids))
		for id := range ids {
			all = append(all, id)
		}
		if left := ourContainers(t, cli, all...); len(left) > 0 {
			t.Errorf("leak: containers %v", left)
		}
		imgs, err := cli.ImageList(context.Background(), client.ImageListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, img := range imgs.Items {
			if id := img.Labels[sandbox.LabelSandboxID]; ids[id] {
				t.Errorf("leak: snapshot image %v of sandbox %s", img.RepoTags, id)
			}
		}
	})
}

// runcState is the pid runc knows for a sandbox's container.
func runcPid(t *testing.T, dir, id string) int {
	t.Helper()
	out, err := exec.Command("runc", "--root", filepath.Join(dir, "oci", "run", "runc"), "state", id).Output()
	if err != nil {
		t.Fatalf("runc state %s: %v", id, err)
	}
	var st struct{ Pid int }
	if err := json.Unmarshal(out, &st); err != nil || st.Pid <= 0 {
		t.Fatalf("runc state %s = %s (%v)", id, out, err)
	}
	return st.Pid
}

func parentOf(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// pid (comm) state ppid ...: comm may hold spaces, so after ')'.
	rest := string(b)[strings.LastIndexByte(string(b), ')')+1:]
	f := strings.Fields(rest)
	if len(f) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}

func hasArg(args []string, want string) bool {
	for _, a := range args {
		if a == want || strings.HasSuffix(a, "/"+want) {
			return true
		}
	}
	return false
}

// mkPoliced creates a sandbox behind an egress enforcer.
func mkPoliced(t *testing.T, c *sdk.Client, image string, ch *chaos) string {
	req := ociCreate(image)
	req.NetworkPolicy = &api.NetworkPolicy{DefaultAction: "deny"}
	sb, err := c.CreateSandbox(ctx(t), req, sdk.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ch.acked[sb.ID] = true
	return sb.ID
}

// processKills makes a plain and a policed sandbox on s and kills, under
// the running server, the plain one's execd from inside (PID 1 serves
// it, which code in the sandbox cannot kill),
// the policed one's egress enforcer (the server must start it again, its
// API answering with the policy) and the plain one's init (the sandbox
// must end, with a reason). initPid finds a sandbox's PID 1 on the host.
func (ch *chaos) processKills(t *testing.T, s *server, initPid func(t *testing.T, id string) int) {
	c := s.client(t)
	mk := func(policy bool) string {
		req := ociCreate(ch.image)
		if policy {
			req.NetworkPolicy = &api.NetworkPolicy{DefaultAction: "deny"}
		}
		sb, err := c.CreateSandbox(ctx(t), req, sdk.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ch.acked[sb.ID] = true
		return sb.ID
	}
	policed, plain := mk(true), mk(false)
	t.Run("execd", func(t *testing.T) {
		// execd is PID 1 (corral init serves it): from the host, killing
		// it is killing init (below). From inside, the sandbox's code
		// cannot: the kernel drops SIGKILL and SIGSTOP sent to its
		// namespace's init from within.
		x := sandboxExecd(t, c, plain)
		if _, errOut, code := x.run("kill -9 1; kill -STOP 1; sleep 0.2; echo still"); code != 0 {
			t.Fatalf("kill from inside: exit %d %q", code, errOut)
		}
		if out, _, code := x.run("echo alive"); code != 0 || out != "alive\n" {
			t.Errorf("execd after the sandbox tried to kill it: %q exit %d", out, code)
		}
		ch.settled(t, c)
	})
	t.Run("enforcer", func(t *testing.T) {
		isEnforcer := func(args []string) bool {
			return len(args) > 1 && args[1] == "egress" && strings.Contains(strings.Join(args, " "), "--sandbox-id "+policed)
		}
		old := pidsWhere(isEnforcer)
		if len(old) != 1 {
			t.Fatalf("enforcers of %s: %v", policed, old)
		}
		_ = syscall.Kill(old[0], syscall.SIGKILL)
		testutil.WaitFor(t, time.Minute, "the server to start the enforcer again", func() bool {
			now := pidsWhere(isEnforcer)
			return len(now) == 1 && now[0] != old[0]
		})
		eg, err := c.Egress(ctx(t), policed, sdk.SandboxOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var pol *api.EgressPolicyStatus
		testutil.WaitFor(t, time.Minute, "the restarted enforcer's API", func() bool {
			pol, err = eg.Policy(ctx(t))
			ch.check(t, "egress policy", err)
			return err == nil
		})
		if pol == nil || pol.Policy == nil || pol.Policy.DefaultAction != "deny" {
			t.Errorf("egress policy after the enforcer's restart: %+v", pol)
		}
		ch.settled(t, c)
	})
	t.Run("init", func(t *testing.T) {
		_ = syscall.Kill(initPid(t, plain), syscall.SIGKILL)
		testutil.WaitFor(t, time.Minute, "the sandbox whose init died to end", func() bool {
			sb, err := c.GetSandbox(ctx(t), plain)
			ch.check(t, "get", err)
			return err == nil && (sb.Status.State == api.StateTerminated || sb.Status.State == api.StateFailed)
		})
		if sb, _ := c.GetSandbox(ctx(t), plain); sb.Status.Reason == "" {
			t.Errorf("the sandbox whose init was killed ended without a reason: %+v", sb.Status)
		}
		ch.deleted[plain] = true
		ch.check(t, "delete", c.DeleteSandbox(ctx(t), plain))
	})
}

// TestChaosSandboxProcessesOCI kills what runs beside the server for a
// sandbox: its execd from inside (it is PID 1), its egress enforcer (the server
// restarts it), its init (the sandbox ends, with a reason), and runc in
// the middle of creates (the create fails with a reason and leaves
// nothing). No call answers 500 and nothing leaks.
func TestChaosSandboxProcessesOCI(t *testing.T) {
	requireOCI(t)
	t.Parallel()
	ref := busyboxInRegistry(t)
	dir := t.TempDir()
	ch := newChaos(t, dir, ref, "--runtime", "oci")
	s := startServer(t, dir, ch.args...)
	c := s.client(t)
	ch.processKills(t, s, func(t *testing.T, id string) int { return runcPid(t, dir, id) })
	// The leak check's veth names are right: a policed sandbox has one.
	vethOf := mkPoliced(t, c, ref, ch)
	if !vethExists(vethName(vethOf)) {
		t.Errorf("no veth %s for policed sandbox %s: the veth leak check would prove nothing", vethName(vethOf), vethOf)
	}
	t.Run("runc", func(t *testing.T) {
		runcRoot := filepath.Join(dir, "oci", "run", "runc")
		isRunc := func(args []string) bool { return len(args) > 0 && hasArg(args[:1], "runc") && hasArg(args, runcRoot) }
		killed := 0
		for attempt := 0; attempt < 40 && killed < 5; attempt++ {
			done := make(chan error, 1)
			go func() {
				sb, err := oneShot(t, s.url).CreateSandbox(ctx(t), ociCreate(ref), sdk.CreateOptions{})
				if err == nil {
					ch.mu.Lock()
					ch.acked[sb.ID] = true
					ch.mu.Unlock()
				}
				done <- err
			}()
			hit := false
		wait:
			for {
				select {
				case err := <-done:
					ch.check(t, "create with runc killed", err)
					if hit && err == nil {
						t.Logf("runc was killed after it had done its part: the create succeeded")
					}
					break wait
				default:
					for _, pid := range pidsWhere(isRunc) {
						if syscall.Kill(pid, syscall.SIGKILL) == nil {
							hit = true
						}
					}
				}
			}
			if hit {
				killed++
			}
		}
		if killed == 0 {
			t.Fatalf("no runc was caught in 40 creates; the test proves nothing")
		}
		t.Logf("runc killed during %d creates", killed)
		ch.settled(t, c)
	})
	s.deleteAll(t)
	s.stop(t)
	ch.noLeaks(t, ociLeaks(dir))
}

// dockerInitPid is the host pid of a Docker sandbox's PID 1.
func dockerInitPid(t *testing.T, cli *client.Client, id string) int {
	t.Helper()
	res, err := cli.ContainerInspect(context.Background(), "corral-"+id, client.ContainerInspectOptions{})
	if err != nil || res.Container.State == nil || res.Container.State.Pid <= 0 {
		t.Fatalf("inspect %s: %v", id, err)
	}
	return res.Container.State.Pid
}

// TestChaosSandboxProcessesDocker is TestChaosSandboxProcessesOCI on the
// docker runtime: execd (from inside), the egress enforcer and init are
// killed under a running server.
func TestChaosSandboxProcessesDocker(t *testing.T) {
	cli := requireDocker(t)
	t.Parallel()
	ref := registryImage(t, cli)
	dir := t.TempDir()
	ch := newChaos(t, dir, ref, "--runtime", "docker")
	s := startServer(t, dir, ch.args...)
	ch.processKills(t, s, func(t *testing.T, id string) int { return dockerInitPid(t, cli, id) })
	s.deleteAll(t)
	s.stop(t)
	ch.noLeaks(t, func(t *testing.T, ids map[string]bool) {
		all := make([]string, 0, len(ids))
		for id := range ids {
			all = append(all, id)
		}
		if left := ourContainers(t, cli, all...); len(left) > 0 {
			t.Errorf("leak: containers %v", left)
		}
	})
}

// TestChaosDockerEngineKills kills or stops a (private) Docker engine in the middle
// of creates: each create answers (503 while the engine is gone, or
// success), and once the engine is back every sandbox is usable or ended
// with a reason, and deleting them all leaves no container.
func TestChaosDockerEngineKills(t *testing.T) {
	requireDocker(t)
	t.Parallel()
	eng := startPrivateEngine(t)
	ref := eng.loadBusybox(t, nil)
	dir := t.TempDir()
	ch := newChaos(t, dir, ref, "--runtime", "docker", "--docker-host", "unix://"+eng.sock)
	s := startServer(t, dir, ch.args...)
	c := s.client(t)
	cut, made := 0, 0
	for round := 0; round < 5 || cut < 2 && round < 20; round++ {
		done := make(chan error, 1)
		go func() {
			sb, err := oneShot(t, s.url).CreateSandbox(ctx(t), ociCreate(ref), sdk.CreateOptions{})
			if err == nil {
				ch.mu.Lock()
				ch.acked[sb.ID] = true
				ch.mu.Unlock()
			}
			done <- err
		}()
		// Killed without warning on even rounds, stopped (SIGTERM, the
		// engine's own shutdown) on odd ones.
		how := "killed"
		time.Sleep(time.Duration(ch.rng.Int64N(int64(600 * time.Millisecond))))
		if round%2 == 0 {
			eng.kill9()
		} else {
			how = "stopped"
			eng.stopDockerd()
		}
		select {
		case err := <-done:
			ch.check(t, "create with the engine "+how, err)
			if err != nil {
				cut++
			} else {
				made++
			}
		case <-time.After(2 * time.Minute):
			t.Fatal("a create with its engine gone did not answer in 2 minutes")
		}
		eng.start()
		ch.settled(t, c)
	}
	t.Logf("engine killed or stopped during %d creates that failed and %d that were done first", cut, made)
	if cut == 0 {
		t.Fatal("no create was cut by the engine's kill or stop; the test proves nothing")
	}
	s.deleteAll(t)
	testutil.WaitFor(t, 3*time.Minute, "no container of the sandboxes to be left", func() bool {
		l, err := eng.client().ContainerList(context.Background(), client.ContainerListOptions{All: true})
		if err != nil {
			return false
		}
		return len(l.Items) == 0
	})
	s.stop(t)
	if t.Failed() {
		t.Logf("dockerd log:\n%s", eng.log.String())
	}
}
