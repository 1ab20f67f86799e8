// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"encoding/base64"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/corral-dev/corral/internal/kube/apis/v1alpha1"
)

// LabelPool marks the unclaimed pods of a SandboxPool with its name; an
// adoption removes it.
const LabelPool = "corral.dev/pool"

// Field indexes of the controller's pod cache.
const (
	indexPool    = "corral.pool"
	indexSandbox = "corral.sandbox"
)

type poolReconciler struct {
	client client.Client
	cfg    Config

	mu sync.Mutex
	// created are the warm pods this controller created, by pool, until
	// its cache shows them: a reconcile that runs on a cache not yet
	// showing its own creations counts them anyway, so it never starts
	// more than maxStarting (a ReplicaSet controller's expectations).
	created map[types.NamespacedName]map[string]time.Time
}

// expectFor is how long a created pod the cache never shows is counted
// (it was deleted before the cache saw it).
const expectFor = time.Minute

// expected records pod as created for pool.
func (r *poolReconciler) expected(pool types.NamespacedName, pod string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.created == nil {
		r.created = map[types.NamespacedName]map[string]time.Time{}
	}
	if r.created[pool] == nil {
		r.created[pool] = map[string]time.Time{}
	}
	r.created[pool][pod] = time.Now()
}

// unseen forgets the created pods of pool that the cache shows (or that
// it never showed for expectFor) and counts the others.
func (r *poolReconciler) unseen(pool types.NamespacedName, seen map[string]bool) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	for name, at := range r.created[pool] {
		if seen[name] || time.Since(at) > expectFor {
			delete(r.created[pool], name)
		}
	}
	if len(r.created[pool]) == 0 {
		delete(r.created, pool)
	}
	return len(r.created[pool])
}

// warmSecret names the Secret holding the token warm pod pod starts with.
// Each warm pod has its own: an adopted sandbox can read the token its
// PID 1 was started with, and that token must open no other pod.
func warmSecret(pod string) string { return "corral-warm-" + pod }

// Reconcile keeps spec.warm unclaimed pods started: it creates the
// missing ones, deletes the extra and the failed, and reports counts.
func (r *poolReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var pool v1alpha1.SandboxPool
	if err := r.client.Get(ctx, req.NamespacedName, &pool); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !pool.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	var pods corev1.PodList
	if err := r.client.List(ctx, &pods, client.InNamespace(pool.Namespace), client.MatchingFields{indexPool: pool.Name}); err != nil {
		return ctrl.Result{}, err
	}
	var live []*corev1.Pod
	ready, starting := int32(0), int32(0)
	seen := map[string]bool{}
	for i := range pods.Items {
		seen[pods.Items[i].Name] = true
	}
	// Created pods the cache does not show yet are starting.
	inFlight := r.unseen(req.NamespacedName, seen)
	starting += int32(inFlight)
	for i := range pods.Items {
		p := &pods.Items[i]
		if !p.DeletionTimestamp.IsZero() || !metav1.IsControlledBy(p, &pool) {
			continue
		}
		if warmPodFailed(p) {
			r.cfg.Logger.WarnContext(ctx, "deleting a failed warm pod", "namespace", p.Namespace, "pod", p.Name, "pool", pool.Name)
			if err := r.client.Delete(ctx, p); client.IgnoreNotFound(err) != nil {
				return ctrl.Result{}, err
			}
			continue
		}
		live = append(live, p)
		if podReady(p) {
			ready++
		} else {
			starting++
		}
	}
	// Too many: the ones not ready yet go first, then the newest.
	slices.SortFunc(live, func(a, b *corev1.Pod) int {
		if ra, rb := podReady(a), podReady(b); ra != rb {
			if ra {
				return -1
			}
			return 1
		}
		return a.CreationTimestamp.Compare(b.CreationTimestamp.Time)
	})
	for i := int(pool.Spec.Warm); i < len(live); i++ {
		if err := r.client.Delete(ctx, live[i]); client.IgnoreNotFound(err) != nil {
			return ctrl.Result{}, err
		}
		if podReady(live[i]) {
			ready--
		} else {
			starting--
		}
	}
	maxStarting := int32(2)
	if m := pool.Spec.MaxStarting; m != nil && *m > 0 {
		maxStarting = *m
	}
	for n := len(live) + inFlight; n < int(pool.Spec.Warm) && starting < maxStarting; n++ {
		if err := r.startWarmPod(ctx, &pool); err != nil {
			return ctrl.Result{}, err
		}
		starting++
	}
	recheck, err := r.deleteStaleTokens(ctx, &pool)
	if err != nil {
		return ctrl.Result{}, err
	}
	st := v1alpha1.SandboxPoolStatus{Ready: ready, Starting: starting, ObservedGeneration: pool.Generation}
	if st != pool.Status {
		patch := client.MergeFrom(pool.DeepCopy())
		pool.Status = st
		if err := r.client.Status().Patch(ctx, &pool, patch); err != nil {
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
	}
	if inFlight > 0 && (recheck == 0 || recheck > time.Second) {
		recheck = time.Second // until the cache shows them
	}
	return ctrl.Result{RequeueAfter: recheck}, nil
}

// startWarmPod creates a warm pod and, first, the Secret with its own
// token.
func (r *poolReconciler) startWarmPod(ctx context.Context, pool *v1alpha1.SandboxPool) error {
	var b [32]byte
	_, _ = rand.Read(b[:])
	token := base64.RawURLEncoding.EncodeToString(b[4:])
	pod := r.warmPodFor(pool, pool.Name+"-"+strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b[:4])), token)
	sec := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: warmSecret(pod.Name), Namespace: pool.Namespace,
			Labels:          map[string]string{LabelManaged: "true", LabelPool: pool.Name},
			OwnerReferences: []metav1.OwnerReference{v1alpha1.OwnerRef(pool, "SandboxPool")},
		},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{v1alpha1.TokenKey: []byte(token)},
	}
	if pool.Spec.Template.Egress {
		var e [24]byte
		_, _ = rand.Read(e[:])
		sec.Data[v1alpha1.EgressTokenKey] = []byte(base64.RawURLEncoding.EncodeToString(e[:]))
	}
	if err := r.client.Create(ctx, sec); err != nil {
		return err
	}
	if err := r.client.Create(ctx, pod); err != nil {
		_ = r.client.Delete(ctx, sec)
		return err
	}
	r.expected(client.ObjectKeyFromObject(pool), pod.Name)
	return nil
}

