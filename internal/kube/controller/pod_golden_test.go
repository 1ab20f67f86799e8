// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/corral-dev/corral/internal/kube/apis/v1alpha1"
	"github.com/corral-dev/corral/internal/testutil/golden"
)

// The pods the controller makes are pinned by files in testdata: the
// security contexts, capabilities, init and sidecar containers, volumes
// and PID 1's command line a cluster is asked for. A change shows as a
// diff of those files in review. Needs no cluster.
func TestPodGolden(t *testing.T) {
	cfg := Config{CorralImage: "corral:test", EgressUpstreams: []string{"10.96.0.10:53"}, EgressDeny: []string{"10.0.0.0/8"}}
	gvisor := "gvisor"
	resources := corev1.ResourceRequirements{Limits: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("512Mi"),
	}}
	sandbox := func(mod func(s *v1alpha1.SandboxSpec)) *v1alpha1.Sandbox {
		s := v1alpha1.SandboxSpec{
			Image: "python:3.12", Entrypoint: []string{"python3", "-m", "http.server"}, AccessSecretName: "corral-s1",
			Env: []corev1.EnvVar{{Name: "GREETING", Value: "hello"}}, Resources: resources, Tenant: "acme",
		}
		mod(&s)
		return &v1alpha1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: "s1", Namespace: "ns", UID: "uid-1", Labels: map[string]string{"project": "golden"}}, Spec: s}
	}
	for _, c := range []struct {
		name string
		pod  func() *corev1.Pod
	}{
		{"sandbox", func() *corev1.Pod {
			return (&sandboxReconciler{cfg: cfg}).podFor(sandbox(func(*v1alpha1.SandboxSpec) {}), "execd-token")
		}},
		{"sandbox-policed-volume-gvisor", func() *corev1.Pod {
			return (&sandboxReconciler{cfg: cfg}).podFor(sandbox(func(s *v1alpha1.SandboxSpec) {
				s.Egress = &v1alpha1.SandboxEgress{Policy: `{"defaultAction":"deny","egress":[{"action":"allow","target":"pypi.org"}]}`}
				s.Volumes = []v1alpha1.SandboxVolume{{Name: "data", ClaimName: "data-claim", MountPath: "/data", ReadOnly: true}}
				s.RuntimeClassName = &gvisor
			}), "execd-token")
		}},
		{"warm", func() *corev1.Pod {
			pool := &v1alpha1.SandboxPool{ObjectMeta: metav1.ObjectMeta{Name: "p1", Namespace: "ns", UID: "uid-2"},
				Spec: v1alpha1.SandboxPoolSpec{Warm: 2, Template: v1alpha1.SandboxTemplate{Image: "python:3.12", Resources: resources, Egress: true}}}
			return (&poolReconciler{cfg: cfg}).warmPodFor(pool, "p1-abcde", "warm-token")
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := c.pod()
			for _, ctr := range append(p.Spec.InitContainers, p.Spec.Containers...) {
				sc := ctr.SecurityContext
				if sc == nil || sc.Privileged != nil && *sc.Privileged || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
					t.Errorf("container %s may be privileged or gain privileges: %+v", ctr.Name, sc)
				}
			}
			if p.Spec.HostNetwork || p.Spec.HostPID || p.Spec.HostIPC {
				t.Error("the pod shares a host namespace")
			}
			golden.JSON(t, "pod-"+c.name, p)
		})
	}
}
