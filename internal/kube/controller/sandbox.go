// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/corral-dev/corral/internal/egress/policy"
	"github.com/corral-dev/corral/internal/kube/apis/v1alpha1"
	"github.com/corral-dev/corral/internal/sandbox"
)

type sandboxReconciler struct {
	client client.Client
	api    client.Reader // the API server, past the cache
	events record.EventRecorder
	cfg    Config
}

// Reconcile brings one Sandbox's pod to what its spec asks and writes
// what the pod shows into its status. It is idempotent: every step reads
// before it writes.
func (r *sandboxReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var sbx v1alpha1.Sandbox
	if err := r.client.Get(ctx, req.NamespacedName, &sbx); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !sbx.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil // the garbage collector removes the pod
	}
	var requeue time.Duration
	if exp := sbx.Spec.ExpireTime; exp != nil {
		left := exp.Sub(r.cfg.Now())
		if left <= 0 {
			r.cfg.Logger.InfoContext(ctx, "sandbox expired; deleting it", "namespace", sbx.Namespace, "sandbox_id", sbx.Name)
			msg := fmt.Sprintf("expireTime %s passed; deleting the sandbox", exp.UTC().Format(time.RFC3339))
			r.events.Eventf(&sbx, corev1.EventTypeNormal, "Expired", "%s", msg)
			if !conditionTrue(&sbx.Status, v1alpha1.ConditionExpired) {
				patch := client.MergeFrom(sbx.DeepCopy())
				setCondition(&sbx.Status, v1alpha1.ConditionExpired, true, "TTLExpired", msg)
				if err := r.client.Status().Patch(ctx, &sbx, patch); err != nil {
					r.cfg.Logger.WarnContext(ctx, "record the expiry", "namespace", sbx.Namespace, "sandbox_id", sbx.Name, "err", err)
				}
			}
			err := r.client.Delete(ctx, &sbx, client.PropagationPolicy(metav1.DeletePropagationBackground),
				client.Preconditions{UID: &sbx.UID})
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
		requeue = left
	}

	status := sbx.Status.DeepCopy()
	status.ObservedGeneration = sbx.Generation
	pod, err := r.podOf(ctx, &sbx)
	if err != nil {
		return ctrl.Result{}, err
	}
	if pod != nil && pod.Name != sbx.Name && status.PodName != pod.Name {
		// Claimed from a pool, not yet handed over (a crash between the
		// two): hand over, or give the pod up.
		sec, err := r.accessSecret(ctx, &sbx)
		if err != nil {
			return ctrl.Result{}, err
		}
		adopted, err := r.adopt(ctx, &sbx, pod, sec)
		if err != nil {
			return ctrl.Result{}, err
		}
		if !adopted {
			pod = nil
			status.PodName = ""
		}
	}
	switch {
	case pod == nil:
		if err := r.noPod(ctx, &sbx, status); err != nil {
			return ctrl.Result{}, err
		}
	case !metav1.IsControlledBy(pod, &sbx):
		setCondition(status, v1alpha1.ConditionFailed, true, "PodNameTaken",
			fmt.Sprintf("a pod named %s that this Sandbox does not own exists; delete it or rename the Sandbox", pod.Name))
	default:
		if sbx.Spec.Stopped {
			if err := r.stop(ctx, pod); err != nil {
				return ctrl.Result{}, err
			}
		}
		observePod(status, pod, sbx.Spec.Stopped)
	}
	status.Phase = phaseOf(status)
	if !equality.Semantic.DeepEqual(&sbx.Status, status) {
		// A merge patch of the whole status: the driver changes the spec
		// meanwhile, which must not make this write conflict.
		patch := client.MergeFrom(sbx.DeepCopy())
		sbx.Status = *status
		if err := r.client.Status().Patch(ctx, &sbx, patch); err != nil {
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
	}
	return ctrl.Result{RequeueAfter: requeue}, nil
}

// noPod handles a Sandbox without a pod: create it, or explain why not.
func (r *sandboxReconciler) noPod(ctx context.Context, sbx *v1alpha1.Sandbox, status *v1alpha1.SandboxStatus) error {
	if status.PodName != "" {
		// The pod existed and is gone: a sandbox is not restarted
		// elsewhere, its state went with the pod.
		if !conditionTrue(status, v1alpha1.ConditionExited) {
			setCondition(status, v1alpha1.ConditionFailed, true, "PodDeleted",
				"the sandbox's pod was deleted (evicted, or removed by hand); its state is lost, create a new sandbox")
			setCondition(status, v1alpha1.ConditionReady, false, "PodDeleted", "")
		}
		return nil
	}
	if sbx.Spec.Stopped {
		exitNow(status, r.cfg.Now(), 143, "Stopped")
		return nil
	}
	if e := sbx.Spec.Egress; e != nil {
		// A policy the sidecar would refuse fails here, with the reason,
		// rather than as a sidecar that never starts.
		p, err := policy.Decode([]byte(e.Policy))
		if err == nil {
			_, err = policy.Compile(p, policy.Options{})
		}
		if err != nil {
			setCondition(status, v1alpha1.ConditionFailed, true, "InvalidEgressPolicy", err.Error())
			return nil
		}
	}
	var names, targets []string
	for _, v := range sbx.Spec.Volumes {
		// The server checked these; a Sandbox written by hand may not be.
		if err := sandbox.CheckMount(v.Name, v.MountPath, v.SubPath); err != nil {
			setCondition(status, v1alpha1.ConditionFailed, true, "InvalidVolume", err.Error())
			return nil
		}
		names, targets = append(names, v.Name), append(targets, v.MountPath)
	}
	if err := sandbox.CheckNotNested(names, targets); err != nil {
		setCondition(status, v1alpha1.ConditionFailed, true, "InvalidVolume", err.Error())
		return nil
	}
	sec, err := r.accessSecret(ctx, sbx)
	keys := []string{v1alpha1.TokenKey}
	if sbx.Spec.Egress != nil {
		keys = append(keys, v1alpha1.EgressTokenKey)
	}
	for _, key := range keys {
		if _, ok := sec.Data[key]; apierrors.IsNotFound(err) || err == nil && !ok {
			// The driver writes the Secret before the Sandbox; should it
			// come later, its arrival (watched by its sandbox label)
			// triggers the next reconcile.
			setCondition(status, v1alpha1.ConditionReady, false, "WaitingForAccessSecret",
				fmt.Sprintf("Secret %s with key %s does not exist yet", sbx.Spec.AccessSecretName, key))
			return nil
		}
	}
	if err != nil {
		return err
	}
	if adoptable(sbx) {
		pod, err := r.claim(ctx, sbx)
		switch {
		case errors.Is(err, errNoWarmPod):
		case err != nil:
			return err
		default:
			adopted, err := r.adopt(ctx, sbx, pod, sec)
			if err != nil {
				return err
			}
			if adopted {
				observePod(status, pod, false)
				return nil
			}
		}
	}
	// The cache may not have seen a delete yet; a pod made for a Sandbox
	// being deleted is one more the garbage collector must find and the
	// kubelet must stop before a foreground delete ends.
	var fresh v1alpha1.Sandbox
	if err := r.api.Get(ctx, client.ObjectKeyFromObject(sbx), &fresh); err != nil {
		return client.IgnoreNotFound(err)
	}
	if fresh.UID != sbx.UID || !fresh.DeletionTimestamp.IsZero() {
		return nil
	}
	pod := r.podFor(sbx, string(sec.Data[v1alpha1.TokenKey]))
	if err := r.client.Create(ctx, pod); err != nil && !apierrors.IsAlreadyExists(err) {
		if apierrors.IsInvalid(err) || apierrors.IsForbidden(err) {
			setCondition(status, v1alpha1.ConditionFailed, true, "PodRejected", err.Error())
			return nil
		}
		return err
	}
	r.events.Eventf(sbx, corev1.EventTypeNormal, "PodCreated", "created pod %s", pod.Name)
	status.PodName = pod.Name
	setCondition(status, v1alpha1.ConditionScheduled, false, "PodCreated", "")
	setCondition(status, v1alpha1.ConditionReady, false, "PodCreated", "")
	return nil
}

// accessSecret reads sbx's token Secret: from the cache, or, if the cache
// has not seen it yet (it is written just before the Sandbox), from the
// API server.
func (r *sandboxReconciler) accessSecret(ctx context.Context, sbx *v1alpha1.Sandbox) (*corev1.Secret, error) {
	key := types.NamespacedName{Namespace: sbx.Namespace, Name: sbx.Spec.AccessSecretName}
	var sec corev1.Secret
	err := r.client.Get(ctx, key, &sec)
	if apierrors.IsNotFound(err) {
		err = r.api.Get(ctx, key, &sec)
	}
	return &sec, err
}

// podOf finds the pod of sbx: the one it started (named after it) or the
// pool pod it adopted, both labelled with its name, from the cache, or
// else the one its status names, from the API server. Pods being deleted
// do not count.
func (r *sandboxReconciler) podOf(ctx context.Context, sbx *v1alpha1.Sandbox) (*corev1.Pod, error) {
	var pods corev1.PodList
	if err := r.client.List(ctx, &pods, client.InNamespace(sbx.Namespace), client.MatchingFields{indexSandbox: sbx.Name}); err != nil {
		return nil, err
	}
	for i := range pods.Items {
		if p := &pods.Items[i]; p.DeletionTimestamp.IsZero() && metav1.IsControlledBy(p, sbx) {
			return p, nil
		}
	}
	// A pod of its name that it does not own blocks its own.
	var pod corev1.Pod
	err := r.client.Get(ctx, types.NamespacedName{Namespace: sbx.Namespace, Name: sbx.Name}, &pod)
	if err == nil && pod.DeletionTimestamp.IsZero() {
		return &pod, nil
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, err
	}
	return r.namedPod(ctx, sbx)
}

// namedPod reads, from the API server, the pod sbx's status names, for
// when the cache has none: the Sandboxes and the pods come in on separate
// watches, so the cache can hold a status naming a pod it has not seen
// yet, and calling that pod deleted would fail a sandbox that has just
// started. Only a pod sbx controls, not being deleted, counts.
func (r *sandboxReconciler) namedPod(ctx context.Context, sbx *v1alpha1.Sandbox) (*corev1.Pod, error) {
	name := sbx.Status.PodName
	if name == "" {
		return nil, nil
	}
	var pod corev1.Pod
	err := r.api.Get(ctx, types.NamespacedName{Namespace: sbx.Namespace, Name: name}, &pod)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, err
	case !pod.DeletionTimestamp.IsZero() || !metav1.IsControlledBy(&pod, sbx):
		return nil, nil
	}
	return &pod, nil
}

// stop ends a running pod's containers while keeping the pod: its
// activeDeadlineSeconds is lowered to the time it has run, so the kubelet
// kills it (SIGTERM, then SIGKILL after the grace period) and records
// each container's exit.
func (r *sandboxReconciler) stop(ctx context.Context, pod *corev1.Pod) error {
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return nil
	}
	deadline := int64(1)
	if pod.Status.StartTime != nil {
		deadline = max(1, int64(math.Ceil(r.cfg.Now().Sub(pod.Status.StartTime.Time).Seconds())))
	}
	if d := pod.Spec.ActiveDeadlineSeconds; d != nil && *d <= deadline {
		return nil
	}
	patch := client.MergeFrom(pod.DeepCopy())
	pod.Spec.ActiveDeadlineSeconds = &deadline
	return client.IgnoreNotFound(r.client.Patch(ctx, pod, patch))
}
