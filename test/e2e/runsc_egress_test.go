// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/internal/testutil/netlab"
	"github.com/corral-dev/corral/internal/testutil/registry"
	"github.com/corral-dev/corral/sdk"
)

// ncGet fetches http://host/ with busybox's nc and says whether it got a
// 200 (the BusyboxWget subtest checks wget, which Debian's 2022 runsc
// broke in this mode: google/gvisor#8156).
func ncGet(x *execd, host string) (string, bool) {
	out, _, code := x.run(`printf 'GET / HTTP/1.0\r\nHost: ` + host + `\r\n\r\n' | timeout 3 nc ` + host + ` 80`)
	return out, code == 0 && strings.Contains(out, "200 OK")
}

// TestDockerRunscEgressPolicy: a Docker sandbox of the runsc tier runs
// gVisor with host networking in the sandbox's namespace, so the egress
// enforcer's rules there police it like a runc sandbox: the allowed name
// is reached, another address is not, a rule added at run time applies,
// and the sandbox cannot undo its network.
func TestDockerRunscEgressPolicy(t *testing.T) {
	cli := requireDocker(t)
	t.Parallel()
	runscEgressPolicy(t, "docker", registryImage(t, cli))
}

// TestOCIRunscEgressPolicy: the same for a native sandbox of the runsc
// tier.
func TestOCIRunscEgressPolicy(t *testing.T) {
	requireOCI(t)
	t.Parallel()
	reg := registry.Start(t)
	registry.Push(t, reg+"/corral/busybox:1", busyboxImage(t))
	runscEgressPolicy(t, "oci", reg+"/corral/busybox:1")
}

func runscEgressPolicy(t *testing.T, runtime, image string) {
	w := egressWorld(t)
	s := startServer(t, t.TempDir(), "--runtime", runtime, "--isolation", "runc,runsc",
		"--egress-upstream", netlab.WorldDNS+":53",
		"--egress-uplink-netns", netlab.NetnsPath(w.Uplink), "--egress-subnet", "10.214.0.0/24")
	c := s.client(t)
	req := ociCreate(image, "sh", "-c",
		"nc -w 2 "+netlab.WorldOther+" 80 </dev/null > /tmp/first-probe 2>&1; echo exit=$? >> /tmp/first-probe; exec sleep 3600")
	req.NetworkPolicy = &api.NetworkPolicy{DefaultAction: "deny", Egress: []api.NetworkRule{{Action: "allow", Target: "allowed.test"}}}
	req.Extensions = map[string]string{api.ExtensionIsolation: api.IsolationRunsc}
	sb, err := c.CreateSandbox(ctx(t), req, sdk.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.DeleteSandbox(ctx(t), sb.ID)
	x := sandboxExecd(t, c, sb.ID)
	if out, _, _ := x.run("dmesg | head -n 3"); !strings.Contains(out, "gVisor") {
		t.Fatalf("not a gVisor sandbox: dmesg %q", out)
	}
	t.Run("EntrypointStartsPoliced", func(t *testing.T) {
		var out string
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			out, _, _ = x.run("cat /tmp/first-probe")
			if strings.Contains(out, "exit=") {
				break
			}
			if time.Now().After(deadline) {
				ps, _, _ := x.run("ps -o pid,args; ls -la /tmp /.corral-gate")
				if runtime == "docker" {
					logs, _ := exec.Command("docker", "logs", "corral-"+sb.ID).CombinedOutput()
					ps += "\nconsole:\n" + string(logs)
				}
				t.Fatalf("the entrypoint's first probe did not end in 20 s: %q; processes and files:\n%s", out, ps)
			}
		}
		if !strings.Contains(out, "exit=1") {
			t.Errorf("the entrypoint's first connection to a denied address: %q", out)
		}
	})
	t.Run("AllowedDomain", func(t *testing.T) {
		if out, ok := ncGet(x, "allowed.test"); !ok || !strings.Contains(out, "hello from web") {
			t.Errorf("allowed.test: %q %v", out, ok)
		}
	})
	// Debian's 2022 runsc failed busybox wget's reads in this mode
	// (google/gvisor#8156); the pinned release does not.
	t.Run("BusyboxWget", func(t *testing.T) {
		if out, errOut, code := x.run("timeout 5 wget -q -O- http://allowed.test/"); code != 0 || !strings.Contains(out, "hello from web") {
			t.Errorf("wget allowed.test: %d %q %q", code, out, errOut)
		}
	})
	t.Run("OtherAddressDenied", func(t *testing.T) {
		if out, ok := ncGet(x, netlab.WorldOther); ok {
			t.Errorf("a denied address answered: %q", out)
		}
		if out, _, code := x.run("nslookup denied.test"); code == 0 {
			t.Errorf("denied.test resolved: %q", out)
		}
	})
	t.Run("RuntimePatch", func(t *testing.T) {
		eg, err := c.Egress(ctx(t), sb.ID, sdk.SandboxOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := ncGet(x, "later.test"); ok {
			t.Fatal("later.test reachable before it was allowed")
		}
		if st, err := eg.AddRules(ctx(t), api.NetworkRule{Action: "allow", Target: "later.test"}); err != nil || st.Mode != "enforcing" {
			t.Fatalf("add rule: %+v %v", st, err)
		}
		if out, ok := ncGet(x, "later.test"); !ok || !strings.Contains(out, "hello from later") {
			t.Errorf("later.test after PATCH: %q %v", out, ok)
		}
	})
	t.Run("NetworkCannotBeUndone", func(t *testing.T) {
		// gVisor's netlink is its own; nothing in the sandbox reaches the
		// namespace's routes or rules, and CAP_NET_ADMIN is not granted.
		_, _, _ = x.run("ip route flush table main; ip link set eth0 down; ip addr flush dev eth0")
		if out, ok := ncGet(x, netlab.WorldOther); ok {
			t.Errorf("a denied address answered after the attempts: %q", out)
		}
		if out, ok := ncGet(x, "allowed.test"); !ok {
			t.Errorf("allowed.test after the attempts: %q", out)
		}
	})
}
