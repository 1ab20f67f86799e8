// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/corral-dev/corral/internal/initproc"
	"github.com/corral-dev/corral/internal/insandbox"
	"github.com/corral-dev/corral/internal/kube/apis/v1alpha1"
	"github.com/corral-dev/corral/internal/verifier"
)

// TestEgressSidecar checks the pod of a Sandbox with an egress policy
// without a cluster: the enforcer is a native sidecar started before the
// sandbox with NET_ADMIN and its token from the access Secret; the
// sandbox has neither NET_ADMIN nor NET_RAW nor the token, and resolves
// through the sidecar. Without a policy, none of it is there.
func TestEgressSidecar(t *testing.T) {
	r := &sandboxReconciler{cfg: Config{CorralImage: "corral:test", EgressUpstreams: []string{"10.96.0.10:53"}, EgressDeny: []string{"10.0.0.0/8"}}}
	sbx := &v1alpha1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: "s1", Namespace: "ns"}, Spec: v1alpha1.SandboxSpec{
		Image: "busybox", Entrypoint: []string{"sleep", "1d"}, AccessSecretName: "corral-s1",
		Egress: &v1alpha1.SandboxEgress{Policy: `{"defaultAction":"deny"}`},
	}}
	p := r.podFor(sbx, "the-execd-token")
	if len(p.Spec.InitContainers) != 2 || p.Spec.InitContainers[0].Name != InstallContainerName {
		t.Fatalf("init containers: %+v", p.Spec.InitContainers)
	}
	eg := p.Spec.InitContainers[1]
	if eg.Name != EgressContainerName || eg.RestartPolicy == nil || *eg.RestartPolicy != corev1.ContainerRestartPolicyAlways || eg.StartupProbe == nil {
		t.Errorf("the enforcer is not a native sidecar gating the sandbox: %+v", eg)
	}
	if caps := eg.SecurityContext.Capabilities; !slices.Contains(caps.Add, "NET_ADMIN") || !slices.Contains(caps.Drop, "ALL") {
		t.Errorf("sidecar capabilities: %+v", caps)
	}
	args := eg.Command
	for _, want := range [][2]string{{"--netns", "self"}, {"--policy", `{"defaultAction":"deny"}`}, {"--upstream", "10.96.0.10:53"}, {"--deny", "10.0.0.0/8"}, {"--exempt-mark", "0x6372"}} {
		i := slices.Index(args, want[0])
		if i < 0 || i+1 >= len(args) || args[i+1] != want[1] {
			t.Errorf("sidecar %v lacks %s %s", args, want[0], want[1])
		}
	}
	if len(eg.Env) != 1 || eg.Env[0].ValueFrom.SecretKeyRef.Name != "corral-s1" || eg.Env[0].ValueFrom.SecretKeyRef.Key != v1alpha1.EgressTokenKey {
		t.Errorf("sidecar token: %+v", eg.Env)
	}
	sb := p.Spec.Containers[0]
	if caps := sb.SecurityContext.Capabilities; !slices.Equal(caps.Drop, []corev1.Capability{"ALL"}) ||
		!slices.Equal(caps.Add, sandboxCapabilities()) {
		t.Errorf("sandbox capabilities: %+v", caps)
	}
	if sc := sb.SecurityContext; sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Errorf("the sandbox may gain privileges (no no_new_privs): %+v", sc)
	}
	if init := parseInit(t, sb.Command); init.IsolateNetwork != "" || !slices.Equal(init.Entrypoint, []string{"sleep", "1d"}) {
		t.Errorf("a sandbox with a policy is isolated too, or lost its entrypoint: %v", sb.Command)
	}
	// The pod holds execd's token's verifier, never the token.
	for _, e := range sb.Env {
		if e.Name == "EXECD_ACCESS_TOKEN" && (e.ValueFrom != nil || e.Value != verifier.Of("the-execd-token")) {
			t.Errorf("execd's token in the pod: %+v", e)
		}
	}
	for _, e := range sb.Env {
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && e.ValueFrom.SecretKeyRef.Key == v1alpha1.EgressTokenKey {
			t.Error("the sandbox gets the egress token")
		}
	}
	if p.Spec.ShareProcessNamespace != nil && *p.Spec.ShareProcessNamespace {
		t.Error("the sandbox shares the sidecar's PID namespace")
	}
	if p.Spec.DNSPolicy != corev1.DNSNone || p.Spec.DNSConfig == nil || !slices.Equal(p.Spec.DNSConfig.Nameservers, []string{"127.0.0.1"}) {
		t.Errorf("pod DNS: %s %+v", p.Spec.DNSPolicy, p.Spec.DNSConfig)
	}

	sbx.Spec.Egress = nil
	p = r.podFor(sbx, "the-execd-token")
	if len(p.Spec.InitContainers) != 1 || p.Spec.DNSPolicy == corev1.DNSNone {
		t.Errorf("a Sandbox without a policy got egress parts: %+v", p.Spec)
	}
	// Without a policy, no network: the install container isolates the
	// pod, and only it holds NET_ADMIN; the sandbox's never does.
	sb = p.Spec.Containers[0]
	if in := p.Spec.InitContainers[0]; !slices.Contains(in.Command, "--isolate-network") || !slices.Contains(in.SecurityContext.Capabilities.Add, "NET_ADMIN") {
		t.Errorf("a Sandbox without a policy is not isolated by its install container: %v %+v", in.Command, in.SecurityContext.Capabilities)
	}
	if parseInit(t, sb.Command).IsolateNetwork != "" || slices.Contains(sb.SecurityContext.Capabilities.Add, "NET_ADMIN") {
		t.Errorf("the sandbox's container isolates, or holds NET_ADMIN: %v %+v", sb.Command, sb.SecurityContext.Capabilities)
	}
	// Pools: only pods with the sidecar serve Sandboxes with a policy, and
	// only Sandboxes with one adopt those; a warm sidecar denies
	// everything, with the warm pod's own token.
	sbx.Spec.Egress = &v1alpha1.SandboxEgress{Policy: "{}"}
	plain := &v1alpha1.SandboxPool{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}, Spec: v1alpha1.SandboxPoolSpec{
		Template: v1alpha1.SandboxTemplate{Image: "busybox"}}}
	confined := plain.DeepCopy()
	confined.Spec.Template.Egress = true
	if plain.Spec.Template.Matches(sbx) || !confined.Spec.Template.Matches(sbx) {
		t.Error("a Sandbox with a policy matches the wrong pools")
	}
	sbx.Spec.Egress = nil
	if !plain.Spec.Template.Matches(sbx) || confined.Spec.Template.Matches(sbx) {
		t.Error("a Sandbox without a policy matches the wrong pools")
	}
	pr := &poolReconciler{cfg: r.cfg}
	if w := pr.warmPodFor(plain, "p-1", "warm-token"); len(w.Spec.InitContainers) != 1 || !slices.Contains(w.Spec.InitContainers[0].Command, "--isolate-network") {
		t.Errorf("a plain pool's pod has a sidecar, or is not isolated: %+v", w.Spec)
	}
	w := pr.warmPodFor(confined, "p-2", "warm-token")
	if len(w.Spec.InitContainers) != 2 {
		t.Fatalf("a pool with egress has no sidecar: %+v", w.Spec.InitContainers)
	}
	wc := w.Spec.InitContainers[1]
	if i := slices.Index(wc.Command, "--policy"); i < 0 || wc.Command[i+1] != warmPolicy || !slices.Contains(wc.Command, "--token-state") {
		t.Errorf("warm sidecar: %v", wc.Command)
	}
	if wc.Env[0].ValueFrom.SecretKeyRef.Name != warmSecret("p-2") {
		t.Errorf("warm sidecar token from %s", wc.Env[0].ValueFrom.SecretKeyRef.Name)
	}
}

