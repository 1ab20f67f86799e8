// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Sandbox is one sandbox: an isolated, short-lived computer running the
// user's image with corral's PID 1 and execd. The controller runs it as a
// Pod of the same name that the Sandbox owns.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=sbx,categories=corral
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Pod IP",type=string,JSONPath=`.status.podIP`
// +kubebuilder:printcolumn:name="Expires",type=date,JSONPath=`.spec.expireTime`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Sandbox struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   SandboxSpec   `json:"spec"`
	Status SandboxStatus `json:"status,omitempty"`
}

// SandboxSpec is the desired sandbox.
type SandboxSpec struct {
	// Image is the container image the sandbox runs.
	// +kubebuilder:validation:MinLength=1
	Image string `json:"image"`
	// ImagePullPolicy is the pod's pull policy for Image.
	// +optional
	ImagePullPolicy corev1.PullPolicy `json:"imagePullPolicy,omitempty"`
	// ImagePullSecrets name Secrets in the Sandbox's namespace with
	// registry credentials for Image.
	// +optional
	ImagePullSecrets []corev1.LocalObjectReference `json:"imagePullSecrets,omitempty"`
	// Entrypoint is the program and arguments corral init runs as the
	// sandbox's main process.
	// +kubebuilder:validation:MinItems=1
	Entrypoint []string `json:"entrypoint"`
	// Env is the entrypoint's and every command's environment.
	// +optional
	Env []corev1.EnvVar `json:"env,omitempty"`
	// Resources are the sandbox container's requests and limits.
	// +optional
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`
	// ExpireTime is when the controller deletes the Sandbox; unset means
	// never.
	// +optional
	ExpireTime *metav1.Time `json:"expireTime,omitempty"`
	// Stopped asks for the entrypoint to be ended (SIGTERM, then SIGKILL
	// after the pod's grace period). The pod is kept, so its exit status
	// stays readable, until the Sandbox is deleted. It cannot be undone.
	// +optional
	Stopped bool `json:"stopped,omitempty"`
	// AccessSecretName names a Secret in the Sandbox's namespace whose key
	// execd-token is execd's access token. The controller creates the pod
	// only once it exists.
	// +kubebuilder:validation:MinLength=1
	AccessSecretName string `json:"accessSecretName"`
	// RuntimeClassName is the pod's RuntimeClass (gVisor, Kata...).
	// +optional
	RuntimeClassName *string `json:"runtimeClassName,omitempty"`
	// Tenant owns the sandbox; it is also the pod's corral.dev/tenant label.
	// +optional
	Tenant string `json:"tenant,omitempty"`
	// PoolRef names a SandboxPool of the namespace whose warm pods have
	// this Sandbox's image, pull secrets, resources and runtime class: the
	// Sandbox adopts one of them when one is ready, and starts its own pod
	// otherwise. Env values from a Secret key or the pod's name, namespace
	// or IP are handed over too; other valueFrom sources (ConfigMaps,
	// resources) make the Sandbox start a pod of its own.
	// +optional
	PoolRef string `json:"poolRef,omitempty"`
	// Egress confines the sandbox's network to a policy that an egress
	// sidecar enforces inside the pod (DNS allow-list, nftables, the
	// OpenSandbox egress API on port 18080). Unset: the pod network as
	// the cluster gives it. A Sandbox with Egress never adopts a warm pod.
	// +optional
	Egress *SandboxEgress `json:"egress,omitempty"`
	// Volumes are PersistentVolumeClaims of the namespace mounted in the
	// sandbox's container, in order. A Sandbox with Volumes never adopts
	// a warm pod.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	// +listType=map
	// +listMapKey=name
	Volumes []SandboxVolume `json:"volumes,omitempty"`
}

// SandboxVolume is a claim mounted in a sandbox.
type SandboxVolume struct {
	// Name is the volume's name in the create request.
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
	// ClaimName is the PersistentVolumeClaim of the namespace.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	ClaimName string `json:"claimName"`
	// MountPath is where it is mounted: absolute, clean, none of the
	// sandbox's own paths.
	// +kubebuilder:validation:Pattern=`^/.`
	MountPath string `json:"mountPath"`
	// SubPath is a directory of the claim mounted instead of its root:
	// relative, no "..".
	// +optional
	SubPath string `json:"subPath,omitempty"`
	// ReadOnly mounts it read-only.
	// +optional
	ReadOnly bool `json:"readOnly,omitempty"`
}

// SandboxEgress is a sandbox's egress confinement.
type SandboxEgress struct {
	// Policy is the initial policy as JSON, in the OpenSandbox egress
	// contract's form: {"defaultAction":"deny","egress":[{"action":
	// "allow","target":"example.com"}]}. Changes made through the egress
	// API outlive sidecar restarts, not the pod.
	// +kubebuilder:validation:MinLength=2
	Policy string `json:"policy"`
}

// SandboxPhase is the coarse state of a sandbox, derived from its
// conditions.
// +kubebuilder:validation:Enum=Pending;Running;Exited;Failed
type SandboxPhase string

// The phases.
const (
	// SandboxPending: the pod is not running yet.
	SandboxPending SandboxPhase = "Pending"
	// SandboxRunning: the entrypoint runs.
	SandboxRunning SandboxPhase = "Running"
	// SandboxExited: the entrypoint ended; Status.ExitCode says how.
	SandboxExited SandboxPhase = "Exited"
	// SandboxFailed: the sandbox cannot start; the Failed condition says
	// why.
	SandboxFailed SandboxPhase = "Failed"
)

// Condition types of a Sandbox.
const (
	// ConditionScheduled: the pod is bound to a node.
	ConditionScheduled = "Scheduled"
	// ConditionReady: execd answers inside the running sandbox.
	ConditionReady = "Ready"
	// ConditionFailed: the sandbox cannot start or run; the reason says
	// what to fix (ImageNotPresent, InvalidImage, MissingAccessSecret...).
	ConditionFailed = "Failed"
	// ConditionExited: the entrypoint ended.
	ConditionExited = "Exited"
	// ConditionExpired: expireTime passed; the Sandbox is being deleted
	// (reason TTLExpired). Watchers see it on the last update before the
	// deletion.
	ConditionExpired = "Expired"
)

// SandboxStatus is the observed sandbox.
type SandboxStatus struct {
	// Phase is derived from the conditions.
	// +optional
	Phase SandboxPhase `json:"phase,omitempty"`
	// Conditions are Scheduled, Ready, Failed and Exited.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// ObservedGeneration is the generation the status was computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// PodName is the sandbox's pod, in the Sandbox's namespace: the
	// Sandbox's own name, or the pool pod it adopted.
	// +optional
	PodName string `json:"podName,omitempty"`
	// PodIP is the pod's address; execd listens on port 44772 there.
	// +optional
	PodIP string `json:"podIP,omitempty"`
	// StartedAt is when the entrypoint started.
	// +optional
	StartedAt *metav1.Time `json:"startedAt,omitempty"`
	// FinishedAt is when the entrypoint ended.
	// +optional
	FinishedAt *metav1.Time `json:"finishedAt,omitempty"`
	// ExitCode is the entrypoint's exit status (128+signal when killed).
	// +optional
	ExitCode *int32 `json:"exitCode,omitempty"`
	// ExitReason is the runtime's word for how it ended (Completed,
	// Error, OOMKilled, Stopped).
	// +optional
	ExitReason string `json:"exitReason,omitempty"`
}

// SandboxList is a list of Sandboxes.
//
// +kubebuilder:object:root=true
type SandboxList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Sandbox `json:"items"`
}
