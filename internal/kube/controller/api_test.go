// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/corral-dev/corral/internal/insandbox"
	"github.com/corral-dev/corral/internal/kube/apis/v1alpha1"
	"github.com/corral-dev/corral/internal/testutil"
	"github.com/corral-dev/corral/internal/verifier"
)

// The API-only tier: kube-apiserver and etcd (envtest, with the binaries
// scripts/k8s.sh builds, named by KUBEBUILDER_ASSETS) and no node, so pods
// never run and each test writes the pod statuses a kubelet would. It
// checks the reconcile logic deterministically: no kubelet timing.

var apiEnv struct {
	once sync.Once
	env  *envtest.Environment
	rc   *rest.Config
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if apiEnv.env != nil {
		_ = apiEnv.env.Stop()
	}
	os.Exit(code)
}

// apiServer starts the API server once per test binary and returns a
// namespace of its own for the test with the controller running for it.
func apiServer(t *testing.T) (client.Client, string) {
	t.Helper()
	if os.Getenv(testutil.EnvKube) != "1" {
		t.Skipf("kube tier: run scripts/k8s.sh up and set %s=1 (and KUBEBUILDER_ASSETS) to run", testutil.EnvKube)
	}
	apiEnv.once.Do(func() {
		assets := os.Getenv("KUBEBUILDER_ASSETS")
		if assets == "" {
			apiEnv.err = fmt.Errorf("KUBEBUILDER_ASSETS is not set (scripts/k8s.sh writes it into its env file)")
			return
		}
		apiEnv.env = &envtest.Environment{
			CRDDirectoryPaths:     []string{filepath.Join(testutil.ModuleRoot(t), "deploy", "kubernetes", "crd")},
			ErrorIfCRDPathMissing: true,
			BinaryAssetsDirectory: assets,
		}
		apiEnv.rc, apiEnv.err = apiEnv.env.Start()
	})
	if apiEnv.err != nil {
		t.Fatalf("%s=1 but the API server does not start: %v", testutil.EnvKube, apiEnv.err)
	}
	scheme, err := v1alpha1.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(apiEnv.rc, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "api-"}}
	if err := c.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	mgr, err := NewManager(apiEnv.rc, Config{Namespace: ns.Name, CorralImage: "corral.test/corral:dev"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("controller: %v", err)
		}
	})
	return c, ns.Name
}

// setPodStatus writes st as pod's status, as the kubelet would.
func setPodStatus(t *testing.T, c client.Client, pod *corev1.Pod, st corev1.PodStatus) {
	t.Helper()
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(pod), pod); err != nil {
		t.Fatal(err)
	}
	pod.Status = st
	if err := c.Status().Update(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
}

func running(ready bool) corev1.PodStatus {
	now := metav1.Now()
	r := corev1.ConditionFalse
	if ready {
		r = corev1.ConditionTrue
	}
	return corev1.PodStatus{
		Phase: corev1.PodRunning, PodIP: "192.0.2.10", PodIPs: []corev1.PodIP{{IP: "192.0.2.10"}}, StartTime: &now,
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: r}, {Type: corev1.PodScheduled, Status: corev1.ConditionTrue}},
		ContainerStatuses: []corev1.ContainerStatus{{Name: ContainerName, Image: "img", Ready: ready,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}}},
	}
}

func getSandbox(t *testing.T, c client.Client, ns, name string) *v1alpha1.Sandbox {
	var s v1alpha1.Sandbox
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &s); err != nil {
		t.Fatal(err)
	}
	return &s
}

