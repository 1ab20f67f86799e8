// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/mutate"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/internal/insandbox"
	"github.com/corral-dev/corral/internal/kube/apis/v1alpha1"
	"github.com/corral-dev/corral/internal/kube/kubetest"
	"github.com/corral-dev/corral/internal/testutil"
	"github.com/corral-dev/corral/internal/testutil/corraltest"
	"github.com/corral-dev/corral/internal/testutil/netlab"
	"github.com/corral-dev/corral/internal/testutil/registry"
	"github.com/corral-dev/corral/sdk"
)

var kubeBinary struct {
	sync.Once
	path string
	err  error
}

// kubeWorld is a namespace of the test cluster with `corral controller`
// (the -tags kube build) running for it, and the images imported.
type kubeWorld struct {
	c             *kubetest.Cluster
	ns, busybox   string
	bin, corral   string
	controllerLog *testutil.LockedBuffer
}

func newKubeWorld(t *testing.T, controllerArgs ...string) kubeWorld {
	t.Helper()
	c := kubetest.RequireKube(t)
	kubeBinary.Do(func() { kubeBinary.path, kubeBinary.err = corraltest.BuildTagged(binDir, "kube") })
	if kubeBinary.err != nil {
		t.Fatal(kubeBinary.err)
	}
	w := kubeWorld{c: c, ns: c.Namespace(t), busybox: c.Busybox(t), bin: kubeBinary.path,
		corral: c.CorralImage(t, binary), controllerLog: &testutil.LockedBuffer{}}
	ctl := exec.Command(w.bin, append([]string{"controller", "--kubeconfig", c.Kubeconfig, "--namespace", w.ns,
		"--corral-image", w.corral, "--corral-image-pull-policy", "Never", "--log-format", "text"}, controllerArgs...)...)
	ctl.Stderr = w.controllerLog
	if err := ctl.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = ctl.Process.Kill()
		_ = ctl.Wait()
		if t.Failed() {
			t.Logf("controller log:\n%s", w.controllerLog.String())
		}
	})
	return w
}

func (w kubeWorld) server(t *testing.T) *server {
	return startServerOf(t, w.bin, t.TempDir(), "--runtime", "kubernetes", "--kubeconfig", w.c.Kubeconfig,
		"--kube-namespace", w.ns, "--kube-image-pull-policy", "Never")
}

