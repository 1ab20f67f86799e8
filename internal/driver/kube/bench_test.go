// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package kube

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/corral-dev/corral/internal/driver"
	"github.com/corral-dev/corral/internal/insandbox"
	"github.com/corral-dev/corral/internal/kube/apis/v1alpha1"
	"github.com/corral-dev/corral/internal/kube/controller"
	"github.com/corral-dev/corral/internal/kube/kubetest"
)

var benchSandboxes = flag.Int("kube.sandboxes", 10, "sandboxes per phase of BenchmarkClaimToFirstCommand")

// BenchmarkClaimToFirstCommand measures, on the test cluster, the time
// from Create to the first command's exit for N sandboxes adopted from a
// pool of N warm pods, and for N sandboxes that start pods of their own,
// in the same run, beside the baseline of N plain pods of the same image
// from create to a running container (polled every 5 ms). One iteration is the whole measurement:
//
//	CORRAL_TEST_KUBE=1 go test ./internal/driver/kube -run XXX -bench ClaimToFirstCommand -benchtime 1x
func BenchmarkClaimToFirstCommand(b *testing.B) {
	c := kubetest.RequireKube(b)
	ns := c.Namespace(b)
	image := c.Busybox(b)
	c.RunController(b, controller.Config{Namespace: ns, CorralImage: c.CorralImage(b, corralBin), CorralImagePullPolicy: corev1.PullNever})
	ctx := context.Background()
	// Pod addresses, as a server in the cluster reaches sandboxes.
	d, err := New(ctx, Config{REST: c.REST, Namespace: ns, ImagePullPolicy: corev1.PullNever, Endpoints: EndpointsPod})
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	n := *benchSandboxes
	pool := &v1alpha1.SandboxPool{
		ObjectMeta: metav1.ObjectMeta{Name: "bench", Namespace: ns},
		Spec:       v1alpha1.SandboxPoolSpec{Warm: int32(n), Template: v1alpha1.SandboxTemplate{Image: image, ImagePullPolicy: corev1.PullNever}},
	}
	if err := c.Client.Create(ctx, pool); err != nil {
		b.Fatal(err)
	}
	waitPoolReady(b, d, pool.Name, int32(n), 5*time.Minute)

	phase := func(name string, resources driver.Resources) []time.Duration {
		var took []time.Duration
		for i := range n {
			spec := driver.Spec{ID: fmt.Sprintf("%s%d-%s", name, i, randID()), Image: driver.Image{URI: image},
				Entrypoint: []string{"sleep", "3600"}, Env: map[string]string{"N": fmt.Sprint(i)}, ExecdToken: randID(), Resources: resources}
			start := time.Now()
			if _, err := d.Create(ctx, spec); err != nil {
				b.Fatal(err)
			}
			ep, err := d.Endpoint(ctx, spec.ID, insandbox.ExecdPort)
			if err != nil {
				b.Fatal(err)
			}
			if out, code := kubetest.Exec(b, ep.String(), spec.ExecdToken, "echo $N"); code != 0 || out != fmt.Sprintf("%d\n", i) {
				b.Fatalf("first command = %q, exit %d", out, code)
			}
			took = append(took, time.Since(start))
			sbx, _ := d.get(ctx, spec.ID)
			if warm := sbx.Status.PodName != spec.ID; warm != (name == "warm") {
				b.Fatalf("%s sandbox %d: pod %s", name, i, sbx.Status.PodName)
			}
			defer d.Destroy(context.WithoutCancel(ctx), spec.ID)
		}
		return took
	}
	warm := phase("warm", driver.Resources{})
	// A memory limit the pool's template lacks: these start their own pods.
	cold := phase("cold", driver.Resources{MemoryBytes: 256 << 20})
	// The baseline: a plain pod of the same image, created and watched
	// until its container runs (no init container, no execd, no command).
	var raw []time.Duration
	for i := range n {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("raw%d-%s", i, randID()), Namespace: ns},
			Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{
				Name: "c", Image: image, ImagePullPolicy: corev1.PullNever, Command: []string{"sleep", "3600"},
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")}},
			}}},
		}
		start := time.Now()
		if err := c.Client.Create(ctx, pod); err != nil {
			b.Fatal(err)
		}
		for {
			var p corev1.Pod
			if err := c.Client.Get(ctx, client.ObjectKeyFromObject(pod), &p); err != nil {
				b.Fatal(err)
			}
			if len(p.Status.ContainerStatuses) > 0 && p.Status.ContainerStatuses[0].State.Running != nil {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		raw = append(raw, time.Since(start))
		defer c.Client.Delete(context.WithoutCancel(ctx), pod)
	}
	report := func(name string, d []time.Duration) {
		slices.Sort(d)
		p := func(q float64) float64 {
			return float64(d[min(len(d)-1, int(q*float64(len(d))))].Microseconds()) / 1000
		}
		b.ReportMetric(p(0.5), name+"-p50-ms")
		b.ReportMetric(p(0.99), name+"-p99-ms")
		b.Logf("%s: n=%d p50 %.1f ms p99 %.1f ms", name, len(d), p(0.5), p(0.99))
	}
	report("warm", warm)
	report("cold", cold)
	report("raw-pod", raw)
	b.ReportMetric(float64(cold[len(cold)/2])/float64(raw[len(raw)/2]), "cold/raw-p50")
	b.ReportMetric(float64(warm[len(warm)/2])/float64(raw[len(raw)/2]), "warm/raw-p50")
	if err := c.Client.Delete(ctx, pool); err != nil {
		b.Error(err)
	}
}
