// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/moby/moby/client"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/internal/driver/oci"
	"github.com/corral-dev/corral/internal/egress/launch"
	"github.com/corral-dev/corral/internal/testutil"
	"github.com/corral-dev/corral/internal/testutil/netlab"
	"github.com/corral-dev/corral/internal/testutil/registry"
	"github.com/corral-dev/corral/sdk"
)

// The hostile-sandbox suite: code in a sandbox (and the tenant that owns
// it) attacks the host, the server and the other tenants the way a
// hostile one would, and each attack must fail while another tenant's
// creates, commands, exit codes and policy changes keep working, during
// the attack and after it. docs/security.md lists what is covered.

// hostileRig is a server under attack.
type hostileRig struct {
	s        *server
	dir      string
	runtime  string
	image    string
	attacker *sdk.Client
	victim   *sdk.Client
	// refs are the images the rig's sandboxes used, which a Docker
	// engine keeps: removed at the end.
	refs []string
}

// Hosts of the rig's world (network namespaces the test made): one on a
// public-looking address, and two on private ones, as a host's LAN or VPC
// would have them.
const (
	hostilePrivate    = "10.77.0.10"
	hostilePrivateLAN = "192.168.200.10"
)

func newHostileRig(t *testing.T, runtime string, args ...string) *hostileRig {
	t.Helper()
	dir := t.TempDir()
	// Sandboxes with a policy go out through a world the test made, never
	// through this machine's real network.
	w := netlab.NewWorld(t)
	for _, a := range []string{hostilePrivate, hostilePrivateLAN} {
		if out, err := exec.Command("ip", "-n", w.World, "addr", "add", a+"/32", "dev", "lo").CombinedOutput(); err != nil {
			t.Fatalf("ip addr add: %v %s", err, out)
		}
	}
	for _, a := range []string{netlab.WorldWeb, hostilePrivate, hostilePrivateLAN} {
		netlab.ServeHTTPIn(t, w.World, a+":80", http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			if r.Host == "evil.test" {
				_, _ = io.WriteString(rw, "the evil site on a shared address\n")
				return
			}
			_, _ = io.WriteString(rw, "reached "+a+"\n")
		}))
	}
	netlab.ServeDNS(t, w.World, netlab.WorldDNS+":53", map[string]string{
		"public.test.": netlab.WorldWeb, "evil.test.": netlab.WorldWeb, "internal.test.": hostilePrivate, "rebind.test.": hostilePrivateLAN,
	})
	args = append([]string{"--egress-uplink-netns", netlab.NetnsPath(w.Uplink), "--egress-subnet", "10.219.0.0/24",
		"--egress-upstream", netlab.WorldDNS + ":53",
		"--max-memory", "4Gi", "--max-cpu", "2", "--max-pids", "8192", "--default-cpu", "1"}, args...)
	if runtime == "oci" {
		args = append(args, "--max-disk", "8Gi")
	}
	if runtime == "oci" || runtime == "docker" {
		args = append(args, "--isolation", "runc,runsc")
	}
	reg := registry.Start(t)
	image := reg + "/corral/busybox:1"
	registry.Push(t, image, busyboxImage(t))
	s := startServer(t, dir, append([]string{"--runtime", runtime}, args...)...)
	admin := s.client(t)
	h := &hostileRig{s: s, dir: dir, runtime: runtime, image: image}
	for _, who := range []struct {
		tenant string
		c      **sdk.Client
	}{{"attacker", &h.attacker}, {"victim", &h.victim}} {
		k, err := admin.CreateAPIKey(ctx(t), api.CreateAPIKeyRequest{Tenant: who.tenant, Name: who.tenant})
		if err != nil {
			t.Fatal(err)
		}
		if *who.c, err = sdk.New(sdk.WithBaseURL(s.url), sdk.WithAPIKey(k.Key)); err != nil {
			t.Fatal(err)
		}
	}
	// Before the server stops: every tenant's sandboxes are deleted, and
	// nothing of them may be left on the machine.
	h.refs = append(h.refs, image)
	var cli *client.Client
	if runtime == "docker" {
		cli = requireDocker(t)
	}
	t.Cleanup(func() {
		for _, c := range []*sdk.Client{h.attacker, h.victim} {
			deleteEvery(t, c)
		}
		if cli != nil {
			for _, ref := range h.refs {
				_, _ = cli.ImageRemove(context.WithoutCancel(t.Context()), ref, client.ImageRemoveOptions{Force: true, PruneChildren: true})
			}
		}
		if runtime == "oci" {
			for _, sub := range []string{"sandboxes", "run/bundles"} {
				d := filepath.Join(dir, "oci", sub)
				testutil.WaitFor(t, time.Minute, "no sandbox left in "+d, func() bool {
					e, err := os.ReadDir(d)
					return err == nil && len(e) == 0
				})
			}
		}
	})
	return h
}

