// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/internal/hostnet/netns"
	"github.com/corral-dev/corral/internal/testutil"
	"github.com/corral-dev/corral/internal/testutil/netlab"
	"github.com/corral-dev/corral/internal/testutil/registry"
	"github.com/corral-dev/corral/sdk"
)

// Addresses of the test's world beyond testutil's.
const (
	worldWild  = "203.0.113.30"
	worldLater = "203.0.113.40"
)

// egressWorld builds the outside world a sandbox's traffic may reach:
// every address is in a namespace this test made, so nothing escapes to
// the real network even with enforcement broken. Each web host answers
// with its own name.
func egressWorld(t *testing.T) netlab.World {
	t.Helper()
	w := netlab.NewWorld(t)
	for _, a := range []string{worldWild, worldLater} {
		if out, err := exec.Command("ip", "-n", w.World, "addr", "add", a+"/32", "dev", "lo").CombinedOutput(); err != nil {
			t.Fatalf("%v %s", err, out)
		}
	}
	for name, addr := range map[string]string{"web": netlab.WorldWeb, "other": netlab.WorldOther, "wild": worldWild,
		"later": worldLater, "metadata": netlab.WorldMetadata} {
		netlab.ServeHTTPIn(t, w.World, addr+":80", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.WriteString(w, "hello from "+name+"\n")
		}))
	}
	// A service on the uplink itself: the "host" no sandbox may reach.
	netlab.ServeHTTPIn(t, w.Uplink, "0.0.0.0:8088", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "hello from the host\n")
	}))
	netlab.ServeDNS(t, w.World, netlab.WorldDNS+":53", map[string]string{
		"allowed.test.":  netlab.WorldWeb,
		"denied.test.":   netlab.WorldOther,
		"wild.test.":     worldWild,
		"api.wild.test.": worldWild,
		"later.test.":    worldLater,
	})
	return w
}

// get fetches url from inside the sandbox; ok is false when it fails.
// (busybox's own wget -T crashes; timeout(1) bounds it instead.)
// The SDK runs it: a stream cut on the way is resumed by cursor, so a
// probe's answer is never lost to the transport.
func get(x *execd, url string) (string, bool) {
	out, errOut, code, err := x.sdk.Run(ctx(x.t), "timeout 2 wget -q -O- "+url, sdk.CommandOptions{})
	if err != nil {
		x.t.Fatalf("wget %s: %v", url, err)
	}
	if code != 0 {
		return out + errOut, false
	}
	return out, true
}

// egressRig is a runtime whose sandboxes runEgressPolicy polices.
type egressRig struct {
	runtime, image string
	// args are the server's flags for the runtime and its network.
	args []string
	// gateway is the sandboxes' next hop: the machine they run on.
	gateway string
	// log is what the sandbox's enforcer printed, for failures.
	log func(dataDir, id string) string
	// pid is the (running) enforcer's pid on this machine.
	pid func(t *testing.T, dataDir, id string) int
	// apiInNetns: the egress API listens in the sandbox's namespace.
	apiInNetns bool
	// isolatesUnpoliced: sandboxes without a policy get an interface
	// anyway (a remote engine's bridge), which must carry nothing.
	isolatesUnpoliced bool
	// crash ends the enforcer (pid) so that only the restarted server
	// brings it back.
	crash func(t *testing.T, id string, pid int)
	// stopEnforcer and startEnforcer, when set, stop the enforcer for a
	// while and start it again (a sidecar whose port the sandbox could
	// take meanwhile).
	stopEnforcer, startEnforcer func(t *testing.T, id string)
	// squat serves h over TLS (with a certificate of its own) on port
	// 18080 in sandbox id's network namespace, as code in the sandbox
	// could; stop ends it.
	squat func(t *testing.T, id string, h http.Handler) (stop func())
}

