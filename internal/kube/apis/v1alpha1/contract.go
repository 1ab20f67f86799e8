// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package v1alpha1

// What the kube driver (in the server) and the controller share besides
// the types: the access Secret's keys, the pod's sandbox container, the
// scheme, owner references, and
// which pools' pods a Sandbox may adopt. Here, so that the server does
// not link the reconcilers to share vocabulary.

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

const (
	// TokenKey is the key of the access Secret holding execd's token.
	TokenKey = "execd-token"
	// EgressTokenKey is the key of the access Secret holding the egress
	// API's token (Sandboxes with an egress policy).
	EgressTokenKey = "egress-token"
	// SandboxContainer is the pod's container that runs the sandbox: the
	// user's image running corral init (the server reads its log).
	SandboxContainer = "sandbox"
	// ReasonMountThroughLink is the Failed reason of a Sandbox whose image
	// holds a symbolic link on the way to a volume's mount path (or to
	// corral's own): refused before the sandbox's container starts.
	ReasonMountThroughLink = "MountThroughLink"
)

// Scheme returns the scheme of everything the controller and the kube
// driver read and write: the core types they use and corral's CRDs.
func Scheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := corev1.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := AddToScheme(s); err != nil {
		return nil, err
	}
	return s, nil
}

// OwnerRef is the controller reference of o (a corral.dev object of kind)
// on the objects made for it.
func OwnerRef(o metav1.Object, kind string) metav1.OwnerReference {
	t := true
	return metav1.OwnerReference{
		APIVersion: GroupVersion.String(), Kind: kind, Name: o.GetName(), UID: o.GetUID(),
		Controller: &t, BlockOwnerDeletion: &t,
	}
}

// Matches reports whether sbx asks for what a pool of template t
// runs: the pods it could adopt. A warm pod mounts no claims, so a
// Sandbox with volumes never matches.
func (t *SandboxTemplate) Matches(sbx *Sandbox) bool {
	s := &sbx.Spec
	return len(s.Volumes) == 0 && t.Image == s.Image && equalPtr(t.RuntimeClassName, s.RuntimeClassName) && t.Egress == (s.Egress != nil) &&
		slices.Equal(t.ImagePullSecrets, s.ImagePullSecrets) &&
		t.Resources.Limits.Cpu().Equal(*s.Resources.Limits.Cpu()) && t.Resources.Limits.Memory().Equal(*s.Resources.Limits.Memory()) &&
		t.Resources.Requests.Cpu().Equal(*s.Resources.Requests.Cpu()) && t.Resources.Requests.Memory().Equal(*s.Resources.Requests.Memory())
}

func equalPtr[T comparable](a, b *T) bool {
	return a == nil && b == nil || a != nil && b != nil && *a == *b
}
