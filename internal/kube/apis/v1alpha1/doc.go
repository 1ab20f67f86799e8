// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

// Package v1alpha1 holds the Go types of corral's custom resources in API
// group corral.dev, version v1alpha1: Sandbox (one sandbox, reconciled into
// a Pod by internal/kube/controller) and SandboxPool (pods started ahead
// of time that Sandboxes adopt). The CRD manifests in
// deploy/kubernetes/crd and zz_generated.deepcopy.go are generated from
// these types by controller-gen (`go generate ./internal/kube/...`); a test
// regenerates them and fails on any difference. Imported by the controller
// and by the kube driver, which meet here (contract.go) rather than the
// driver importing the controller.
//
// +kubebuilder:object:generate=true
// +groupName=corral.dev
package v1alpha1

//go:generate go tool controller-gen object paths=. crd:crdVersions=v1 output:crd:dir=../../../../deploy/kubernetes/crd

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is the API group and version of the types here.
var GroupVersion = schema.GroupVersion{Group: "corral.dev", Version: "v1alpha1"}

// AddToScheme registers the types of this package with a scheme.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &Sandbox{}, &SandboxList{}, &SandboxPool{}, &SandboxPoolList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