// localRig polices sandboxes of a runtime on this machine: a bridge in
// the World's uplink, enforcers as processes here.
func localRig(w netlab.World, runtime, image string, egressDir func(dataDir, id string) string) egressRig {
	return egressRig{runtime: runtime, image: image, gateway: "10.214.0.1",
		args: []string{"--egress-uplink-netns", netlab.NetnsPath(w.Uplink), "--egress-subnet", "10.214.0.0/24"},
		log: func(dataDir, id string) string {
			b, _ := os.ReadFile(filepath.Join(egressDir(dataDir, id), "log"))
			return string(b)
		},
		pid:   func(t *testing.T, dataDir, id string) int { return egressPid(t, egressDir(dataDir, id)) },
		crash: func(_ *testing.T, _ string, pid int) { _ = syscall.Kill(pid, syscall.SIGKILL) },
	}
}

// TestOCIEgressPolicy: a native sandbox with a network policy reaches
// what the policy allows and nothing else, its policy changes at run time,
// and the enforcement survives the sandbox's attempts to undo it and a
// server crash.
func TestOCIEgressPolicy(t *testing.T) {
	requireOCI(t)
	t.Parallel()
	reg := registry.Start(t)
	registry.Push(t, reg+"/corral/busybox:1", busyboxImage(t))
	w := egressWorld(t)
	runEgressPolicy(t, w, localRig(w, "oci", reg+"/corral/busybox:1", func(dataDir, id string) string {
		return filepath.Join(dataDir, "oci", "run", "bundles", id, "egress")
	}))
}

// TestDockerEgressPolicy: the same for a Docker container.
func TestDockerEgressPolicy(t *testing.T) {
	cli := requireDocker(t)
	t.Parallel()
	w := egressWorld(t)
	runEgressPolicy(t, w, localRig(w, "docker", registryImage(t, cli), func(dataDir, id string) string {
		return filepath.Join(dataDir, "docker", "egress", id)
	}))
}

// TestDockerRemoteEgressPolicy: the same on a remote engine, where the
// enforcer is a sidecar container in the sandbox's network namespace.
// The engine is a private dockerd "on another machine": in the World's
// uplink namespace, with its bridge and NAT there.
func TestDockerRemoteEgressPolicy(t *testing.T) {
	requireDocker(t)
	t.Parallel()
	w := egressWorld(t)
	eng, args, image := remoteEngine(t, w)
	sidecar := func(id string) string { return "corral-" + id + "-egress" }
	runEgressPolicy(t, w, egressRig{runtime: "docker", image: image, args: args, gateway: remoteBridgeGateway, apiInNetns: true, isolatesUnpoliced: true,
		log:           func(_, id string) string { return eng.logsOf(t, sidecar(id)) },
		pid:           func(t *testing.T, _, id string) int { return eng.pidOf(t, sidecar(id)) },
		crash:         func(t *testing.T, id string, _ int) { eng.stopContainer(t, sidecar(id)) },
		stopEnforcer:  func(t *testing.T, id string) { eng.stopContainer(t, sidecar(id)) },
		startEnforcer: func(t *testing.T, id string) { eng.startContainer(t, sidecar(id)) },
		squat: func(t *testing.T, id string, h http.Handler) func() {
			ns := "/proc/" + strconv.Itoa(eng.pidOf(t, "corral-"+id)) + "/ns/net"
			var ln net.Listener
			if err := netns.Do(ns, func() (err error) { ln, err = net.Listen("tcp", "0.0.0.0:18080"); return err }); err != nil {
				t.Fatalf("squat port 18080: %v", err)
			}
			srv := &http.Server{Handler: h}
			go func() {
				_ = srv.Serve(tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{netlab.NewCA(t, "impostor").Issue(t, "egress")}}))
			}()
			return func() { _ = srv.Close() }
		},
	})
}