// TestSandboxFollowsItsPod: the pod the controller makes, and the
// Sandbox's status as the pod's status moves through what a kubelet
// reports; a stop lowers the pod's deadline; an expired Sandbox is
// deleted.
func TestSandboxFollowsItsPod(t *testing.T) {
	c, ns := apiServer(t)
	ctx := context.Background()
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "corral-s1", Namespace: ns, Labels: map[string]string{LabelSandboxID: "s1", LabelManaged: "true"}},
		Data: map[string][]byte{v1alpha1.TokenKey: []byte("t")}}
	if err := c.Create(ctx, sec); err != nil {
		t.Fatal(err)
	}
	sbx := &v1alpha1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: "s1", Namespace: ns, Labels: map[string]string{"team": "a"}},
		Spec: v1alpha1.SandboxSpec{Image: "img", Entrypoint: []string{"sleep", "1"}, AccessSecretName: "corral-s1", Tenant: "t1",
			Env: []corev1.EnvVar{{Name: "A", Value: "1"}}}}
	if err := c.Create(ctx, sbx); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{}
	testutil.WaitFor(t, 10*time.Second, "the sandbox's pod", func() bool {
		return c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "s1"}, pod) == nil
	})
	main := pod.Spec.Containers[0]
	if !metav1.IsControlledBy(pod, getSandbox(t, c, ns, "s1")) || pod.Labels[LabelTenant] != "t1" || pod.Labels["team"] != "a" ||
		main.Command[0] != insandbox.Binary || main.Command[len(main.Command)-2] != "sleep" || *pod.Spec.AutomountServiceAccountToken ||
		pod.Spec.InitContainers[0].Image != "corral.test/corral:dev" || main.Env[0].ValueFrom != nil || main.Env[0].Value != verifier.Of("t") {
		t.Fatalf("pod = %+v", pod)
	}

	testutil.WaitFor(t, 10*time.Second, "a PodCreated event for the sandbox", func() bool {
		var evs corev1.EventList
		_ = c.List(ctx, &evs, client.InNamespace(ns))
		for _, e := range evs.Items {
			if e.InvolvedObject.Name == "s1" && e.InvolvedObject.Kind == "Sandbox" && e.Reason == "PodCreated" {
				return true
			}
		}
		return false
	})

	steps := []struct {
		status corev1.PodStatus
		phase  v1alpha1.SandboxPhase
		cond   string
		reason string
	}{
		{corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{Name: ContainerName, Image: "img",
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImageNeverPull"}}}}},
			v1alpha1.SandboxFailed, v1alpha1.ConditionFailed, "ImageNotPresent"},
		{running(true), v1alpha1.SandboxRunning, v1alpha1.ConditionReady, "ExecdAnswers"},
	}
	for _, s := range steps {
		setPodStatus(t, c, pod, s.status)
		testutil.WaitFor(t, 10*time.Second, "Sandbox "+string(s.phase)+" "+s.reason, func() bool {
			got := getSandbox(t, c, ns, "s1")
			for _, cd := range got.Status.Conditions {
				if cd.Type == s.cond && cd.Status == metav1.ConditionTrue && cd.Reason == s.reason {
					return got.Status.Phase == s.phase
				}
			}
			return false
		})
	}

	// Stop: the pod's deadline comes down to the time it has run.
	cur := getSandbox(t, c, ns, "s1")
	patch := client.MergeFrom(cur.DeepCopy())
	cur.Spec.Stopped = true
	if err := c.Patch(ctx, cur, patch); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "the pod's activeDeadlineSeconds", func() bool {
		return c.Get(ctx, client.ObjectKeyFromObject(pod), pod) == nil && pod.Spec.ActiveDeadlineSeconds != nil && *pod.Spec.ActiveDeadlineSeconds <= 2
	})
	// Expiry: a past expireTime marks the Sandbox Expired and deletes it
	// (a finalizer of the test's holds it to read the condition).
	cur = getSandbox(t, c, ns, "s1")
	patch = client.MergeFrom(cur.DeepCopy())
	cur.Spec.ExpireTime = &metav1.Time{Time: time.Now().Add(time.Second)}
	cur.Finalizers = []string{"test.corral.dev/hold"}
	if err := c.Patch(ctx, cur, patch); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "the expired Sandbox to be deleted", func() bool {
		s := getSandbox(t, c, ns, "s1")
		return !s.DeletionTimestamp.IsZero()
	})
	held := getSandbox(t, c, ns, "s1")
	if !meta.IsStatusConditionTrue(held.Status.Conditions, v1alpha1.ConditionExpired) {
		t.Errorf("an expired Sandbox has no Expired condition: %+v", held.Status.Conditions)
	}
	patch = client.MergeFrom(held.DeepCopy())
	held.Finalizers = nil
	if err := c.Patch(ctx, held, patch); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "the expired Sandbox to be gone", func() bool {
		err := c.Get(ctx, client.ObjectKeyFromObject(cur), &v1alpha1.Sandbox{})
		return apierrors.IsNotFound(err)
	})
}

