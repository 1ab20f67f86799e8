// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"log/slog"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/corral-dev/corral/internal/kube/apis/v1alpha1"
)

// podsNotSeen is the controller's cache at the moment it has seen a
// Sandbox's newest status but not yet the pod that status names: the
// Sandboxes and the pods come in on separate watches, and under load the
// pods' can lag. Every other read and every write reach the API server.
type podsNotSeen struct{ client.Client }

func (c podsNotSeen) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*corev1.Pod); ok {
		return apierrors.NewNotFound(corev1.Resource("pods"), key.Name)
	}
	return c.Client.Get(ctx, key, obj, opts...)
}

func (c podsNotSeen) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if _, ok := list.(*corev1.PodList); ok {
		return nil
	}
	return c.Client.List(ctx, list, opts...)
}

// TestPodNotYetCachedIsNotDeleted: a reconcile whose cache lacks the pod
// the Sandbox's status names (its own, or a pool pod it adopted) asks
// the API server before it calls the pod deleted, so a sandbox that has
// just started is not failed as "PodDeleted" (CI saw a create fail so
// under load); a pod that is really gone still fails it.
func TestPodNotYetCachedIsNotDeleted(t *testing.T) {
	c, _ := apiServer(t)
	ctx := context.Background()
	// A namespace the test's manager does not watch: only the reconciler
	// below acts in it.
	nsObj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "lag-"}}
	if err := c.Create(ctx, nsObj); err != nil {
		t.Fatal(err)
	}
	ns := nsObj.Name
	withAccessSecret(t, c, ns)
	r := &sandboxReconciler{client: podsNotSeen{c}, api: c, events: record.NewFakeRecorder(100),
		cfg: Config{CorralImage: "corral.test/corral:dev", Now: time.Now, Logger: slog.New(slog.DiscardHandler)}}
	reconcile := func(name string) *v1alpha1.Sandbox {
		t.Helper()
		if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKey{Namespace: ns, Name: name}}); err != nil {
			t.Fatalf("reconcile %s: %v", name, err)
		}
		return getSandbox(t, c, ns, name)
	}
	failed := func(s *v1alpha1.Sandbox) string {
		if cd := meta.FindStatusCondition(s.Status.Conditions, v1alpha1.ConditionFailed); cd != nil && cd.Status == metav1.ConditionTrue {
			return cd.Reason
		}
		return ""
	}

	sbx := &v1alpha1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: "own", Namespace: ns},
		Spec: v1alpha1.SandboxSpec{Image: "img", Entrypoint: []string{"sleep", "1"}, AccessSecretName: "acc"}}
	if err := c.Create(ctx, sbx); err != nil {
		t.Fatal(err)
	}
	// The first reconcile makes the pod and names it in the status.
	if s := reconcile("own"); s.Status.PodName != "own" || failed(s) != "" {
		t.Fatalf("after the first reconcile: pod %q, failed %q", s.Status.PodName, failed(s))
	}
	// The next, before the cache has the pod: the pod is there.
	if s := reconcile("own"); s.Status.PodName != "own" || failed(s) != "" || s.Status.Phase != v1alpha1.SandboxPending {
		t.Fatalf("a pod missing from the cache only: pod %q, failed %q, phase %s", s.Status.PodName, failed(s), s.Status.Phase)
	}

	// A pool pod the Sandbox adopted: another name, controlled by it.
	ad := &v1alpha1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: "adopter", Namespace: ns},
		Spec: v1alpha1.SandboxSpec{Image: "img", Entrypoint: []string{"sleep", "1"}, AccessSecretName: "acc"}}
	if err := c.Create(ctx, ad); err != nil {
		t.Fatal(err)
	}
	warm := r.podFor(ad, "t")
	warm.Name = "pool-abcde"
	if err := c.Create(ctx, warm); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(ad.DeepCopy())
	ad.Status.PodName = warm.Name
	if err := c.Status().Patch(ctx, ad, patch); err != nil {
		t.Fatal(err)
	}
	if s := reconcile("adopter"); s.Status.PodName != warm.Name || failed(s) != "" {
		t.Fatalf("an adopted pod missing from the cache only: pod %q, failed %q", s.Status.PodName, failed(s))
	}

	// A pod that is gone from the API server too fails its Sandbox.
	if err := c.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "own", Namespace: ns}}, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	if s := reconcile("own"); failed(s) != "PodDeleted" {
		t.Errorf("a deleted pod: failed %q, phase %s", failed(s), s.Status.Phase)
	}
	// So does a pod of that name that another Sandbox controls.
	other := r.podFor(sbx, "t")
	other.Name = "pool-fghij"
	if err := c.Create(ctx, other); err != nil {
		t.Fatal(err)
	}
	cur := getSandbox(t, c, ns, "adopter")
	patch = client.MergeFrom(cur.DeepCopy())
	cur.Status.PodName = other.Name
	if err := c.Status().Patch(ctx, cur, patch); err != nil {
		t.Fatal(err)
	}
	if s := reconcile("adopter"); failed(s) != "PodDeleted" {
		t.Errorf("a pod the Sandbox does not control: failed %q, phase %s", failed(s), s.Status.Phase)
	}
}