// deleteEvery deletes every sandbox, snapshot and named volume c's
// tenant has.
func deleteEvery(t *testing.T, c *sdk.Client) {
	t.Helper()
	cctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), time.Minute)
	defer cancel()
	if snaps, err := c.ListSnapshots(cctx, sdk.ListSnapshotsOptions{}); err == nil {
		for _, sn := range snaps.Items {
			if err := c.DeleteSnapshot(cctx, sn.ID); err != nil && !errors.Is(err, sdk.ErrNotFound) {
				t.Errorf("cleanup: delete snapshot %s: %v", sn.ID, err)
			}
		}
	}
	list, err := c.ListSandboxes(cctx, sdk.ListOptions{PageSize: 200})
	if err != nil {
		t.Errorf("cleanup: list: %v", err)
		return
	}
	for _, sb := range list.Items {
		if err := c.DeleteSandbox(cctx, sb.ID); err != nil && !errors.Is(err, sdk.ErrNotFound) {
			t.Errorf("cleanup: delete %s: %v", sb.ID, err)
		}
	}
	// Named volumes outlive their sandboxes (a sized one is a mounted
	// file system of its own on the native runtime).
	vols, err := c.ListVolumes(cctx)
	if err != nil && !errors.Is(err, sdk.ErrNotImplemented) {
		t.Errorf("cleanup: list volumes: %v", err)
	}
	for _, v := range vols {
		if err := c.DeleteVolume(cctx, v.Name); err != nil && !errors.Is(err, sdk.ErrNotFound) {
			t.Errorf("cleanup: delete volume %s: %v", v.Name, err)
		}
	}
}