// TestPoolKeepsItsSize: a pool starts at most maxStarting pods at once,
// tops up as pods become ready, deletes failed ones, and shrinks from the
// pods not ready yet.
func TestPoolKeepsItsSize(t *testing.T) {
	c, ns := apiServer(t)
	ctx := context.Background()
	two := int32(2)
	pool := &v1alpha1.SandboxPool{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: ns},
		Spec: v1alpha1.SandboxPoolSpec{Warm: 4, MaxStarting: &two, Template: v1alpha1.SandboxTemplate{Image: "img"}}}
	if err := c.Create(ctx, pool); err != nil {
		t.Fatal(err)
	}
	pods := func() []corev1.Pod {
		var l corev1.PodList
		if err := c.List(ctx, &l, client.InNamespace(ns), client.MatchingLabels{LabelPool: "p"}); err != nil {
			t.Fatal(err)
		}
		return l.Items
	}
	status := func(ready, starting int32) func() bool {
		return func() bool {
			var p v1alpha1.SandboxPool
			return c.Get(ctx, client.ObjectKeyFromObject(pool), &p) == nil && p.Status.Ready == ready && p.Status.Starting == starting
		}
	}
	testutil.WaitFor(t, 10*time.Second, "2 starting pods", status(0, 2))
	time.Sleep(300 * time.Millisecond)
	if n := len(pods()); n != 2 {
		t.Fatalf("%d pods while none is ready, want maxStarting = 2", n)
	}
	// Each warm pod starts with a token of its own.
	ps := pods()
	tokens := map[string]bool{}
	for _, p := range ps {
		var sec corev1.Secret
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: warmSecret(p.Name)}, &sec); err != nil || len(sec.Data[v1alpha1.TokenKey]) < 32 {
			t.Fatalf("token Secret of %s: %v", p.Name, err)
		}
		if e := p.Spec.Containers[0].Env[0]; e.Name != "EXECD_ACCESS_TOKEN" || e.Value != verifier.Of(string(sec.Data[v1alpha1.TokenKey])) {
			t.Errorf("pod %s has not its own token's verifier: %+v", p.Name, e)
		}
		tokens[string(sec.Data[v1alpha1.TokenKey])] = true
	}
	if len(tokens) != len(ps) {
		t.Errorf("%d pods share %d tokens", len(ps), len(tokens))
	}
	setPodStatus(t, c, &ps[0], running(true))
	setPodStatus(t, c, &ps[1], running(true))
	testutil.WaitFor(t, 10*time.Second, "2 ready, 2 more starting", status(2, 2))

	// A failed warm pod is deleted and replaced.
	var failed *corev1.Pod
	for _, p := range pods() {
		if !podReady(&p) {
			failed = &p
			break
		}
	}
	setPodStatus(t, c, failed, corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{Name: ContainerName,
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImagePull"}}}}})
	testutil.WaitFor(t, 10*time.Second, "the failed pod replaced", func() bool {
		err := c.Get(ctx, client.ObjectKeyFromObject(failed), &corev1.Pod{})
		return apierrors.IsNotFound(err) && len(pods()) == 4
	})
	testutil.WaitFor(t, 2*staleAfter, "the failed pod's token deleted", func() bool {
		err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: warmSecret(failed.Name)}, &corev1.Secret{})
		return apierrors.IsNotFound(err)
	})

	// Shrinking keeps the ready pods.
	patch := client.MergeFrom(pool.DeepCopy())
	pool.Spec.Warm = 2
	if err := c.Patch(ctx, pool, patch); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "2 ready pods left", func() bool {
		l := pods()
		return len(l) == 2 && podReady(&l[0]) && podReady(&l[1])
	})
}