// parseInit parses a pod's PID 1 command line as corral init does.
func parseInit(t *testing.T, command []string) initproc.Options {
	t.Helper()
	if len(command) < 2 || command[0] != insandbox.Binary || command[1] != "init" {
		t.Fatalf("PID 1 is not corral init: %q", command)
	}
	o, err := initproc.ParseArgs(command[2:])
	if err != nil {
		t.Fatalf("corral init refuses %q: %v", command, err)
	}
	return o
}

// A warm pod's PID 1 waits on the hand-over volume, as adoption expects.
func TestWarmPodInitIsWhatInitParses(t *testing.T) {
	r := &poolReconciler{cfg: Config{CorralImage: "corral:test"}}
	pool := &v1alpha1.SandboxPool{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}, Spec: v1alpha1.SandboxPoolSpec{
		Template: v1alpha1.SandboxTemplate{Image: "busybox"}}}
	p := r.warmPodFor(pool, "p-1", "tok")
	o := parseInit(t, p.Spec.Containers[0].Command)
	if o.WaitStart != warmStart || o.ExecdTokenFile != warmTokenFile || o.ExecdEnvFile != warmEnvFile || o.IsolateNetwork != "" ||
		o.ExecdStateDir != insandbox.ExecdStateDir || len(o.Entrypoint) != 0 {
		t.Fatalf("warm PID 1: %+v", o)
	}
	for _, m := range p.Spec.Containers[0].VolumeMounts {
		if m.MountPath == warmDir {
			return
		}
	}
	t.Fatalf("the hand-over volume is not at %s", warmDir)
}