// TestKubeEndToEnd drives the kubernetes runtime through the lifecycle
// API: create, commands, files, renew moving the Sandbox's expireTime, an
// honest 409 for pause, delete removing the pod, and TTL expiry deleting
// the pod with no server involved.
func TestKubeEndToEnd(t *testing.T) {
	w := newKubeWorld(t)
	s := w.server(t)
	c := s.client(t)
	cx := ctx(t)
	sb, err := c.CreateSandbox(cx, ociCreate(w.busybox), sdk.CreateOptions{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	x, err := c.Sandbox(cx, sb.ID, sdk.SandboxOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out, _, code, err := x.Run(cx, "echo hi from $(hostname); cat /proc/1/cmdline | tr '\\0' ' '", sdk.CommandOptions{})
	if err != nil || code != 0 || !strings.HasPrefix(out, "hi from "+sb.ID[:8]) || !strings.Contains(out, "init -") {
		t.Errorf("command = %q (exit %d, %v)", out, code, err)
	}
	if _, _, code, _ := x.Run(cx, "exit 7", sdk.CommandOptions{}); code != 7 {
		t.Errorf("exit code = %d, want 7", code)
	}
	data := strings.Repeat("corral ", 100000)
	if err := x.Upload(cx, "/tmp/in/data.txt", strings.NewReader(data), 0o644); err != nil {
		t.Fatal(err)
	}
	var back strings.Builder
	if _, err := x.Download(cx, "/tmp/in/data.txt", &back); err != nil || back.String() != data {
		t.Errorf("download: %d bytes, %v", back.Len(), err)
	}

	at := time.Now().Add(2 * time.Hour).Truncate(time.Second)
	if got, err := c.RenewSandbox(cx, sb.ID, at); err != nil || !got.Equal(at) {
		t.Errorf("renew = %v, %v", got, err)
	}
	var cr v1alpha1.Sandbox
	if err := w.c.Client.Get(cx, client.ObjectKey{Namespace: w.ns, Name: sb.ID}, &cr); err != nil {
		t.Fatal(err)
	}
	if cr.Spec.ExpireTime == nil || !cr.Spec.ExpireTime.Time.Equal(at) {
		t.Errorf("the Sandbox's expireTime = %v after renewing to %v", cr.Spec.ExpireTime, at)
	}
	var ae *sdk.APIError
	if err := c.PauseSandbox(cx, sb.ID); !errors.As(err, &ae) || ae.Status != 409 || !strings.Contains(ae.Message, "cannot pause") {
		t.Errorf("pause = %v, want 409 saying the runtime cannot pause", err)
	}

	if err := c.DeleteSandbox(cx, sb.ID); err != nil {
		t.Fatal(err)
	}
	podGone(t, w, sb.ID)

	// Expiry: the controller deletes the Sandbox when its time is up, with
	// the server stopped.
	sb2, err := c.CreateSandbox(cx, ociCreate(w.busybox), sdk.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.RenewSandbox(cx, sb2.ID, time.Now().Add(3*time.Second)); err != nil {
		t.Fatal(err)
	}
	_ = s.cmd.Process.Kill()
	<-s.done
	s.done <- nil
	podGone(t, w, sb2.ID)
	var left v1alpha1.Sandbox
	if err := w.c.Client.Get(cx, client.ObjectKey{Namespace: w.ns, Name: sb2.ID}, &left); !apierrors.IsNotFound(err) {
		t.Errorf("expired Sandbox still there: %v", err)
	}
	s2 := w.server(t)
	got, err := s2.client(t).GetSandbox(cx, sb2.ID)
	if err == nil && got.Status.State != api.StateTerminated && got.Status.State != api.StateFailed {
		t.Errorf("after expiry, a restarted server reports %s", got.Status.State)
	}
}

// TestKubeVolumes: named volumes through the server on the kubernetes
// runtime, each a claim of the namespace (namedVolumeScenario); a host
// volume is refused naming why; nothing is left after.
func TestKubeVolumes(t *testing.T) {
	w := newKubeWorld(t)
	s := w.server(t)
	namedVolumeScenario(t, s, w.busybox)
	req := ociCreate(w.busybox)
	req.Volumes = []api.Volume{{Name: "h", Host: &api.HostVolume{Path: "/srv"}, MountPath: "/h"}}
	var ae *sdk.APIError
	if _, err := s.client(t).CreateSandbox(ctx(t), req, sdk.CreateOptions{}); !errors.As(err, &ae) || ae.Status != 400 ||
		ae.Code != api.CodeVolumeUnsupported || !strings.Contains(ae.Message, "node") {
		t.Errorf("a host volume on kubernetes = %v, want 400 %s saying why", err, api.CodeVolumeUnsupported)
	}
	testutil.WaitFor(t, time.Minute, "the namespace's claims to be deleted", func() bool {
		var pvcs corev1.PersistentVolumeClaimList
		return w.c.Client.List(ctx(t), &pvcs, client.InNamespace(w.ns)) == nil && len(pvcs.Items) == 0
	})
}

// TestOpenSandboxJavaScriptSDKKube runs the JavaScript SDK scenario,
// unchanged, against the kubernetes runtime.
func TestOpenSandboxJavaScriptSDKKube(t *testing.T) {
	w := newKubeWorld(t)
	jsScenario(t, w.server(t), w.busybox)
}

func podGone(t *testing.T, w kubeWorld, id string) {
	t.Helper()
	testutil.WaitFor(t, time.Minute, "the pod of "+id+" to be deleted", func() bool {
		var pod corev1.Pod
		err := w.c.Client.Get(context.Background(), client.ObjectKey{Namespace: w.ns, Name: id}, &pod)
		return apierrors.IsNotFound(err)
	})
}

// TestKubeServerRebuildsFromTheCluster: a server keeping its records in
// its data dir (--kube-records local) that lost its database (a new data
// dir) but keeps its --server-id finds its sandboxes in the cluster and
// imports them — metadata, expiry, token — instead of deleting them as
// orphans; commands and deletes work through it.
func TestKubeServerRebuildsFromTheCluster(t *testing.T) {
	w := newKubeWorld(t)
	args := []string{"--runtime", "kubernetes", "--kubeconfig", w.c.Kubeconfig, "--kube-namespace", w.ns,
		"--kube-image-pull-policy", "Never", "--kube-records", "local", "--server-id", "rebuild-test"}
	s := startServerOf(t, w.bin, t.TempDir(), args...)
	c := s.client(t)
	cx := ctx(t)
	req := ociCreate(w.busybox)
	req.Metadata = map[string]string{"team": "a", "note": "a.b_c-d"}
	sb, err := c.CreateSandbox(cx, req, sdk.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	before, err := c.GetSandbox(cx, sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	_ = s.cmd.Process.Kill()
	<-s.done
	s.done <- nil

	s2 := startServerOf(t, w.bin, t.TempDir(), args...)
	c2 := s2.client(t)
	got, err := c2.GetSandbox(cx, sb.ID)
	if err != nil {
		t.Fatalf("the new server does not know the sandbox: %v\n%s", err, s2.stderr.String())
	}
	if got.Status.State != api.StateRunning || got.Metadata["note"] != "a.b_c-d" || got.Metadata["team"] != "a" ||
		got.ExpiresAt == nil || before.ExpiresAt == nil || got.ExpiresAt.Sub(*before.ExpiresAt).Abs() > time.Second ||
		got.Image == nil || got.Image.URI != w.busybox {
		t.Errorf("imported sandbox = %+v, was %+v", got, before)
	}
	x, err := c2.Sandbox(cx, sb.ID, sdk.SandboxOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if out, _, code, err := x.Run(cx, "echo still here", sdk.CommandOptions{}); err != nil || code != 0 || out != "still here\n" {
		t.Errorf("command through the new server = %q, %d, %v", out, code, err)
	}
	if err := c2.DeleteSandbox(cx, sb.ID); err != nil {
		t.Fatal(err)
	}
	podGone(t, w, sb.ID)

	// A server with another identity leaves the namespace's other
	// sandboxes alone.
	sb3, err := c2.CreateSandbox(cx, ociCreate(w.busybox), sdk.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	otherArgs := append(slices.Clone(args[:len(args)-1]), "someone-else")
	other := startServerOf(t, w.bin, t.TempDir(), otherArgs...)
	if _, err := other.client(t).GetSandbox(cx, sb3.ID); !errors.Is(err, sdk.ErrNotFound) {
		t.Errorf("a server with another id sees the sandbox: %v", err)
	}
	if _, err := c2.GetSandbox(cx, sb3.ID); err != nil {
		t.Errorf("the sandbox is gone after another server started: %v", err)
	}
}

// TestKubeReplicasShareTheCluster: two servers with one --server-id and
// their own (empty) data dirs keep their records in the cluster and
// answer identically — a sandbox created on one is read, commanded,
// renewed, patched and deleted through the other; an Idempotency-Key
// binds once across both; concurrent renews through both all succeed
// (optimistic concurrency retried); a replica started later with an empty
// data dir knows everything.
func TestKubeReplicasShareTheCluster(t *testing.T) {
	w := newKubeWorld(t)
	args := []string{"--runtime", "kubernetes", "--kubeconfig", w.c.Kubeconfig, "--kube-namespace", w.ns,
		"--kube-image-pull-policy", "Never", "--server-id", "replicas"}
	a := startServerOf(t, w.bin, t.TempDir(), args...)
	b := startServerOf(t, w.bin, t.TempDir(), args...)
	ca, cb := a.client(t), b.client(t)
	cx := ctx(t)
	req := ociCreate(w.busybox)
	req.Metadata = map[string]string{"team": "a"}
	sb, err := ca.CreateSandbox(cx, req, sdk.CreateOptions{IdempotencyKey: "replica-key"})
	if err != nil {
		t.Fatal(err)
	}
	// Read through the other replica at once: no waiting for a watch.
	ga, err := ca.GetSandbox(cx, sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	gb, err := cb.GetSandbox(cx, sb.ID)
	if err != nil {
		t.Fatalf("the other replica does not know the sandbox: %v", err)
	}
	if gb.Status.State != api.StateRunning || gb.Metadata["team"] != "a" || !gb.CreatedAt.Equal(ga.CreatedAt) ||
		gb.ExpiresAt == nil || !gb.ExpiresAt.Equal(*ga.ExpiresAt) {
		t.Errorf("replica b answers %+v, replica a %+v", gb, ga)
	}
	again, err := cb.CreateSandbox(cx, req, sdk.CreateOptions{IdempotencyKey: "replica-key"})
	if err != nil || again.ID != sb.ID {
		t.Errorf("the same Idempotency-Key on the other replica made %v (%v), want %s", again, err, sb.ID)
	}
	x, err := cb.Sandbox(cx, sb.ID, sdk.SandboxOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if out, _, code, err := x.Run(cx, "echo via b", sdk.CommandOptions{}); err != nil || code != 0 || out != "via b\n" {
		t.Errorf("command through replica b = %q, %d, %v", out, code, err)
	}

	// Renews through both replicas at once all succeed; the record ends
	// at one of them and both replicas agree.
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		c := ca
		if i%2 == 1 {
			c = cb
		}
		wg.Go(func() {
			_, err := c.RenewSandbox(cx, sb.ID, time.Now().Add(time.Duration(2+i)*time.Hour))
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("concurrent renew: %v", err)
		}
	}
	if _, err := cb.PatchMetadata(cx, sb.ID, map[string]*string{"team": new("b")}); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "both replicas to agree", func() bool {
		ga, errA := ca.GetSandbox(cx, sb.ID)
		gb, errB := cb.GetSandbox(cx, sb.ID)
		return errA == nil && errB == nil && ga.Metadata["team"] == "b" && gb.Metadata["team"] == "b" &&
			ga.ExpiresAt.Equal(*gb.ExpiresAt) && ga.ExpiresAt.After(time.Now().Add(90*time.Minute))
	})
	var cr v1alpha1.Sandbox
	if err := w.c.Client.Get(cx, client.ObjectKey{Namespace: w.ns, Name: sb.ID}, &cr); err != nil {
		t.Fatal(err)
	}
	// The Sandbox keeps whole seconds: the record's expiry rounded up.
	gb, err = cb.GetSandbox(cx, sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	if cr.Spec.ExpireTime == nil || !cr.Spec.ExpireTime.Time.Equal(gb.ExpiresAt.Add(time.Second-1).Truncate(time.Second)) {
		t.Errorf("the Sandbox's expireTime %v does not match the record's %v", cr.Spec.ExpireTime, gb.ExpiresAt)
	}
	evs, err := ca.SandboxEvents(cx, sb.ID, sdk.SandboxEventOptions{})
	if err != nil || len(evs.Items) < 4 {
		t.Errorf("events = %+v, %v", evs, err)
	}

	// API keys are shared too: one made through a is accepted by b, and
	// revoked through b it is refused by a.
	k, err := ca.CreateAPIKey(cx, api.CreateAPIKeyRequest{Tenant: "team-x", Name: "replicated"})
	if err != nil {
		t.Fatal(err)
	}
	asKey := func(s *server) *sdk.Client {
		c, err := sdk.New(sdk.WithBaseURL(s.url), sdk.WithAPIKey(k.Key))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	testutil.WaitFor(t, 10*time.Second, "replica b to accept a key made through a", func() bool {
		_, err := asKey(b).ListSandboxes(cx, sdk.ListOptions{})
		return err == nil
	})
	if err := cb.RevokeAPIKey(cx, k.ID); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "replica a to refuse a key revoked through b", func() bool {
		_, err := asKey(a).ListSandboxes(cx, sdk.ListOptions{})
		var ae *sdk.APIError
		return errors.As(err, &ae) && ae.Status == http.StatusUnauthorized
	})

	// A replica that starts later, with an empty data dir, knows it all.
	sb2, err := cb.CreateSandbox(cx, ociCreate(w.busybox), sdk.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c3 := startServerOf(t, w.bin, t.TempDir(), args...).client(t)
	l, err := c3.ListSandboxes(cx, sdk.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, it := range l.Items {
		ids = append(ids, it.ID)
	}
	// Other tests share the namespace (and the admin key): their
	// sandboxes may be listed too.
	if slices.Sort(ids); !slices.Contains(ids, sb.ID) || !slices.Contains(ids, sb2.ID) {
		t.Errorf("a new replica lists %v, want %s and %s", ids, sb.ID, sb2.ID)
	}

	// Deleted through b: gone on a and b at once, pod removed.
	if err := cb.DeleteSandbox(cx, sb.ID); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]*sdk.Client{"a": ca, "b": cb, "c": c3} {
		testutil.WaitFor(t, 10*time.Second, "replica "+name+" to forget the deleted sandbox", func() bool {
			_, err := c.GetSandbox(cx, sb.ID)
			return errors.Is(err, sdk.ErrNotFound)
		})
	}
	podGone(t, w, sb.ID)
	if err := ca.DeleteSandbox(cx, sb2.ID); err != nil {
		t.Fatal(err)
	}
	podGone(t, w, sb2.ID)
}

// TestKubeEgressPolicy: a Sandbox with a network policy gets the egress
// sidecar. From inside the sandbox, an allowed name resolves and answers,
// a denied one does not resolve, a literal address no rule allows and
// another resolver are unreachable; the policy changes at run time
// through the egress API (server endpoint, token); the sandbox has no
// NET_ADMIN and cannot see the sidecar. The servers the pods reach are the
// test's own, on the node's bridge address and one the test adds to it.
func TestKubeEgressPolicy(t *testing.T) {
	kubetest.RequireKube(t)
	// The servers are on addresses the test adds to the node's bridge:
	// public-looking ones, since the node's own (private) address is in
	// every sandbox's always-deny set.
	const web, other = "192.0.2.11", "192.0.2.10" // an allowed host, and a "host no rule allows"
	for _, a := range []string{web, other} {
		if out, err := exec.Command("ip", "addr", "add", a+"/32", "dev", "k8sbr0").CombinedOutput(); err != nil {
			t.Fatalf("ip addr add: %v %s", err, out)
		}
		t.Cleanup(func() { _ = exec.Command("ip", "addr", "del", a+"/32", "dev", "k8sbr0").Run() })
	}
	node := kubetest.NodeAddress
	dnsAddr := netlab.ServeDNS(t, "", node+":53", map[string]string{
		"web.test.": web, "denied.test.": web, "later.test.": other, "node.test.": node,
	})
	var port string
	for _, addr := range []string{web, other} {
		ln, err := net.Listen("tcp", addr+":"+cmp.Or(port, "0"))
		if err != nil {
			t.Fatal(err)
		}
		_, port, _ = net.SplitHostPort(ln.Addr().String())
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, "hello from %s\n", addr)
		})}
		go func() { _ = srv.Serve(ln) }()
		t.Cleanup(func() { srv.Close() })
	}
	w := newKubeWorld(t, "--egress-upstream", dnsAddr)
	s := w.server(t)
	c := s.client(t)
	cx := ctx(t)
	req := ociCreate(w.busybox)
	req.NetworkPolicy = &api.NetworkPolicy{DefaultAction: "deny", Egress: []api.NetworkRule{{Action: "allow", Target: "web.test"}}}
	sb, err := c.CreateSandbox(cx, req, sdk.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	x, err := c.Sandbox(cx, sb.ID, sdk.SandboxOptions{})
	if err != nil {
		t.Fatal(err)
	}
	run := func(cmd string) (string, int) {
		out, errOut, code, err := x.Run(cx, cmd, sdk.CommandOptions{})
		if err != nil {
			t.Fatalf("%s: %v", cmd, err)
		}
		return out + errOut, code
	}
	// What must answer gets time on a loaded machine; what must not, 3 s.
	get := func(host string) string { return "timeout 20 wget -q -O- http://" + host + ":" + port + "/" }
	url := func(host string) string { return "timeout 3 wget -q -O- http://" + host + ":" + port + "/" }
	if out, code := run(get("web.test")); code != 0 || out != "hello from "+web+"\n" {
		t.Errorf("allowed name: %q (exit %d)", out, code)
	}
	if out, code := run("nslookup denied.test"); code == 0 && strings.Contains(out, web) {
		t.Errorf("a denied name resolved: %q", out)
	}
	if out, code := run(url(other)); code == 0 {
		t.Errorf("a literal address no rule allows answered: %q", out)
	}
	if out, code := run("nslookup web.test " + node); code == 0 {
		t.Errorf("another resolver answered: %q", out)
	}
	// No NET_ADMIN (bit 12) in the sandbox, and no sidecar in sight.
	if out, _ := run("grep CapEff /proc/self/status"); !strings.Contains(out, "CapEff") || capBit(t, out, 12) {
		t.Errorf("the sandbox has NET_ADMIN: %q", out)
	}
	if out, _ := run("ps -o args"); strings.Contains(out, "egress") {
		t.Errorf("the sandbox sees the enforcer: %q", out)
	}

	// A sandbox without a policy has no network, as on the other
	// runtimes: not the hosts above, not the node's resolver, not the
	// API server, not another pod; its own execd (inbound) still answers.
	free, err := c.CreateSandbox(cx, ociCreate(w.busybox), sdk.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fx, err := c.Sandbox(cx, free.ID, sdk.SandboxOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var policed corev1.Pod
	if err := w.c.Client.Get(cx, client.ObjectKey{Namespace: w.ns, Name: sb.ID}, &policed); err != nil {
		t.Fatal(err)
	}
	policedIP := policed.Status.PodIP
	for _, cmd := range []string{url(other), url(web), "nslookup web.test " + node, "timeout 3 nc -w 2 " + node + " 6443 </dev/null",
		"timeout 3 nc -w 2 " + policedIP + " 44772 </dev/null"} {
		if out, errOut, code, err := fx.Run(cx, cmd, sdk.CommandOptions{}); err != nil || code == 0 {
			t.Errorf("without a policy, %s worked: %q %q (exit %d, %v)", cmd, out, errOut, code, err)
		}
	}
	if out, _, code, err := fx.Run(cx, "grep CapEff /proc/self/status", sdk.CommandOptions{}); err != nil || code != 0 || capBit(t, out, 12) {
		t.Errorf("a sandbox without a policy kept NET_ADMIN or does not answer: %q %v", out, err)
	}
	if err := c.DeleteSandbox(cx, free.ID); err != nil {
		t.Fatal(err)
	}

	eg, err := c.Egress(cx, sb.ID, sdk.SandboxOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if st, err := eg.AddRules(cx, api.NetworkRule{Action: "allow", Target: "later.test"}); err != nil || st.Mode != "enforcing" {
		t.Fatalf("add a rule through the egress API: %+v %v", st, err)
	}
	if out, code := run(get("later.test")); code != 0 || out != "hello from "+other+"\n" {
		t.Errorf("a name allowed at run time: %q (exit %d)", out, code)
	}
	if out, _ := run(`timeout 2 wget -q -O- --header 'Content-Type: application/json' --post-data '{"defaultAction":"allow"}' http://127.0.0.1:18080/policy`); strings.Contains(out, "ok") {
		t.Errorf("the sandbox changed its own policy without the token: %q", out)
	}
	if t.Failed() {
		_, evs := egressCall(t, c, sb.ID, "GET", "/events", "")
		t.Logf("egress decisions:\n%s", evs)
		t.Logf("egress sidecar log:\n%s", w.c.PodLogs(w.ns, sb.ID, "corral-egress"))
	}
	if err := c.DeleteSandbox(cx, sb.ID); err != nil {
		t.Fatal(err)
	}
	podGone(t, w, sb.ID)

	// A pool whose warm pods carry the sidecar serves creates with a
	// policy: the adopting sandbox's policy and token are set on the warm
	// enforcer before its entrypoint starts; the warm token stops working.
	pool := &v1alpha1.SandboxPool{ObjectMeta: metav1.ObjectMeta{Name: "confined", Namespace: w.ns},
		Spec: v1alpha1.SandboxPoolSpec{Warm: 1, Template: v1alpha1.SandboxTemplate{Image: w.busybox, ImagePullPolicy: corev1.PullNever, Egress: true,
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{ // what ociCreate asks for
				corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("512Mi")}}}}}
	if err := w.c.Client.Create(cx, pool); err != nil {
		t.Fatal(err)
	}
	var warmToken string
	testutil.WaitFor(t, 2*time.Minute, "a warm pod with an egress sidecar", func() bool {
		var p v1alpha1.SandboxPool
		var secs corev1.SecretList
		if w.c.Client.Get(cx, client.ObjectKeyFromObject(pool), &p) != nil || p.Status.Ready < 1 ||
			w.c.Client.List(cx, &secs, client.InNamespace(w.ns), client.MatchingLabels{"corral.dev/pool": pool.Name}) != nil || len(secs.Items) != 1 {
			return false
		}
		warmToken = string(secs.Items[0].Data["egress-token"])
		return true
	})
	time.Sleep(time.Second) // the server's cache sees the pool ready
	sb2, err := c.CreateSandbox(cx, req, sdk.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var cr v1alpha1.Sandbox
	if err := w.c.Client.Get(cx, client.ObjectKey{Namespace: w.ns, Name: sb2.ID}, &cr); err != nil || !strings.HasPrefix(cr.Status.PodName, pool.Name+"-") {
		t.Errorf("the sandbox with a policy did not adopt a warm pod: pod %q (poolRef %q), %v", cr.Status.PodName, cr.Spec.PoolRef, err)
	}
	x2, err := c.Sandbox(cx, sb2.ID, sdk.SandboxOptions{})
	if err != nil {
		t.Fatal(err)
	}
	run2 := func(cmd string) (string, int) {
		out, errOut, code, err := x2.Run(cx, cmd, sdk.CommandOptions{})
		if err != nil {
			t.Fatalf("%s: %v", cmd, err)
		}
		return out + errOut, code
	}
	if out, code := run2(get("web.test")); code != 0 || out != "hello from "+web+"\n" {
		t.Errorf("adopted: allowed name: %q (exit %d)", out, code)
	}
	if out, code := run2(url(other)); code == 0 {
		t.Errorf("adopted: a literal address no rule allows answered: %q", out)
	}
	eg2, err := c.Egress(cx, sb2.ID, sdk.SandboxOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pol, err := eg2.Policy(cx); err != nil || pol.Policy == nil || len(pol.Policy.Egress) != 1 || pol.Policy.Egress[0].Target != "web.test" {
		t.Errorf("adopted: the policy through the sandbox's token: %+v %v", pol, err)
	}
	ep, err := c.GetEndpoint(cx, sb2.ID, api.EgressPort, false)
	if err != nil {
		t.Fatal(err)
	}
	hr, _ := http.NewRequestWithContext(cx, http.MethodGet, "http://"+ep.Endpoint+"/policy", nil)
	hr.Header.Set(api.HeaderEgressToken, warmToken)
	if res, err := http.DefaultClient.Do(hr); err != nil || res.StatusCode != http.StatusUnauthorized {
		t.Errorf("the warm pod's egress token still works after the adoption: %v %v", res, err)
	} else {
		res.Body.Close()
	}
	if err := c.DeleteSandbox(cx, sb2.ID); err != nil {
		t.Fatal(err)
	}
	if err := w.c.Client.Delete(cx, pool); err != nil {
		t.Fatal(err)
	}
}

// capBit reports whether bit n is set in a /proc status Cap line.
func capBit(t *testing.T, line string, n uint) bool {
	t.Helper()
	f := strings.Fields(line)
	v, err := strconv.ParseUint(f[len(f)-1], 16, 64)
	if err != nil {
		t.Fatalf("capabilities %q: %v", line, err)
	}
	return v&(1<<n) != 0
}

// TestKubeCommandsRejectBadInput: the -tags kube build's commands stop at
// start with one sentence naming the mistaken flag.
func TestKubeCommandsRejectBadInput(t *testing.T) {
	kubetest.RequireKube(t)
	kubeBinary.Do(func() { kubeBinary.path, kubeBinary.err = corraltest.BuildTagged(binDir, "kube") })
	if kubeBinary.err != nil {
		t.Fatal(kubeBinary.err)
	}
	// A kubeconfig that parses; nothing gets far enough to dial it.
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kc, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: x}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600); err != nil {
		t.Fatal(err)
	}
	serve := []string{"serve", "--runtime", "kubernetes", "--listen", "127.0.0.1:0", "--api-key", testKey}
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"controller", "--kubeconfig", kc}, "--corral-image"},
		{[]string{"controller", "--kubeconfig", kc, "--corral-image", "x", "--corral-image-pull-policy", "Sometimes"}, "--corral-image-pull-policy"},
		{[]string{"controller", "--kubeconfig", "/nonexistent/kubeconfig", "--corral-image", "x"}, "kubeconfig"},
		{append(slices.Clone(serve), "--kubeconfig", kc, "--kube-image-pull-policy", "Sometimes"), "--kube-image-pull-policy"},
		{append(slices.Clone(serve), "--kubeconfig", kc, "--kube-endpoints", "carrier-pigeon"), "endpoints"},
		{append(slices.Clone(serve), "--kubeconfig", "/nonexistent/kubeconfig"), "kubeconfig"},
		{append(slices.Clone(serve), "--kubeconfig", kc, "--kube-records", "etcd"), "--kube-records"},
		{append(slices.Clone(serve), "--kubeconfig", kc, "--kube-volume-size", "1Ki"), "--kube-volume-size"},
		{append(slices.Clone(serve), "--kubeconfig", kc, "--kube-storage-class", "Fast_Disks"), "--kube-storage-class"},
		{append(slices.Clone(serve), "--kubeconfig", kc, "--allowed-host-paths", "/srv"), "mounts no host volumes"},
		{[]string{"controller", "--kubeconfig", kc, "--corral-image", "x", "--egress-upstream", "127.0.0.1:53"}, "--egress-upstream"},
		{[]string{"controller", "--kubeconfig", kc, "--corral-image", "x", "--egress-upstream", "dns.example"}, "--egress-upstream"},
		{[]string{"controller", "--kubeconfig", kc, "--corral-image", "x", "--egress-deny", "10.0.0.0/33"}, "--egress-deny"},
		{[]string{"controller", "--kubeconfig", kc, "--corral-image", "x", "--egress-allow-private", "169.254.0.0/16"}, "--egress-allow-private"},
		{[]string{"egress", "--netns", "self", "--token", "t", "--allow-private", "0.0.0.0/0"}, "--allow-private"},
		{[]string{"egress", "--netns", "self", "--token", "t", "--exempt-mark", "0"}, "--exempt-mark"},
		{[]string{"egress", "--netns", "self", "--token", "t", "--exempt-mark", "lots"}, "--exempt-mark"},
	} {
		args := tc.args
		if args[0] == "serve" {
			args = append(args, "--data-dir", t.TempDir())
		}
		out, err := exec.Command(kubeBinary.path, args...).CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() == 0 || !strings.Contains(string(out), tc.msg) {
			t.Errorf("corral-kube %s: %v, output %q; want a failure naming %s", strings.Join(tc.args, " "), err, out, tc.msg)
		}
	}
}

// TestHostileSandboxKube runs what applies of the hostile-sandbox suite
// on the kubernetes runtime: a sandbox cannot read its execd token, a
// sandbox without a policy reaches nothing (the node, its API server,
// another pod), one with allow-all reaches none of the cluster's private
// addresses, a pids limit is refused rather than dropped, and another
// tenant's sandboxes work throughout.
func TestHostileSandboxKube(t *testing.T) {
	// The tier first: what follows changes the test cluster's bridge.
	kubetest.RequireKube(t)
	const web = "192.0.2.12" // a "public" host on the node's bridge
	if out, err := exec.Command("ip", "addr", "add", web+"/32", "dev", "k8sbr0").CombinedOutput(); err != nil {
		t.Fatalf("ip addr add: %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "addr", "del", web+"/32", "dev", "k8sbr0").Run() })
	ln, err := net.Listen("tcp", web+":0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "public") })}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })
	node := kubetest.NodeAddress
	dnsAddr := netlab.ServeDNS(t, "", node+":53", map[string]string{"public.test.": web, "node.test.": node})
	w := newKubeWorld(t, "--egress-upstream", dnsAddr)
	s := w.server(t)
	admin := s.client(t)
	tenant := func(name string) *sdk.Client {
		k, err := admin.CreateAPIKey(ctx(t), api.CreateAPIKeyRequest{Tenant: name, Name: name})
		if err != nil {
			t.Fatal(err)
		}
		c, err := sdk.New(sdk.WithBaseURL(s.url), sdk.WithAPIKey(k.Key))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	attacker, victim := tenant("attacker"), tenant("victim")
	// Small sandboxes: a 2-core node schedules only two of ociCreate's.
	small := func(entry ...string) api.CreateSandboxRequest {
		r := ociCreate(w.busybox, entry...)
		r.ResourceLimits = map[string]string{"cpu": "250m", "memory": "128Mi"}
		return r
	}
	run := func(c *sdk.Client, id, cmd string) (string, int) {
		x, err := c.Sandbox(ctx(t), id, sdk.SandboxOptions{})
		if err != nil {
			t.Fatal(err)
		}
		out, errOut, code, err := x.Run(ctx(t), cmd, sdk.CommandOptions{})
		if err != nil {
			t.Fatalf("%s: %v", cmd, err)
		}
		return out + errOut, code
	}
	victimWorks := func() {
		t.Helper()
		sb, err := victim.CreateSandbox(ctx(t), small(), sdk.CreateOptions{})
		if err != nil {
			t.Fatalf("the victim's create: %v", err)
		}
		if out, code := run(victim, sb.ID, "echo victim-ok"); code != 0 || out != "victim-ok\n" {
			t.Errorf("the victim's command = %q (exit %d)", out, code)
		}
		if err := victim.DeleteSandbox(ctx(t), sb.ID); err != nil {
			t.Errorf("the victim's delete: %v", err)
		}
	}
	victimWorks()

	plain, err := attacker.CreateSandbox(ctx(t), small(), sdk.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ep, err := attacker.GetEndpoint(ctx(t), plain.ID, api.ExecdPort, false)
	if err != nil {
		t.Fatal(err)
	}
	token := ep.Headers[api.HeaderExecdToken]
	out, _ := run(attacker, plain.ID, "for p in /proc/[0-9]*; do cat $p/environ $p/cmdline 2>/dev/null; head -c 65536 $p/mem 2>/dev/null; done | tr '\\0' '\\n'; cat /run/corral-warm/* 2>/dev/null")
	if token == "" || strings.Contains(out, token) {
		t.Errorf("code in the pod read its execd token")
	}
	var victimPod corev1.Pod
	vsb, err := victim.CreateSandbox(ctx(t), small("sh", "-c", "while true; do echo victim-service | nc -l -p 8080; done"), sdk.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.c.Client.Get(ctx(t), client.ObjectKey{Namespace: w.ns, Name: vsb.ID}, &victimPod); err != nil {
		t.Fatal(err)
	}
	probes := []string{"timeout 3 wget -q -O- http://" + web + ":" + port + "/", "timeout 3 nc -w 2 " + node + " 6443 </dev/null",
		"timeout 3 nc -w 2 " + victimPod.Status.PodIP + " 8080 </dev/null", "timeout 3 nslookup public.test " + node}
	for _, cmd := range probes {
		if out, code := run(attacker, plain.ID, cmd); code == 0 {
			t.Errorf("a sandbox without a policy: %s worked: %q", cmd, out)
		}
	}
	// With allow-all: the internet-like host, nothing private.
	open := small()
	open.NetworkPolicy = &api.NetworkPolicy{DefaultAction: "allow", Egress: []api.NetworkRule{{Action: "allow", Target: "10.0.0.0/8"}}}
	osb, err := attacker.CreateSandbox(ctx(t), open, sdk.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if out, code := run(attacker, osb.ID, "timeout 20 wget -q -O- http://public.test:"+port+"/"); code != 0 || out != "public\n" {
		t.Errorf("allow-all does not reach a public host: %q (exit %d)", out, code)
	}
	for _, cmd := range probes[1:3] {
		if out, code := run(attacker, osb.ID, cmd); code == 0 {
			t.Errorf("allow-all: %s worked: %q", cmd, out)
		}
	}
	if out, code := run(attacker, osb.ID, "timeout 3 wget -q -O- http://node.test:"+port+"/"); code == 0 {
		t.Errorf("allow-all reached the node by a name: %q", out)
	}
	// A pids limit is refused, not dropped.
	req := small()
	req.ResourceLimits["pids"] = "64"
	_, err = attacker.CreateSandbox(ctx(t), req, sdk.CreateOptions{})
	var ae *sdk.APIError
	if !errors.As(err, &ae) || ae.Status != 400 || !strings.Contains(ae.Message, "pids") {
		t.Errorf("a pids limit on kubernetes = %v, want a 400 naming it", err)
	}
	victimWorks()
	for _, id := range []string{plain.ID, osb.ID} {
		if err := attacker.DeleteSandbox(ctx(t), id); err != nil {
			t.Errorf("delete: %v", err)
		}
	}
	if err := victim.DeleteSandbox(ctx(t), vsb.ID); err != nil {
		t.Errorf("delete: %v", err)
	}
	// The review's H1 on this runtime: a claim at a path through a link
	// in the image (/v -> /) is refused before the sandbox's container
	// starts (the runtime mounts claims after corral's binary, and would
	// follow the link); the same claim where no link leads mounts.
	t.Run("VolumeOverCorral", func(t *testing.T) {
		layer, err := registry.BusyboxLayer()
		if err != nil {
			t.Fatal(err)
		}
		img, err := mutate.AppendLayers(kubetest.Image(t, layer, "/bin/sh"), tarLayer(t, []tarFile{
			{name: "v", link: "/"}, {name: "deep/", dir: true, mode: 0o755}, {name: "deep/w", link: "/"},
		}))
		if err != nil {
			t.Fatal(err)
		}
		const linked = "corral.test/linked:1"
		w.c.Import(t, linked, img)
		withTools := func(image, target string) api.CreateSandboxRequest {
			r := small()
			r.Image = &api.ImageSpec{URI: image}
			r.Volumes = []api.Volume{{Name: "tools", PVC: &api.PVCVolume{ClaimName: "tools"}, MountPath: target}}
			return r
		}
		wsb, err := attacker.CreateSandbox(ctx(t), withTools(w.busybox, "/tools"), sdk.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if out, code := run(attacker, wsb.ID, "printf '#!/bin/sh\\necho TENANT-PID1-RAN\\nexec sleep 3600\\n' > /tools/corral && chmod 755 /tools/corral && echo ok"); code != 0 || out != "ok\n" {
			t.Fatalf("write the tenant's program: %q (exit %d)", out, code)
		}
		if err := attacker.DeleteSandbox(ctx(t), wsb.ID); err != nil {
			t.Fatal(err)
		}
		for _, target := range reservedThroughLink() {
			sb, err := attacker.CreateSandbox(ctx(t), withTools(linked, target), sdk.CreateOptions{})
			if err == nil {
				out, _ := run(attacker, sb.ID, "cat /proc/1/cmdline | tr '\\0' ' '")
				t.Errorf("%s: the create was accepted (PID 1 runs %q)", target, out)
				_ = attacker.DeleteSandbox(ctx(t), sb.ID)
				continue
			}
			var ae *sdk.APIError
			if !errors.As(err, &ae) || ae.Status != 400 || ae.Code != api.CodeVolumeInvalidMountPath || !strings.Contains(ae.Message, target) {
				t.Errorf("%s: create = %v, want a 400 %s naming the mount path", target, err, api.CodeVolumeInvalidMountPath)
			}
		}
		sb, err := attacker.CreateSandbox(ctx(t), withTools(linked, "/opt/tools"), sdk.CreateOptions{})
		if err != nil {
			t.Fatalf("the claim at a path without links: %v", err)
		}
		if out, code := run(attacker, sb.ID, "test -x /opt/tools/corral && cat /proc/1/cmdline | tr '\\0' ' '"); code != 0 || !strings.HasPrefix(out, insandbox.Binary+" init ") {
			t.Errorf("the claim at a path without links: %q (exit %d)", out, code)
		}
		if err := attacker.DeleteSandbox(ctx(t), sb.ID); err != nil {
			t.Errorf("delete: %v", err)
		}
		victimWorks()
	})
}
