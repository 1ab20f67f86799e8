// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/corral-dev/corral/internal/kube/apis/v1alpha1"
)

// waitingFailures are the container waiting reasons that mean the sandbox
// will not start without the user changing something.
var waitingFailures = map[string]string{
	"ErrImageNeverPull":          "ImageNotPresent",
	"ErrImagePull":               "ImagePullFailed",
	"ImagePullBackOff":           "ImagePullFailed",
	"InvalidImageName":           "InvalidImage",
	"CreateContainerConfigError": "InvalidContainerConfig",
	"CreateContainerError":       "ContainerCreateFailed",
	"RunContainerError":          "ContainerStartFailed",
}

// observePod writes what pod shows into status.
func observePod(status *v1alpha1.SandboxStatus, pod *corev1.Pod, stopped bool) {
	status.PodName = pod.Name
	status.PodIP = pod.Status.PodIP
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			setCondition(status, v1alpha1.ConditionScheduled, c.Status == corev1.ConditionTrue, nonEmpty(c.Reason, "Scheduled"), c.Message)
		}
	}
	for _, cs := range pod.Status.InitContainerStatuses {
		switch t := cs.State.Terminated; {
		case t == nil || t.ExitCode == 0:
		case cs.Name == CheckMountsContainerName:
			setCondition(status, v1alpha1.ConditionFailed, true, v1alpha1.ReasonMountThroughLink, strings.TrimSpace(t.Message))
		default:
			setCondition(status, v1alpha1.ConditionFailed, true, "CorralInstallFailed",
				fmt.Sprintf("the init container copying corral from %s exited %d: %s", cs.Image, t.ExitCode, t.Message))
		}
		if w := cs.State.Waiting; w != nil {
			if reason, ok := waitingFailures[w.Reason]; ok {
				setCondition(status, v1alpha1.ConditionFailed, true, "Corral"+reason,
					fmt.Sprintf("the corral image %s: %s: %s", cs.Image, w.Reason, w.Message))
			}
		}
	}
	var main *corev1.ContainerStatus
	for i := range pod.Status.ContainerStatuses {
		if pod.Status.ContainerStatuses[i].Name == ContainerName {
			main = &pod.Status.ContainerStatuses[i]
		}
	}
	switch {
	case main != nil && main.State.Terminated != nil:
		t := main.State.Terminated
		reason := t.Reason
		if stopped || pod.Status.Reason == "DeadlineExceeded" {
			reason = "Stopped"
		}
		code := t.ExitCode
		status.ExitCode = &code
		status.ExitReason = reason
		status.FinishedAt = ptrTime(t.FinishedAt)
		if status.StartedAt == nil && !t.StartedAt.IsZero() {
			status.StartedAt = ptrTime(t.StartedAt)
		}
		setCondition(status, v1alpha1.ConditionExited, true, nonEmpty(reason, "Exited"), fmt.Sprintf("the entrypoint exited with status %d", code))
		setCondition(status, v1alpha1.ConditionReady, false, "Exited", "")
	case main != nil && main.State.Running != nil:
		status.StartedAt = ptrTime(main.State.Running.StartedAt)
		setCondition(status, v1alpha1.ConditionFailed, false, "Running", "")
		if main.Ready {
			setCondition(status, v1alpha1.ConditionReady, true, "ExecdAnswers", "")
		} else {
			setCondition(status, v1alpha1.ConditionReady, false, "ExecdNotAnswering", "the container runs; execd does not answer its readiness probe yet")
		}
	case main != nil && main.State.Waiting != nil:
		w := main.State.Waiting
		if reason, ok := waitingFailures[w.Reason]; ok {
			setCondition(status, v1alpha1.ConditionFailed, true, reason, fmt.Sprintf("image %s: %s: %s", main.Image, w.Reason, w.Message))
			setCondition(status, v1alpha1.ConditionReady, false, reason, "")
		}
	case pod.Status.Phase == corev1.PodFailed:
		// Ended before the container ran (deadline, eviction).
		reason := nonEmpty(pod.Status.Reason, "PodFailed")
		if stopped {
			reason = "Stopped"
		}
		exitNow(status, time.Now(), 137, reason)
	}
}

// exitNow records an exit that no container reported.
func exitNow(status *v1alpha1.SandboxStatus, now time.Time, code int32, reason string) {
	if status.ExitCode != nil {
		return
	}
	status.ExitCode = &code
	status.ExitReason = reason
	status.FinishedAt = &metav1.Time{Time: now}
	setCondition(status, v1alpha1.ConditionExited, true, reason, "the sandbox ended before its entrypoint ran")
	setCondition(status, v1alpha1.ConditionReady, false, reason, "")
}

// phaseOf derives the phase from the conditions.
func phaseOf(status *v1alpha1.SandboxStatus) v1alpha1.SandboxPhase {
	switch {
	case conditionTrue(status, v1alpha1.ConditionFailed):
		// A pod that could not start also ends; why it failed matters more.
		return v1alpha1.SandboxFailed
	case conditionTrue(status, v1alpha1.ConditionExited):
		return v1alpha1.SandboxExited
	case status.StartedAt != nil && status.FinishedAt == nil:
		return v1alpha1.SandboxRunning
	}
	return v1alpha1.SandboxPending
}

func setCondition(status *v1alpha1.SandboxStatus, typ string, true_ bool, reason, msg string) {
	s := metav1.ConditionFalse
	if true_ {
		s = metav1.ConditionTrue
	}
	meta.SetStatusCondition(&status.Conditions, metav1.Condition{
		Type: typ, Status: s, Reason: reason, Message: msg, ObservedGeneration: status.ObservedGeneration,
	})
}

func conditionTrue(status *v1alpha1.SandboxStatus, typ string) bool {
	return meta.IsStatusConditionTrue(status.Conditions, typ)
}

func nonEmpty(s, dflt string) string {
	if s == "" {
		return dflt
	}
	return s
}

func ptrTime(t metav1.Time) *metav1.Time { return &t }