// TestEgressInputIsChecked: a Sandbox written by hand with a policy the
// enforcer would refuse fails with the reason instead of a pod whose
// sidecar never starts; one whose access Secret lacks the egress token
// waits for it, naming the key.
func TestEgressInputIsChecked(t *testing.T) {
	c, ns := apiServer(t)
	withAccessSecret(t, c, ns)
	for _, tc := range []struct {
		name, policy, cond, reason, msg string
	}{
		{"bad-action", `{"defaultAction":"maybe"}`, v1alpha1.ConditionFailed, "InvalidEgressPolicy", "maybe"},
		{"bad-json", `{"defaultAction":`, v1alpha1.ConditionFailed, "InvalidEgressPolicy", ""},
		{"bad-target", `{"defaultAction":"deny","egress":[{"action":"allow","target":"exa mple.com"}]}`, v1alpha1.ConditionFailed, "InvalidEgressPolicy", ""},
		{"no-egress-token", `{"defaultAction":"deny"}`, v1alpha1.ConditionReady, "WaitingForAccessSecret", v1alpha1.EgressTokenKey},
	} {
		sbx := &v1alpha1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: tc.name, Namespace: ns},
			Spec: v1alpha1.SandboxSpec{Image: "img", Entrypoint: []string{"sleep", "1"}, AccessSecretName: "acc",
				Egress: &v1alpha1.SandboxEgress{Policy: tc.policy}}}
		expectNoPod(t, c, sbx, tc.cond, tc.reason, tc.msg)
	}
}

// TestVolumeInputIsChecked: a Sandbox written by hand with a volume over
// the sandbox's own paths, or a sub-path that climbs out, fails with the
// reason, and no pod is made.
func TestVolumeInputIsChecked(t *testing.T) {
	c, ns := apiServer(t)
	withAccessSecret(t, c, ns)
	for _, tc := range []struct {
		name string
		vol  v1alpha1.SandboxVolume
		msg  string
	}{
		{"over-proc", v1alpha1.SandboxVolume{Name: "v", ClaimName: "c", MountPath: "/proc/sys"}, "/proc"},
		{"over-corral", v1alpha1.SandboxVolume{Name: "v", ClaimName: "c", MountPath: "/.corral"}, "/.corral"},
		{"climbs-out", v1alpha1.SandboxVolume{Name: "v", ClaimName: "c", MountPath: "/data", SubPath: "a/../../b"}, "subPath"},
	} {
		sbx := &v1alpha1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: tc.name, Namespace: ns},
			Spec: v1alpha1.SandboxSpec{Image: "img", Entrypoint: []string{"sleep", "1"}, AccessSecretName: "acc",
				Volumes: []v1alpha1.SandboxVolume{tc.vol}}}
		expectNoPod(t, c, sbx, v1alpha1.ConditionFailed, "InvalidVolume", tc.msg)
	}
}

// withAccessSecret writes the access Secret "acc" of ns, with an execd
// token only.
func withAccessSecret(t *testing.T, c client.Client, ns string) {
	t.Helper()
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "acc", Namespace: ns}, Data: map[string][]byte{v1alpha1.TokenKey: []byte("t")}}
	if err := c.Create(context.Background(), sec); err != nil {
		t.Fatal(err)
	}
}

// expectNoPod writes sbx and waits for its condition cond to have reason
// and a message containing msg; no pod may be made for it.
func expectNoPod(t *testing.T, c client.Client, sbx *v1alpha1.Sandbox, cond, reason, msg string) {
	t.Helper()
	ctx := context.Background()
	if err := c.Create(ctx, sbx); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, sbx.Name+": the condition "+reason, func() bool {
		got := meta.FindStatusCondition(getSandbox(t, c, sbx.Namespace, sbx.Name).Status.Conditions, cond)
		return got != nil && got.Reason == reason && strings.Contains(got.Message, msg)
	})
	if err := c.Get(ctx, client.ObjectKey{Namespace: sbx.Namespace, Name: sbx.Name}, &corev1.Pod{}); !apierrors.IsNotFound(err) {
		t.Errorf("%s: a pod was created: %v", sbx.Name, err)
	}
}
