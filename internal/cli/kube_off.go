// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

//go:build !kube && linux

package cli

// kubeBuild is empty: this build has no Kubernetes support, and every
// use of it explains that (errNoKube).
var kubeBuild kubeSupport