// TestVolumesAreClaimMounts: a Sandbox's volumes are its claims, mounted
// in the sandbox container only, read-only where asked, at their
// sub-paths; the Sandbox then matches no pool.
func TestVolumesAreClaimMounts(t *testing.T) {
	r := &sandboxReconciler{cfg: Config{CorralImage: "corral:test"}}
	sbx := &v1alpha1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: "s1", Namespace: "ns"}, Spec: v1alpha1.SandboxSpec{
		Image: "busybox", Entrypoint: []string{"sleep", "1d"}, AccessSecretName: "corral-s1",
		Volumes: []v1alpha1.SandboxVolume{
			{Name: "data", ClaimName: "corral-k-data", MountPath: "/data"},
			{Name: "ro", ClaimName: "corral-k-data", MountPath: "/ro", SubPath: "a/b", ReadOnly: true},
		},
	}}
	p := r.podFor(sbx, "the-execd-token")
	var claims []corev1.Volume
	for _, v := range p.Spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			claims = append(claims, v)
		}
	}
	if len(claims) != 2 || claims[0].PersistentVolumeClaim.ClaimName != "corral-k-data" || claims[0].PersistentVolumeClaim.ReadOnly ||
		!claims[1].PersistentVolumeClaim.ReadOnly {
		t.Fatalf("claim volumes: %+v", claims)
	}
	want := []corev1.VolumeMount{
		{Name: claims[0].Name, MountPath: "/data"},
		{Name: claims[1].Name, MountPath: "/ro", SubPath: "a/b", ReadOnly: true},
	}
	if got := p.Spec.Containers[0].VolumeMounts; !equality.Semantic.DeepEqual(got[len(got)-2:], want) {
		t.Errorf("sandbox mounts %+v, want %+v last", got, want)
	}
	for _, c := range p.Spec.InitContainers {
		for _, m := range c.VolumeMounts {
			if m.Name == claims[0].Name || m.Name == claims[1].Name {
				t.Errorf("init container %s mounts a claim", c.Name)
			}
		}
	}
	// The image's links are checked before the sandbox starts: in the
	// sandbox's own image, for corral's path and each volume's.
	check := p.Spec.InitContainers[len(p.Spec.InitContainers)-1]
	if check.Name != CheckMountsContainerName || check.Image != "busybox" ||
		!slices.Equal(check.Command, []string{insandbox.Binary, "check-mounts", "--", insandbox.BinaryDir, "/data", "/ro"}) ||
		len(check.SecurityContext.Capabilities.Add) != 1 || check.SecurityContext.Capabilities.Add[0] != "DAC_READ_SEARCH" {
		t.Errorf("the mount check: %+v", check)
	}
	tmpl := v1alpha1.SandboxTemplate{Image: "busybox"}
	if tmpl.Matches(sbx) {
		t.Errorf("a Sandbox with volumes matches a pool's template")
	}
}