// deleteStaleTokens deletes the token Secrets of warm pods that are gone
// or were adopted (an adoption replaced the token; the old one must not
// linger). Secrets too young to judge are looked at again after recheck.
func (r *poolReconciler) deleteStaleTokens(ctx context.Context, pool *v1alpha1.SandboxPool) (recheck time.Duration, err error) {
	var secs corev1.SecretList
	if err := r.client.List(ctx, &secs, client.InNamespace(pool.Namespace), client.MatchingLabels{LabelPool: pool.Name}); err != nil {
		return 0, err
	}
	for i := range secs.Items {
		sec := &secs.Items[i]
		if age := time.Since(sec.CreationTimestamp.Time); age < staleAfter {
			recheck = staleAfter - age + time.Second
			continue // its pod may not be in the cache yet
		}
		var pod corev1.Pod
		err := r.client.Get(ctx, types.NamespacedName{Namespace: pool.Namespace, Name: strings.TrimPrefix(sec.Name, "corral-warm-")}, &pod)
		if err == nil && pod.Labels[LabelPool] == pool.Name && pod.DeletionTimestamp.IsZero() {
			continue
		}
		if client.IgnoreNotFound(err) != nil {
			return 0, err
		}
		if err := r.client.Delete(ctx, sec); client.IgnoreNotFound(err) != nil {
			return 0, err
		}
	}
	return recheck, nil
}

// staleAfter is how old a warm pod's token Secret must be before its
// absent pod means it is stale.
const staleAfter = 10 * time.Second

// podReady reports whether the pod's readiness gate (execd's /ping) passes.
func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// warmPodFailed reports a warm pod that will never become ready.
func warmPodFailed(p *corev1.Pod) bool {
	if p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded {
		return true
	}
	for _, cs := range append(slices.Clone(p.Status.InitContainerStatuses), p.Status.ContainerStatuses...) {
		if w := cs.State.Waiting; w != nil {
			if _, ok := waitingFailures[w.Reason]; ok {
				return true
			}
		}
		if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
			return true
		}
	}
	return false
}

// poolName is the pool label of a pod, for the field index.
func poolName(o client.Object) []string {
	if v := o.GetLabels()[LabelPool]; v != "" {
		return []string{v}
	}
	return nil
}

// sandboxName is the sandbox label of a pod, for the field index.
func sandboxName(o client.Object) []string {
	if v := o.GetLabels()[LabelSandboxID]; v != "" && !strings.ContainsRune(v, '/') {
		return []string{v}
	}
	return nil
}
