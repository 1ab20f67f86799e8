// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SandboxPool keeps pods of one template started ahead of time: corral
// init and execd run, the entrypoint waits. A Sandbox that names the pool
// (spec.poolRef) adopts one of them — its token, environment and
// entrypoint are handed over through execd — instead of starting a pod,
// and the pool starts a replacement.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=sbxpool,categories=corral
// +kubebuilder:printcolumn:name="Image",type=string,JSONPath=`.spec.template.image`
// +kubebuilder:printcolumn:name="Warm",type=integer,JSONPath=`.spec.warm`
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.ready`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type SandboxPool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   SandboxPoolSpec   `json:"spec"`
	Status SandboxPoolStatus `json:"status,omitempty"`
}

// SandboxPoolSpec is the desired pool.
type SandboxPoolSpec struct {
	// Template is what every pod of the pool runs.
	Template SandboxTemplate `json:"template"`
	// Warm is how many started, unclaimed pods the pool keeps.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	Warm int32 `json:"warm"`
	// MaxStarting caps how many of the pool's pods start at once (default
	// 2): a node busy starting replacements answers claims slowly.
	// +kubebuilder:validation:Minimum=1
	// +optional
	MaxStarting *int32 `json:"maxStarting,omitempty"`
}

// SandboxTemplate is the part of a Sandbox a pool's pods share; the rest
// (token, environment, entrypoint, tenant) is handed over on adoption.
type SandboxTemplate struct {
	// +kubebuilder:validation:MinLength=1
	Image string `json:"image"`
	// +optional
	ImagePullPolicy corev1.PullPolicy `json:"imagePullPolicy,omitempty"`
	// +optional
	ImagePullSecrets []corev1.LocalObjectReference `json:"imagePullSecrets,omitempty"`
	// +optional
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`
	// +optional
	RuntimeClassName *string `json:"runtimeClassName,omitempty"`
	// Egress gives the warm pods an egress sidecar that denies everything
	// until a Sandbox with a network policy adopts the pod and sets its
	// policy. Only Sandboxes with a policy adopt such pods, and only such
	// pods serve Sandboxes with a policy.
	// +optional
	Egress bool `json:"egress,omitempty"`
}

// SandboxPoolStatus is the observed pool.
type SandboxPoolStatus struct {
	// Ready counts unclaimed pods whose execd answers.
	// +optional
	Ready int32 `json:"ready"`
	// Starting counts unclaimed pods not ready yet.
	// +optional
	Starting int32 `json:"starting"`
	// ObservedGeneration is the generation the status was computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// SandboxPoolList is a list of SandboxPools.
//
// +kubebuilder:object:root=true
type SandboxPoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SandboxPool `json:"items"`
}