func runEgressPolicy(t *testing.T, w netlab.World, rig egressRig) {
	dir := t.TempDir()
	args := append([]string{"--runtime", rig.runtime, "--egress-upstream", netlab.WorldDNS + ":53"}, rig.args...)
	s := startServer(t, dir, args...)
	c := s.client(t)
	// The entrypoint notes what network it saw when it started, and
	// tries an address no rule allows at once.
	req := ociCreate(rig.image, "sh", "-c", "ip -4 addr show eth0 > /tmp/net-at-start 2>&1; "+
		"timeout 2 wget -q -O- http://"+netlab.WorldOther+"/ > /tmp/first-probe 2>&1; echo exit=$? >> /tmp/first-probe; exec sleep 3600")
	req.NetworkPolicy = &api.NetworkPolicy{DefaultAction: "deny", Egress: []api.NetworkRule{
		{Action: "allow", Target: "allowed.test"}, {Action: "allow", Target: "*.wild.test"},
	}}
	sb, err := c.CreateSandbox(ctx(t), req, sdk.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	x := sandboxExecd(t, c, sb.ID)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("egress enforcer log:\n%s", rig.log(dir, sb.ID))
		}
	})

	t.Run("EntrypointStartsPoliced", func(t *testing.T) {
		// The entrypoint runs only once its interface is up and policed
		// (on a remote engine, PID 1 may start it just after create).
		var out string
		testutil.WaitFor(t, 10*time.Second, "the entrypoint to start", func() bool {
			out, _, _ = x.run("cat /tmp/net-at-start")
			return out != ""
		})
		if !strings.Contains(out, "inet 10.") {
			t.Errorf("the entrypoint started before its network: %q", out)
		}
		testutil.WaitFor(t, 10*time.Second, "the entrypoint's first probe", func() bool {
			out, _, _ = x.run("cat /tmp/first-probe")
			return strings.Contains(out, "exit=")
		})
		if strings.Contains(out, "exit=0") || strings.Contains(out, "hello from other") {
			t.Errorf("the entrypoint's first packet got out before the rules: %q", out)
		}
	})
	t.Run("AllowedDomain", func(t *testing.T) {
		if out, ok := get(x, "http://allowed.test/"); !ok || out != "hello from web\n" {
			t.Errorf("allowed.test: %q %v", out, ok)
		}
		// Its address, once resolved, is reachable as a literal too, for
		// that name (the name gate checks the Host on ports 80 and 443:
		// an address is shared by every site served from it).
		if out, _, code := x.run("timeout 5 wget -q -O- --header 'Host: allowed.test' http://" + netlab.WorldWeb + "/"); code != 0 || out != "hello from web\n" {
			t.Errorf("the resolved address of an allowed name, for that name: %q (exit %d)", out, code)
		}
		if out, ok := get(x, "http://"+netlab.WorldWeb+"/"); ok {
			t.Errorf("the resolved address of an allowed name answered a request naming no allowed name: %q", out)
		}
	})
	t.Run("DeniedDomainGetsNoAnswer", func(t *testing.T) {
		out, _, code := x.run("nslookup denied.test")
		if code == 0 || strings.Contains(out, netlab.WorldOther) {
			t.Errorf("denied.test resolved: %q", out)
		}
		if _, ok := get(x, "http://denied.test/"); ok {
			t.Error("denied.test reachable")
		}
	})
	t.Run("LiteralIPDenied", func(t *testing.T) {
		if out, ok := get(x, "http://"+netlab.WorldOther+"/"); ok {
			t.Errorf("a literal IP no rule allows answered: %q", out)
		}
	})
	t.Run("WildcardMatchesSubdomainsOnly", func(t *testing.T) {
		if out, ok := get(x, "http://api.wild.test/"); !ok || out != "hello from wild\n" {
			t.Errorf("api.wild.test: %q %v", out, ok)
		}
		if out, _, code := x.run("nslookup wild.test"); code == 0 {
			t.Errorf("wild.test resolved under *.wild.test: %q", out)
		}
	})
	t.Run("OtherResolverBlocked", func(t *testing.T) {
		if out, _, code := x.run("nslookup allowed.test " + netlab.WorldDNS); code == 0 {
			t.Errorf("DNS to another resolver answered: %q", out)
		}
	})

	eg, err := c.Egress(ctx(t), sb.ID, sdk.SandboxOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Run("RuntimePatch", func(t *testing.T) {
		if _, ok := get(x, "http://later.test/"); ok {
			t.Fatal("later.test reachable before it was allowed")
		}
		st, err := eg.AddRules(ctx(t), api.NetworkRule{Action: "allow", Target: "later.test"})
		if err != nil || st.Mode != "enforcing" {
			t.Fatalf("add rule: %+v %v", st, err)
		}
		if out, ok := get(x, "http://later.test/"); !ok || out != "hello from later\n" {
			t.Errorf("later.test after PATCH: %q %v", out, ok)
		}
		pol, err := eg.Policy(ctx(t))
		if err != nil || pol.Policy == nil || len(pol.Policy.Egress) != 3 || pol.Policy.Egress[0].Target != "later.test" {
			t.Errorf("policy after PATCH: %+v %v", pol, err)
		}
	})
	t.Run("EgressAPINeedsItsToken", func(t *testing.T) {
		ep, err := c.GetEndpoint(ctx(t), sb.ID, api.EgressPort, false)
		if err != nil {
			t.Fatal(err)
		}
		if ep.Headers[api.HeaderEgressToken] == "" {
			t.Fatalf("endpoint 18080 has no %s header: %+v", api.HeaderEgressToken, ep)
		}
		res, err := http.Get("http://" + ep.Endpoint + "/policy")
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusUnauthorized {
			t.Errorf("GET /policy without the token = %d", res.StatusCode)
		}
		// No credential proxy was asked for: the vault is not there.
		if code, body := egressCall(t, c, sb.ID, "POST", "/credential-vault", `{"credentials":[],"bindings":[]}`); code != http.StatusPreconditionFailed {
			t.Errorf("POST /credential-vault without a credential proxy = %d %s, want 412", code, body)
		}
		// The sandbox may try to listen on 18080 itself: the endpoint still
		// leads to the enforcer, and the token never reaches the impostor.
		// (A local enforcer's API has no listener in the sandbox, so the
		// squatter binds; a sidecar holds the port, so it cannot.)
		if out, errOut, code := x.run("printf '#!/bin/sh\\ncat >> /tmp/stolen\\n' > /tmp/grab && chmod +x /tmp/grab"); code != 0 {
			t.Fatalf("write the squatter: %q %q", out, errOut)
		}
		if rig.apiInNetns {
			if out, errOut, code := x.run("timeout 2 nc -l -p 18080 -e /tmp/grab"); code == 0 || !strings.Contains(out+errOut, "in use") {
				t.Errorf("the sandbox listened on the sidecar's port: %d %q %q", code, out, errOut)
			}
		} else {
			x.run("nc -ll -p 18080 -e /tmp/grab", map[string]any{"background": true})
			deadline := time.Now().Add(10 * time.Second)
			for {
				out, _, _ := x.run("echo probe | nc 127.0.0.1 18080; sleep 0.2; cat /tmp/stolen")
				if strings.Contains(out, "probe") {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("could not listen on 18080 in the sandbox: %q", out)
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
		if pol, err := eg.Policy(ctx(t)); err != nil || pol.Mode != "enforcing" {
			t.Errorf("the egress API behind a squatted port = %+v %v", pol, err)
		}
		if code, body := egressCall(t, c, sb.ID, "GET", "/policy", ""); code != 200 || !strings.Contains(body, "enforcing") {
			t.Errorf("GET /policy behind a squatted port = %d %s", code, body)
		}
		if out, _, _ := x.run("cat /tmp/stolen"); strings.Contains(out, "OPENSANDBOX") || strings.Contains(out, "GET") {
			t.Errorf("the squatter received a request: %q", out)
		}
		// From inside the sandbox, without the token, nothing changes.
		if out, _, _ := x.run(`timeout 2 wget -q -O- --header 'Content-Type: application/json' --post-data '{"defaultAction":"allow"}' http://127.0.0.1:18080/policy`); strings.Contains(out, "ok") {
			t.Errorf("the sandbox replaced its own policy: %q", out)
		}
	})
	if rig.stopEnforcer != nil {
		t.Run("ImpostorNeverGetsTheToken", func(t *testing.T) {
			// While the sidecar is down the sandbox takes its port: the
			// server's calls (and the audit follower's) meet a stranger's
			// certificate, or none, and send nothing.
			rig.stopEnforcer(t, sb.ID)
			var mu sync.Mutex
			var got []string
			stop := rig.squat(t, sb.ID, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				got = append(got, r.Method+" "+r.URL.String()+" "+r.Header.Get(api.HeaderEgressToken))
				mu.Unlock()
				_, _ = io.WriteString(w, `{"status":"ok","mode":"enforcing"}`)
			}))
			defer func() {
				stop()
				rig.startEnforcer(t, sb.ID)
				testutil.WaitFor(t, 20*time.Second, "the sidecar to serve again", func() bool {
					pol, err := eg.Policy(ctx(t))
					return err == nil && pol.Mode == "enforcing"
				})
			}()
			if pol, err := eg.Policy(ctx(t)); err == nil {
				t.Errorf("the egress API answered through a squatted port: %+v", pol)
			}
			time.Sleep(6 * time.Second) // the audit follower reconnects within 5 s
			mu.Lock()
			defer mu.Unlock()
			if len(got) > 0 {
				t.Errorf("the squatter received requests: %q", got)
			}
		})
	}
	t.Run("SandboxCannotUndoEnforcement", func(t *testing.T) {
		for _, cmd := range []string{"ip link set eth0 down", "ip route del default", "ip addr add 10.214.0.250/24 dev eth0"} {
			if out, _, code := x.run(cmd); code == 0 {
				t.Errorf("%q succeeded: %q", cmd, out)
			}
		}
		pid := rig.pid(t, dir, sb.ID)
		// The enforcer itself keeps only CAP_NET_ADMIN once it serves.
		if st, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status"); err != nil || !strings.Contains(string(st), "CapEff:\t0000000000001000") ||
			!strings.Contains(string(st), "NoNewPrivs:\t1") {
			t.Errorf("the enforcer's privileges:\n%s", st)
		}
		// The enforcer is not in the sandbox's pid namespace.
		if out, _, _ := x.run("ps -o comm,args"); strings.Contains(out, "egress") {
			t.Errorf("the sandbox sees its enforcer: %q", out)
		}
		_, _, _ = x.run("kill -9 " + strconv.Itoa(pid))
		if !running(pid) {
			t.Error("the sandbox killed its enforcer")
		}
		if _, ok := get(x, "http://"+netlab.WorldOther+"/"); ok {
			t.Error("a denied address answered after the attempts")
		}
	})
	t.Run("AlwaysDeniedEvenWithDefaultAllow", func(t *testing.T) {
		if _, err := eg.ReplacePolicy(ctx(t), api.NetworkPolicy{DefaultAction: "allow"}); err != nil {
			t.Fatal(err)
		}
		if out, ok := get(x, "http://"+netlab.WorldOther+"/"); !ok || out != "hello from other\n" {
			t.Errorf("defaultAction allow did not open the world: %q %v", out, ok)
		}
		for _, target := range []string{netlab.WorldMetadata, w.UplinkAddr + ":8088", rig.gateway + ":8088"} {
			if out, ok := get(x, "http://"+target+"/"); ok {
				t.Errorf("%s answered under defaultAction allow: %q", target, out)
			}
		}
		if out, _, code := x.run("nslookup allowed.test " + netlab.WorldDNS); code == 0 {
			t.Errorf("DNS to another resolver answered under defaultAction allow: %q", out)
		}
		if _, err := eg.ReplacePolicy(ctx(t), api.NetworkPolicy{DefaultAction: "deny",
			Egress: []api.NetworkRule{{Action: "allow", Target: "allowed.test"}}}); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("EveryDecisionIsInTheServersEventLog", func(t *testing.T) {
		want := []struct{ typ, target, decision, rule string }{
			{"egress.dns", "allowed.test", "allow", "allowed.test"},
			{"egress.connection", netlab.WorldWeb + ":80", "allow", "allowed.test"},
			{"egress.dns", "denied.test", "deny", "default deny"},
			{"egress.connection", netlab.WorldOther + ":80", "deny", "default deny"},
			{"egress.dns", "wild.test", "deny", "default deny"},
			{"egress.connection", worldWild + ":80", "allow", "*.wild.test"},
			{"egress.connection", netlab.WorldDNS + ":53", "deny", "DNS goes only"},
			{"egress.connection", netlab.WorldMetadata + ":80", "deny", "always denied"},
			{"egress.connection", w.UplinkAddr + ":8088", "deny", "always denied"},
			{"egress.connection", netlab.WorldOther + ":80", "allow", "default allow"},
		}
		var missing []string
		complete := func() bool {
			var all []api.SandboxEvent
			var after int64
			for {
				page, err := c.SandboxEvents(ctx(t), sb.ID, sdk.SandboxEventOptions{After: after, Limit: 1000, Type: "egress"})
				if err != nil {
					t.Fatal(err)
				}
				all = append(all, page.Items...)
				if len(page.Items) == 0 {
					break
				}
				after = page.Next
			}
			missing = missing[:0]
			for _, w := range want {
				found := false
				for _, ev := range all {
					var d struct{ Target, Decision, Rule, SandboxID string }
					_ = json.Unmarshal(ev.Detail, &d)
					if ev.Type == w.typ && d.Target == w.target && d.Decision == w.decision && strings.Contains(d.Rule, w.rule) && d.SandboxID == sb.ID {
						found = true
						break
					}
				}
				if !found {
					missing = append(missing, fmt.Sprintf("%s %s %s (%s)", w.typ, w.target, w.decision, w.rule))
				}
			}
			return len(missing) == 0
		}
		// Forwarding batches every 100 ms.
		for deadline := time.Now().Add(10 * time.Second); !complete() && time.Now().Before(deadline); {
			time.Sleep(50 * time.Millisecond)
		}
		if len(missing) > 0 {
			t.Errorf("missing decisions: %v", missing)
		}
	})
	t.Run("DenialsReachTheTenantsStream", func(t *testing.T) {
		st, err := c.Events(ctx(t), sdk.EventStreamOptions{SandboxID: sb.ID, Types: []string{api.EventEgressDenied}, NoFollow: true})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		var n int
		for {
			ev, err := st.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			var d struct{ Decision, Target string }
			if err := json.Unmarshal(ev.Data, &d); err != nil || d.Decision != "deny" || d.Target == "" || ev.SandboxID != sb.ID {
				t.Errorf("egress.denied event %+v: %v", ev, err)
			}
			n++
		}
		// Six denials above, well within the sampling's burst.
		if n < 6 {
			t.Errorf("%d egress.denied events in the stream, want at least 6", n)
		}
	})
	if rig.isolatesUnpoliced {
		t.Run("WithoutAPolicyNoNetwork", func(t *testing.T) {
			// A sandbox on the engine's bridge without a policy reaches
			// nothing, cannot change that, and still answers on execd.
			other, err := c.CreateSandbox(ctx(t), ociCreate(rig.image), sdk.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = c.DeleteSandbox(ctx(t), other.ID) }()
			y := sandboxExecd(t, c, other.ID)
			for _, target := range []string{netlab.WorldWeb, netlab.WorldOther, rig.gateway + ":8088"} {
				if out, ok := get(y, "http://"+target+"/"); ok {
					t.Errorf("%s answered a sandbox without a policy: %q", target, out)
				}
			}
			if out, _, code := y.run("nslookup allowed.test " + netlab.WorldDNS); code == 0 {
				t.Errorf("DNS answered a sandbox without a policy: %q", out)
			}
			for _, cmd := range []string{"ip link set eth0 down", "ip addr add 10.218.0.250/24 dev eth0"} {
				if out, _, code := y.run(cmd); code == 0 {
					t.Errorf("%q succeeded: %q", cmd, out)
				}
			}
			// The image's health check (which would add an address) never
			// ran, here or in the policed sandbox.
			time.Sleep(1500 * time.Millisecond)
			for _, z := range []*execd{x, y} {
				if out, _, _ := z.run("test -e /tmp/healthcheck-ran && echo RAN; ip -4 addr"); strings.Contains(out, "RAN") || strings.Contains(out, "10.218.0.251") {
					t.Errorf("the image's health check ran: %q", out)
				}
			}
			// CAP_NET_ADMIN (bit 12) is gone from every set, the bounding
			// one included.
			out, _, _ := y.run("grep -E '^Cap(Bnd|Eff|Prm)' /proc/self/status")
			for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
				f := strings.Fields(l)
				if len(f) != 2 {
					t.Fatalf("capabilities: %q", out)
				}
				v, err := strconv.ParseUint(f[1], 16, 64)
				if err != nil || v&(1<<12) != 0 {
					t.Errorf("the sandbox holds CAP_NET_ADMIN: %q", l)
				}
			}
		})
	}
	t.Run("SurvivesAServerCrash", func(t *testing.T) {
		old := rig.pid(t, dir, sb.ID)
		s.kill9(t)
		rig.crash(t, sb.ID, old)
		s2 := startServer(t, dir, args...)
		c2 := s2.client(t)
		if _, err := c2.GetSandbox(ctx(t), sb.ID); err != nil {
			t.Fatal(err)
		}
		pid := rig.pid(t, dir, sb.ID)
		if pid == old {
			t.Fatal("the killed enforcer was not replaced")
		}
		x2 := sandboxExecd(t, c2, sb.ID)
		if out, ok := get(x2, "http://allowed.test/"); !ok || out != "hello from web\n" {
			t.Errorf("allowed.test after the crash: %q %v", out, ok)
		}
		if _, ok := get(x2, "http://"+netlab.WorldOther+"/"); ok {
			t.Error("the replaced policy was lost in the crash")
		}
		if err := c2.DeleteSandbox(ctx(t), sb.ID); err != nil {
			t.Fatal(err)
		}
		if running(pid) {
			t.Error("the enforcer outlived its sandbox")
		}
		if out, _ := exec.Command("ip", "-n", w.Uplink, "-o", "link").CombinedOutput(); strings.Count(string(out), "master") != 0 {
			t.Errorf("veths left on the bridge:\n%s", out)
		}
	})
}

// egressPid reads the pid of a sandbox's enforcer from its directory.
func egressPid(t *testing.T, dir string) int {
	t.Helper()
	var st struct {
		Pid int `json:"pid"`
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err := os.ReadFile(filepath.Join(dir, "state.json"))
		if err == nil && json.Unmarshal(b, &st) == nil && st.Pid > 0 && running(st.Pid) {
			return st.Pid
		}
		if time.Now().After(deadline) {
			t.Fatalf("no running egress enforcer in %s: %v", dir, errors.Join(err, fmt.Errorf("state %s", b)))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// running reports whether pid is a live process (not a zombie).
func running(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(b), ')')
	return i > 0 && len(b) > i+2 && b[i+2] != 'Z' && b[i+2] != 'X'
}

// TestOCIEgressEnforcerNobodyRecorded: a server killed after it started
// an enforcer and before it wrote the pid down (at a create, or when it
// restarted a dead one) leaves an enforcer only a search can find. The
// next server must end it: on recovery, before it starts the one it
// records (one enforcer per sandbox), and on delete when no state is
// left at all. The chaos test found the second.
func TestOCIEgressEnforcerNobodyRecorded(t *testing.T) {
	requireOCI(t)
	t.Parallel()
	reg := registry.Start(t)
	registry.Push(t, reg+"/corral/busybox:1", busyboxImage(t))
	w := egressWorld(t)
	dir := t.TempDir()
	rig := localRig(w, "oci", reg+"/corral/busybox:1", nil)
	args := append([]string{"--runtime", "oci", "--egress-upstream", netlab.WorldDNS + ":53"}, rig.args...)
	s := startServer(t, dir, args...)
	req := ociCreate(reg+"/corral/busybox:1", "sleep", "3600")
	req.NetworkPolicy = &api.NetworkPolicy{DefaultAction: "deny", Egress: []api.NetworkRule{{Action: "allow", Target: "allowed.test"}}}
	sb, err := s.client(t).CreateSandbox(ctx(t), req, sdk.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	egressDir := filepath.Join(dir, "oci", "run", "bundles", sb.ID, "egress")
	enforcers := func() []int {
		return pidsWhere(func(args []string) bool {
			return len(args) > 1 && args[1] == "egress" && strings.Contains(strings.Join(args, " "), "--sandbox-id "+sb.ID)
		})
	}
	t.Cleanup(func() {
		// A failure must not leave what it found running.
		for _, pid := range enforcers() {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	// forget rewrites the state file as a server cut at the wrong moment
	// leaves it; the enforcer keeps running.
	forget := func(t *testing.T, remove bool) int {
		t.Helper()
		old := egressPid(t, egressDir)
		s.kill9(t)
		path := filepath.Join(egressDir, "state.json")
		if remove {
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
			return old
		}
		var st map[string]any
		b, err := os.ReadFile(path)
		if err == nil {
			err = json.Unmarshal(b, &st)
		}
		if err != nil {
			t.Fatal(err)
		}
		st["pid"], st["startTime"] = 0, 0
		if b, err = json.Marshal(st); err == nil {
			err = os.WriteFile(path, b, 0o600)
		}
		if err != nil {
			t.Fatal(err)
		}
		return old
	}

	// The servers belong to the test, not a subtest: a subtest's cleanup
	// would delete the sandbox.
	outer := t
	t.Run("RecoveryEndsTheUnrecordedOne", func(t *testing.T) {
		old := forget(t, false)
		s = startServer(outer, dir, args...)
		c := s.client(t)
		if _, err := c.GetSandbox(ctx(t), sb.ID); err != nil {
			t.Fatal(err)
		}
		pid := egressPid(t, egressDir)
		if pid == old {
			t.Fatal("recovery adopted an enforcer the state file does not name")
		}
		testutil.WaitFor(t, 30*time.Second, "the unrecorded enforcer to end", func() bool { return !running(old) })
		if got := enforcers(); len(got) != 1 || got[0] != pid {
			t.Errorf("enforcers of the sandbox after recovery: %v, want only %d", got, pid)
		}
		x := sandboxExecd(t, c, sb.ID)
		if out, ok := get(x, "http://allowed.test/"); !ok || out != "hello from web\n" {
			t.Errorf("allowed.test after recovery: %q %v", out, ok)
		}
		if _, ok := get(x, "http://"+netlab.WorldOther+"/"); ok {
			t.Error("the policy was lost in recovery")
		}
	})
	t.Run("DeleteEndsItWithoutState", func(t *testing.T) {
		forget(t, true)
		s = startServer(outer, dir, args...)
		if err := s.client(t).DeleteSandbox(ctx(t), sb.ID); err != nil {
			t.Fatal(err)
		}
		if got := enforcers(); len(got) != 0 {
			t.Errorf("enforcers outlived their sandbox: %v", got)
		}
		if out, _ := exec.Command("ip", "-n", w.Uplink, "-o", "link").CombinedOutput(); strings.Count(string(out), "master") != 0 {
			t.Errorf("veths left on the bridge:\n%s", out)
		}
	})
}
