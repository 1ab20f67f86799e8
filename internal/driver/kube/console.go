// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package kube

import (
	"context"
	"io"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/corral-dev/corral/internal/driver"
	"github.com/corral-dev/corral/internal/kube/apis/v1alpha1"
)

var _ driver.Consoler = (*Driver)(nil)

// Console implements driver.Consoler: the end of the sandbox container's
// log, which the kubelet keeps (and rotates) for the pod. A sandbox whose
// pod is not there yet, or no more, has printed nothing this can read.
func (d *Driver) Console(ctx context.Context, id string, limit int) ([]byte, bool, error) {
	sbx, err := d.get(ctx, id)
	if err != nil {
		return nil, false, err
	}
	if sbx.Status.PodName == "" {
		return nil, false, nil
	}
	req := d.core.Pods(d.cfg.Namespace).GetLogs(sbx.Status.PodName, &corev1.PodLogOptions{Container: v1alpha1.SandboxContainer})
	stream, err := req.Stream(ctx)
	if apierrors.IsNotFound(err) || apierrors.IsBadRequest(err) {
		// No pod, or a container that has not started.
		return nil, false, nil
	}
	if err != nil {
		return nil, false, apiErr("logs of "+id, err)
	}
	defer stream.Close()
	t := &driver.Tail{Max: limit}
	if _, err := io.Copy(t, stream); err != nil {
		return nil, false, apiErr("logs of "+id, err)
	}
	return t.Bytes(), t.Truncated, nil
}
