// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/corral-dev/corral/internal/kube/apis/v1alpha1"
)

// TestStatusFromPod checks what a Sandbox reports for the pod states the
// kubelet produces, without a cluster.
func TestStatusFromPod(t *testing.T) {
	started := metav1.NewTime(time.Date(2026, 11, 30, 3, 0, 0, 0, time.UTC))
	finished := metav1.NewTime(started.Add(time.Minute))
	scheduled := corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}
	main := func(st corev1.ContainerState, ready bool) []corev1.ContainerStatus {
		return []corev1.ContainerStatus{{Name: ContainerName, Image: "img", State: st, Ready: ready}}
	}
	for _, tc := range []struct {
		name      string
		pod       corev1.PodStatus
		stopped   bool
		phase     v1alpha1.SandboxPhase
		reason    string // of the Failed or Exited condition that is true
		exitCode  int32
		readyTrue bool
	}{
		{name: "pending", pod: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{scheduled}},
			phase: v1alpha1.SandboxPending},
		{name: "running, execd not yet", pod: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.5",
			ContainerStatuses: main(corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}}, false)},
			phase: v1alpha1.SandboxRunning},
		{name: "running and ready", pod: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.5",
			ContainerStatuses: main(corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}}, true)},
			phase: v1alpha1.SandboxRunning, readyTrue: true},
		{name: "image absent", pod: corev1.PodStatus{Phase: corev1.PodPending,
			ContainerStatuses: main(corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImageNeverPull", Message: "not present"}}, false)},
			phase: v1alpha1.SandboxFailed, reason: "ImageNotPresent"},
		{name: "pull back-off", pod: corev1.PodStatus{Phase: corev1.PodPending,
			ContainerStatuses: main(corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff"}}, false)},
			phase: v1alpha1.SandboxFailed, reason: "ImagePullFailed"},
		{name: "corral image absent", pod: corev1.PodStatus{Phase: corev1.PodPending,
			InitContainerStatuses: []corev1.ContainerStatus{{Name: InstallContainerName, Image: "corral",
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImagePull"}}}}},
			phase: v1alpha1.SandboxFailed, reason: "CorralImagePullFailed"},
		{name: "install failed", pod: corev1.PodStatus{Phase: corev1.PodFailed,
			InitContainerStatuses: []corev1.ContainerStatus{{Name: InstallContainerName, Image: "corral",
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1}}}}},
			phase: v1alpha1.SandboxFailed, reason: "CorralInstallFailed"},
		{name: "a mount path through a link", pod: corev1.PodStatus{Phase: corev1.PodFailed,
			InitContainerStatuses: []corev1.ContainerStatus{{Name: InstallContainerName, Image: "corral",
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0}}},
				{Name: CheckMountsContainerName, Image: "img",
					State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Message: "mountPath /v/.corral passes through a symbolic link"}}}}},
			phase: v1alpha1.SandboxFailed, reason: v1alpha1.ReasonMountThroughLink},
		{name: "exited", pod: corev1.PodStatus{Phase: corev1.PodFailed,
			ContainerStatuses: main(corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: 3, Reason: "Error", StartedAt: started, FinishedAt: finished}}, false)},
			phase: v1alpha1.SandboxExited, reason: "Error", exitCode: 3},
		{name: "stopped", stopped: true, pod: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "DeadlineExceeded",
			ContainerStatuses: main(corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: 143, Reason: "Error", StartedAt: started, FinishedAt: finished}}, false)},
			phase: v1alpha1.SandboxExited, reason: "Stopped", exitCode: 143},
		{name: "evicted before it ran", pod: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted"},
			phase: v1alpha1.SandboxExited, reason: "Evicted", exitCode: 137},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := &v1alpha1.SandboxStatus{}
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Status: tc.pod}
			observePod(st, pod, tc.stopped)
			st.Phase = phaseOf(st)
			if st.Phase != tc.phase {
				t.Fatalf("phase = %s, want %s (conditions %+v)", st.Phase, tc.phase, st.Conditions)
			}
			switch tc.phase {
			case v1alpha1.SandboxFailed:
				if c := cond(st, v1alpha1.ConditionFailed); c == nil || c.Reason != tc.reason {
					t.Errorf("Failed condition = %+v, want reason %s", c, tc.reason)
				}
			case v1alpha1.SandboxExited:
				if c := cond(st, v1alpha1.ConditionExited); c == nil || c.Reason != tc.reason || st.ExitReason != tc.reason {
					t.Errorf("Exited condition = %+v, exitReason %q, want %s", c, st.ExitReason, tc.reason)
				}
				if st.ExitCode == nil || *st.ExitCode != tc.exitCode || st.FinishedAt == nil {
					t.Errorf("exit = %v at %v, want %d", st.ExitCode, st.FinishedAt, tc.exitCode)
				}
			}
			if got := conditionTrue(st, v1alpha1.ConditionReady); got != tc.readyTrue {
				t.Errorf("Ready = %v, want %v", got, tc.readyTrue)
			}
			// Observing the same pod again changes nothing (no status churn).
			again := st.DeepCopy()
			observePod(again, pod, tc.stopped)
			again.Phase = phaseOf(again)
			if tc.phase != v1alpha1.SandboxExited || tc.pod.Reason == "" { // exits with no container report keep their first time
				for i := range st.Conditions {
					if st.Conditions[i] != again.Conditions[i] {
						t.Errorf("second observation changed %+v to %+v", st.Conditions[i], again.Conditions[i])
					}
				}
			}
		})
	}
}

func cond(st *v1alpha1.SandboxStatus, typ string) *metav1.Condition {
	for i := range st.Conditions {
		if st.Conditions[i].Type == typ {
			return &st.Conditions[i]
		}
	}
	return nil
}