// create makes a sandbox of the rig's image for c.
func (h *hostileRig) create(t *testing.T, c *sdk.Client, mutate func(*api.CreateSandboxRequest), entry ...string) string {
	t.Helper()
	req := ociCreate(h.image, entry...)
	if mutate != nil {
		mutate(&req)
	}
	sb, err := c.CreateSandbox(ctx(t), req, sdk.CreateOptions{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	return sb.ID
}

// victimUnaffected is what another tenant must still be able to do: make
// a sandbox and run a command in it, learn the exit code of one whose
// entrypoint fails, and change a sandbox's network policy.
func (h *hostileRig) victimUnaffected(t *testing.T) {
	t.Helper()
	c := h.victim
	id := h.create(t, c, nil)
	if out, _, code := sandboxExecd(t, c, id).run("echo victim-ok"); code != 0 || out != "victim-ok\n" {
		t.Errorf("the victim's command = %q, exit %d", out, code)
	}
	h.wantExitCode(t, c, 7)
	pid := h.create(t, c, func(r *api.CreateSandboxRequest) {
		r.NetworkPolicy = &api.NetworkPolicy{DefaultAction: "deny"}
	})
	eg, err := c.Egress(ctx(t), pid, sdk.SandboxOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eg.AddRules(ctx(t), api.NetworkRule{Action: "allow", Target: "victim.example"}); err != nil {
		t.Errorf("the victim's policy change: %v", err)
	} else if st, err := eg.Policy(ctx(t)); err != nil || st.Policy == nil || len(st.Policy.Egress) != 1 {
		t.Errorf("the victim's policy after the change = %+v, %v", st, err)
	}
	for _, sid := range []string{id, pid} {
		if err := c.DeleteSandbox(ctx(t), sid); err != nil {
			t.Errorf("the victim's delete: %v", err)
		}
	}
}

// wantExitCode checks that a sandbox whose entrypoint exits with code
// reports it, whether it exits during the create or after.
func (h *hostileRig) wantExitCode(t *testing.T, c *sdk.Client, code int) {
	t.Helper()
	h.wantExit(t, c, code, "sh", "-c", "sleep 0.5; exit "+strconv.Itoa(code))
}

// wantExit runs entry as a sandbox's entrypoint and checks that the exit
// code it ends with is the one reported, during the create or after.
func (h *hostileRig) wantExit(t *testing.T, c *sdk.Client, code int, entry ...string) {
	t.Helper()
	want := "code " + strconv.Itoa(code)
	sb, err := c.CreateSandbox(ctx(t), ociCreate(h.image, entry...), sdk.CreateOptions{})
	if err != nil {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("a failing entrypoint's create = %v, want %q in it", err, want)
		}
		return
	}
	testutil.WaitFor(t, 30*time.Second, "the failing entrypoint's exit", func() bool {
		got, err := c.GetSandbox(ctx(t), sb.ID)
		return err == nil && got.Status.State == api.StateFailed
	})
	got, _ := c.GetSandbox(ctx(t), sb.ID)
	if !strings.Contains(got.Status.Message, want) {
		t.Errorf("a failing entrypoint's sandbox says %q, want %q in it", got.Status.Message, want)
	}
}

// status sends a request with the given headers (name, value, ...) and
// no API key, and returns the answer's status.
func (s *server) status(t *testing.T, method, path string, hdr ...string) int {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx(t), method, s.url+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}

// The execd token opens the sandbox's execd; nothing in the sandbox
// may read it: not from PID 1's or execd's environment or memory, not
// from a file. And the server's public proxy route refuses it.
func (h *hostileRig) execdTokenOutOfReach(t *testing.T) {
	id := h.create(t, h.attacker, nil)
	x := sandboxExecd(t, h.attacker, id)
	out, _, _ := x.run(`for p in /proc/[0-9]*; do cat $p/environ $p/cmdline 2>/dev/null; head -c 65536 $p/mem 2>/dev/null; done | tr '\0' '\n';
		cat /.corral/status/* 2>/dev/null; grep -r . /.corral/status 2>/dev/null`)
	if x.token == "" || strings.Contains(out, x.token) {
		t.Fatalf("code in the sandbox read its execd token (%d bytes of output)", len(out))
	}
	res := h.s.status(t, "GET", "/v1/sandboxes/"+id+"/proxy/44772/ping", api.HeaderExecdToken, x.token)
	if res != 401 {
		t.Errorf("the public proxy route with the execd token = %d, want 401", res)
	}
	h.victimUnaffected(t)
}

// Decisions without end: a sandbox asking for random names makes its
// enforcer log and audit nothing past their bounds, and the victim's
// policy changes and audit go on.
func (h *hostileRig) auditFlood(t *testing.T) {
	id := h.create(t, h.attacker, func(r *api.CreateSandboxRequest) {
		r.NetworkPolicy = &api.NetworkPolicy{DefaultAction: "deny"}
	}, "sh", "-c", "i=0; while true; do i=$((i+1)); nslookup x$i.flood.invalid >/dev/null 2>&1; done")
	testutil.WaitFor(t, time.Minute, "the attacker's audit to be cut to its rate", func() bool {
		evs, err := h.attacker.SandboxEvents(ctx(t), id, sdk.SandboxEventOptions{Type: "egress.suppressed", Limit: 1})
		return err == nil && len(evs.Items) > 0
	})
	h.victimUnaffected(t)
	log := h.egressDir(id) + "/log"
	if fi, err := os.Stat(log); err != nil || fi.Size() > launch.LogLimit {
		t.Errorf("the enforcer's log: %v, %v bytes (limit %d)", err, fi, launch.LogLimit)
	}
}

// A tenant's own policy cannot open the networks around the host:
// allow-all with explicit private CIDR rules reaches the internet, and
// no private address, by literal or by a name resolving to one.
func (h *hostileRig) privateNetworkPivot(t *testing.T) {
	id := h.create(t, h.attacker, func(r *api.CreateSandboxRequest) {
		r.NetworkPolicy = &api.NetworkPolicy{DefaultAction: "allow", Egress: []api.NetworkRule{
			{Action: "allow", Target: "10.0.0.0/8"}, {Action: "allow", Target: "192.168.0.0/16"},
			{Action: "allow", Target: "internal.test"}, {Action: "allow", Target: "rebind.test"},
		}}
	})
	x := sandboxExecd(t, h.attacker, id)
	if out, _, code := x.run("timeout 10 wget -q -O- http://public.test/"); code != 0 || out != "reached "+netlab.WorldWeb+"\n" {
		t.Fatalf("allow-all does not reach a public host: %q (exit %d)", out, code)
	}
	for _, target := range []string{hostilePrivate, hostilePrivateLAN, "internal.test", "rebind.test"} {
		if out, _, code := x.run("timeout 3 wget -q -O- http://" + target + "/"); code == 0 || strings.Contains(out, "reached") {
			t.Errorf("the sandbox reached %s: %q", target, out)
		}
	}
	h.victimUnaffected(t)
}

// resourceBounds: the server's maxima refuse a create that asks for more
// (400 naming the limit and its flag), and its defaults apply to one that
// asks for nothing.
func (h *hostileRig) resourceBounds(t *testing.T) {
	over := map[string]string{"memory": "64Gi", "cpu": "64", "pids": "100000", "disk": "10Ti"}
	if h.runtime == "docker" {
		delete(over, "disk") // this machine's engine cannot limit disk (ext4)
	}
	for key, v := range over {
		req := ociCreate(h.image)
		req.ResourceLimits[key] = v
		_, err := h.attacker.CreateSandbox(ctx(t), req, sdk.CreateOptions{})
		var ae *sdk.APIError
		if !errors.As(err, &ae) || ae.Status != 400 || !strings.Contains(ae.Message, "--max-"+key) {
			t.Errorf("resourceLimits.%s=%s = %v, want a 400 naming --max-%s", key, v, err, key)
		}
	}
	req := ociCreate(h.image)
	req.ResourceLimits = nil
	sb, err := h.attacker.CreateSandbox(ctx(t), req, sdk.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The defaults (--default-memory's 2Gi, the rig's --default-cpu 1)
	// are the sandbox's cgroup limits (v2 or v1 names).
	out, _, _ := sandboxExecd(t, h.attacker, sb.ID).run("cat /sys/fs/cgroup/memory.max /sys/fs/cgroup/cpu.max 2>/dev/null || " +
		"cat /sys/fs/cgroup/memory/memory.limit_in_bytes /sys/fs/cgroup/cpu/cpu.cfs_quota_us /sys/fs/cgroup/cpu/cpu.cfs_period_us")
	if f := strings.Fields(out); len(f) != 3 || f[0] != "2147483648" || f[1] != f[2] {
		t.Errorf("a create asking for nothing has memory and cpu limits %q, want 2 GiB and one CPU", out)
	}
	h.victimUnaffected(t)
}

// sharedAttacks are the attacks every local runtime must contain.
func (h *hostileRig) sharedAttacks(t *testing.T) {
	t.Run("ExecdTokenOutOfReach", h.execdTokenOutOfReach)
	t.Run("AuditFlood", h.auditFlood)
	t.Run("PrivateNetworkPivot", h.privateNetworkPivot)
	t.Run("SharedAddress", h.sharedAddress)
	t.Run("PrivateImages", h.privateImages)
	t.Run("ResourceBounds", h.resourceBounds)
}

// egressDir is where a sandbox's enforcer keeps its files.
func (h *hostileRig) egressDir(id string) string {
	if h.runtime == "docker" {
		return filepath.Join(h.dir, "docker", "egress", id)
	}
	return filepath.Join(h.dir, "oci", "run", "bundles", id, "egress")
}

// sharedAddress: an allow rule for a name opens its addresses for that
// name only: another site served from the same address (a CDN's edge) is
// refused, whatever the sandbox puts in its request.
func (h *hostileRig) sharedAddress(t *testing.T) {
	id := h.create(t, h.attacker, func(r *api.CreateSandboxRequest) {
		r.NetworkPolicy = &api.NetworkPolicy{DefaultAction: "deny", Egress: []api.NetworkRule{{Action: "allow", Target: "public.test"}}}
	})
	x := sandboxExecd(t, h.attacker, id)
	if out, _, code := x.run("timeout 10 wget -q -O- http://public.test/"); code != 0 || out != "reached "+netlab.WorldWeb+"\n" {
		t.Fatalf("the allowed name: %q (exit %d)", out, code)
	}
	for _, cmd := range []string{"timeout 5 wget -q -O- --header 'Host: evil.test' http://public.test/",
		"timeout 5 wget -q -O- --header 'Host: evil.test' http://" + netlab.WorldWeb + "/",
		"printf 'GET / HTTP/1.0\\r\\nHost: evil.test\\r\\n\\r\\n' | timeout 5 nc " + netlab.WorldWeb + " 80"} {
		if out, _, _ := x.run(cmd); strings.Contains(out, "evil site") {
			t.Errorf("%s reached another site on the allowed name's address: %q", cmd, out)
		}
	}
	testutil.WaitFor(t, 30*time.Second, "an audit event naming the refused site", func() bool {
		evs, err := h.attacker.SandboxEvents(ctx(t), id, sdk.SandboxEventOptions{Type: "egress", Limit: 1000})
		for _, ev := range evs.Items {
			if err == nil && ev.Reason == "deny" && strings.Contains(ev.Message, "evil.test") {
				return true
			}
		}
		return false
	})
	h.victimUnaffected(t)
}

// privateImages: a tenant's private image (pulled with its credentials)
// is not another tenant's to start, with no credentials or with ones the
// registry refuses; an image of the attacker's own whose config claims
// the private image's layers gets none of them.
func (h *hostileRig) privateImages(t *testing.T) {
	reg := registry.StartAuth(t,
		registry.User{Name: "victim", Password: "v-pass", Prefixes: []string{"victimco/"}},
		registry.User{Name: "attacker", Password: "x-pass", Prefixes: []string{"attacker/"}})
	base := busyboxImage(t)
	private, err := mutate.AppendLayers(base, tarLayer(t, []tarFile{{name: "etc/victim-secret", body: "the victim's secret\n"}}))
	if err != nil {
		t.Fatal(err)
	}
	ref := reg + "/victimco/app:prod"
	registry.PushAs(t, ref, private, "victim", "v-pass")
	h.refs = append(h.refs, ref)
	withAuth := func(user, pass string) func(*api.CreateSandboxRequest) {
		return func(r *api.CreateSandboxRequest) {
			r.Image = &api.ImageSpec{URI: ref, Auth: &api.ImageAuth{Username: user, Password: pass}}
		}
	}
	vid := h.create(t, h.victim, withAuth("victim", "v-pass"))
	if out, _, code := sandboxExecd(t, h.victim, vid).run("cat /etc/victim-secret"); code != 0 || out != "the victim's secret\n" {
		t.Fatalf("the victim's own private image: %q (exit %d)", out, code)
	}
	for _, tc := range []struct {
		name string
		req  func(*api.CreateSandboxRequest)
	}{
		{"no credentials", func(r *api.CreateSandboxRequest) { r.Image = &api.ImageSpec{URI: ref} }},
		{"the attacker's own credentials", withAuth("attacker", "x-pass")},
		{"wrong credentials", withAuth("victim", "guess")},
	} {
		req := ociCreate(h.image)
		tc.req(&req)
		sb, err := h.attacker.CreateSandbox(ctx(t), req, sdk.CreateOptions{})
		var ae *sdk.APIError
		if err == nil || !errors.As(err, &ae) || ae.Status != 400 {
			t.Errorf("%s: the attacker started the victim's private image: %+v, %v", tc.name, sb, err)
		}
	}
	// The attacker's own image, whose config claims the private layer.
	vimg, err := private.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	forged, err := mutate.AppendLayers(base, tarLayer(t, []tarFile{{name: "etc/attacker", body: "mine\n"}}))
	if err != nil {
		t.Fatal(err)
	}
	cf, _ := forged.ConfigFile()
	cf = cf.DeepCopy()
	cf.RootFS.DiffIDs[len(cf.RootFS.DiffIDs)-1] = vimg.RootFS.DiffIDs[len(vimg.RootFS.DiffIDs)-1]
	// Once with a config of its own, once with the victim's very config
	// (which a private image built from a known recipe can have).
	other := cf.DeepCopy()
	other.Config.Env = append(other.Config.Env, "FORGED=1")
	for i, c := range []*v1.ConfigFile{other, cf} {
		img, err := mutate.ConfigFile(forged, c)
		if err != nil {
			t.Fatal(err)
		}
		fref := reg + "/attacker/forged:" + strconv.Itoa(i)
		registry.PushAs(t, fref, img, "attacker", "x-pass")
		h.refs = append(h.refs, fref)
		req := ociCreate(fref, "sh", "-c", "cat /etc/victim-secret; sleep 3600")
		req.Image.Auth = &api.ImageAuth{Username: "attacker", Password: "x-pass"}
		if sb, err := h.attacker.CreateSandbox(ctx(t), req, sdk.CreateOptions{}); err == nil {
			out, _, _ := sandboxExecd(t, h.attacker, sb.ID).run("cat /etc/victim-secret")
			t.Errorf("an image claiming the victim's layer (config %d) started; it reads %q", i, out)
		} else {
			t.Logf("config %d: %v", i, err)
		}
	}
	h.victimUnaffected(t)
}

// TestHostileSandboxOCI runs the suite on the native runtime.
func TestHostileSandboxOCI(t *testing.T) {
	requireOCI(t)
	t.Parallel()
	h := newHostileRig(t, "oci")
	h.victimUnaffected(t)

	// The review's reproduced attack: a link planted where the server read
	// the exit code. The status directory is read-only now, and the exit
	// code arrives through a descriptor PID 1 holds.
	t.Run("ExitStatusPlants", func(t *testing.T) {
		script := `
			mkdir /.corral/status/.exit.tmp 2>/dev/null && echo planted-dir
			ln -s /dev/zero /.corral/status/exit 2>/dev/null && echo planted-link
			mkfifo /.corral/status/fifo 2>/dev/null && echo planted-fifo
			dd if=/dev/zero of=/.corral/status/fill bs=1M count=8 2>/dev/null && echo filled
			echo 99 > /proc/1/fd/3 2>/dev/null && echo wrote-exit
			exit 3`
		x := sandboxExecd(t, h.attacker, h.create(t, h.attacker, nil))
		if out, errOut, _ := x.run(script); strings.TrimSpace(out) != "" {
			t.Errorf("the sandbox planted files for the host: %q %q", out, errOut)
		}
		// The same from the entrypoint, which then exits 3: the server
		// reports 3, and goes on serving.
		h.wantExit(t, h.attacker, 3, "sh", "-c", script)
		h.wantExit(t, h.attacker, 4, "sh", "-c", "sleep 1;"+strings.ReplaceAll(script, "exit 3", "exit 4"))
		if err := h.s.client(t).Health(ctx(t)); err != nil {
			t.Fatalf("the server is unhealthy after the attack: %v", err)
		}
		h.victimUnaffected(t)
	})

	h.sharedAttacks(t)
	t.Run("VolumeOverCorral", func(t *testing.T) { h.volumeOverCorral(t, h.linkImage(t), api.IsolationRunsc) })

	// A disk limit is a file system of the sandbox's own: a sandbox that
	// writes without end fills that, and nothing the others or the server
	// need.
	t.Run("DiskFlood", func(t *testing.T) {
		id := h.create(t, h.attacker, func(r *api.CreateSandboxRequest) { r.ResourceLimits["disk"] = "64Mi" })
		x := sandboxExecd(t, h.attacker, id)
		out, errOut, code := x.run("dd if=/dev/zero of=/tmp/fill bs=1M count=200 2>&1; ls -l /tmp/fill", map[string]any{"timeout": 60000})
		if code == 0 && !strings.Contains(out+errOut, "No space left") {
			t.Errorf("a 64 MiB disk took 200 MiB: %q %q", out, errOut)
		}
		var fs syscall.Statfs_t
		if err := syscall.Statfs(filepath.Join(h.dir, "oci", "sandboxes", id, "fs"), &fs); err != nil || int64(fs.Blocks)*fs.Bsize > 80<<20 {
			t.Errorf("the sandbox's writable layer is not on a file system of its size: %v", err)
		}
		h.victimUnaffected(t)
	})

	// Output without end: the console log stays under its cap, on the
	// data disk beside the sandbox's writable layer, not on the runtime
	// tmpfs that every sandbox's small files share; and says what it
	// dropped.
	t.Run("ConsoleFlood", func(t *testing.T) {
		var before syscall.Statfs_t
		if err := syscall.Statfs(filepath.Join(h.dir, "oci", "run"), &before); err != nil {
			t.Fatal(err)
		}
		id := h.create(t, h.attacker, nil, "sh", "-c", "yes corral-flood-corral-flood-corral-flood")
		log := filepath.Join(h.dir, "oci", "sandboxes", id, "console.log")
		testutil.WaitFor(t, 60*time.Second, "the console log to roll over", func() bool {
			b, _ := os.ReadFile(log)
			return strings.HasPrefix(string(b), "[corral: this log keeps at most ")
		})
		var logFS, runFS syscall.Statfs_t
		if err := syscall.Statfs(log, &logFS); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Statfs(filepath.Join(h.dir, "oci", "run"), &runFS); err != nil {
			t.Fatal(err)
		}
		if logFS.Fsid == runFS.Fsid {
			t.Errorf("the console log is on the runtime tmpfs")
		}
		// The flood took nothing of the tmpfs (a new bundle takes a few
		// KiB; other tests' sandboxes may come and go meanwhile).
		if used := int64(before.Bfree-runFS.Bfree) * runFS.Bsize; used > oci.ConsoleLimit/2 {
			t.Errorf("the runtime tmpfs lost %d bytes during the flood", used)
		}
		for range 20 {
			fi, err := os.Stat(log)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Size() > oci.ConsoleLimit {
				t.Fatalf("the console log is %d bytes, over its %d", fi.Size(), oci.ConsoleLimit)
			}
			time.Sleep(50 * time.Millisecond)
		}
		h.victimUnaffected(t)
		if err := h.attacker.DeleteSandbox(ctx(t), id); err != nil && !errors.Is(err, sdk.ErrNotFound) {
			t.Errorf("delete the flooding sandbox: %v", err)
		}
	})
}

// TestHostileSandboxDocker runs the suite on the docker runtime (a local
// engine): what the runtime shares with the native one, and a snapshot
// or an image ID given as image.uri.
func TestHostileSandboxDocker(t *testing.T) {
	requireDocker(t)
	t.Parallel()
	h := newHostileRig(t, "docker")
	h.victimUnaffected(t)
	h.sharedAttacks(t)
	t.Run("VolumeOverCorral", func(t *testing.T) { h.volumeOverCorral(t, h.linkImage(t), api.IsolationRunsc) })
	// Another tenant's snapshot is restored only with its snapshotId, which
	// is that tenant's (404 to others); as an image, by name or by an
	// image ID prefix, it is nobody's.
	t.Run("SnapshotAsAnImage", func(t *testing.T) {
		id := h.create(t, h.victim, nil)
		if _, _, code := sandboxExecd(t, h.victim, id).run("echo victim-state > /root/state"); code != 0 {
			t.Fatal("write the victim's state")
		}
		snap, err := h.victim.CreateSnapshot(ctx(t), id, "state")
		if err != nil {
			t.Fatal(err)
		}
		testutilWaitSnapshot(t, h.victim, snap.ID)
		cli := requireDocker(t)
		img, err := cli.ImageInspect(ctx(t), "corral-snapshot:"+strings.ToLower(snap.ID))
		if err != nil {
			t.Fatalf("the snapshot's image: %v", err)
		}
		hexID := strings.TrimPrefix(img.ID, "sha256:")
		for _, uri := range []string{"corral-snapshot:" + strings.ToLower(snap.ID), "docker.io/library/corral-snapshot:" + strings.ToLower(snap.ID), img.ID, hexID, hexID[:12]} {
			req := ociCreate(uri, "sh", "-c", "cat /root/state; sleep 3600")
			if sb, err := h.attacker.CreateSandbox(ctx(t), req, sdk.CreateOptions{}); err == nil {
				out, _, _ := sandboxExecd(t, h.attacker, sb.ID).run("cat /root/state")
				t.Errorf("image.uri %q started the victim's snapshot; it reads %q", uri, out)
			}
		}
		// The same answer as for a snapshot that does not exist (400, as
		// the contract lists no 404 for a create).
		for _, sid := range []string{snap.ID, "00000000-0000-4000-8000-000000000000"} {
			req := ociCreate(h.image)
			req.Image, req.SnapshotID = nil, sid
			_, err := h.attacker.CreateSandbox(ctx(t), req, sdk.CreateOptions{})
			var ae *sdk.APIError
			if !errors.As(err, &ae) || ae.Status != 400 || ae.Code != "SNAPSHOT::NOT_FOUND" {
				t.Errorf("another tenant restoring snapshot %s = %v, want 400 SNAPSHOT::NOT_FOUND", sid, err)
			}
		}
		h.victimUnaffected(t)
	})
}

// TestRuntimeVersionIsChecked: a runc open to known container escapes is
// a loud warning at start and in /health for an admin; a fixed one, crun
// or runsc is not. So is a runsc (--oci-runsc) older than the gVisor
// corral pins, or of a version it cannot date. The runtimes here are
// wrappers of this machine's runc and runsc that report the version
// under test.
func TestRuntimeVersionIsChecked(t *testing.T) {
	requireOCI(t)
	t.Parallel()
	real, err := exec.LookPath("runc")
	if err != nil {
		t.Fatal(err)
	}
	realRunsc, err := exec.LookPath("runsc")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, version string
		warns         []string
		runsc         bool // the wrapper is --oci-runsc's, not --oci-runtime's
	}{
		{"runc 1.1.11", "runc version 1.1.11\ncommit: v1.1.11-0-g4bccb38c", []string{"CVE-2024-21626", "CVE-2025-31133"}, false},
		{"Debian 12's", "runc version 1.1.5+ds1\ncommit: 1.1.5+ds1-1+deb12u1", []string{"CVE-2025-31133"}, false},
		{"runc 1.3.3", "runc version 1.3.3\ncommit: v1.3.3-0-gabcdef0", nil, false},
		{"crun", "crun version 1.26\ncommit: abc", nil, false},
		{"Debian 12's runsc", "runsc version 0.0~20221219.0\nspec: 1.0.2-dev", []string{"of 2022-12-19: older than the gVisor of"}, true},
		{"a runsc of no known version", "runsc version VERSION_MISSING\nspec: 1.2.1", []string{"cannot date"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			wrapper := filepath.Join(dir, "runtime")
			wraps, flag := real, "--oci-runtime"
			if tc.runsc {
				wraps, flag = realRunsc, "--oci-runsc"
			}
			script := "#!/bin/sh\nif [ \"$1\" = --version ]; then printf '%s\\n' '" + strings.ReplaceAll(tc.version, "\n", "' '") + "'; exit 0; fi\nexec " + wraps + " \"$@\"\n"
			if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
				t.Fatal(err)
			}
			s := startServer(t, filepath.Join(dir, "data"), "--runtime", "oci", flag, wrapper)
			var h api.Health
			req, _ := http.NewRequestWithContext(ctx(t), "GET", s.url+"/health", nil)
			req.Header.Set(api.HeaderAPIKey, testKey)
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_ = json.NewDecoder(res.Body).Decode(&h)
			res.Body.Close()
			if len(h.Warnings) != len(tc.warns) {
				t.Fatalf("/health warnings = %q, want %d", h.Warnings, len(tc.warns))
			}
			for i, w := range tc.warns {
				if !strings.Contains(h.Warnings[i], w) || !strings.Contains(s.stderr.String(), "WARNING: "+h.Warnings[i]) {
					t.Errorf("warning %d = %q, want %s, also at start", i, h.Warnings[i], w)
				}
			}
			if anon := s.status(t, "GET", "/health"); anon != 200 {
				t.Errorf("/health without a key = %d", anon)
			}
		})
	}
}
