// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

// Package apierr turns Kubernetes API server errors into corral's error
// kinds (errdefs), for the kube driver and the cluster-backed records.
package apierr

import (
	"context"
	"errors"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/errdefs"
)

// Classify wraps err, the API server's answer to op, in the errdefs kind
// that says what the caller can do about it; nil stays nil and a context
// error is returned as it is.
func Classify(op string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	case apierrors.IsNotFound(err):
		return errdefs.Wrap(errdefs.ErrNotFound, api.CodeSandboxNotFound, op+": not found", err)
	case apierrors.IsAlreadyExists(err):
		return errdefs.Wrap(errdefs.ErrAlreadyExists, api.CodeSandboxAlreadyExists, op+": already exists", err)
	case apierrors.IsInvalid(err), apierrors.IsBadRequest(err):
		return errdefs.Wrap(errdefs.ErrInvalidArgument, api.CodeInvalidParameter, op+": "+err.Error(), err)
	case apierrors.IsForbidden(err), apierrors.IsUnauthorized(err):
		return errdefs.Wrap(errdefs.ErrUnavailable, api.CodeSandboxRuntimeForbidden, op+": the cluster refused this server: "+err.Error(), err)
	case apierrors.IsConflict(err):
		return errdefs.Wrap(errdefs.ErrFailedPrecondition, api.CodeSandboxConflict, op+": "+err.Error(), err)
	}
	return errdefs.Wrap(errdefs.ErrUnavailable, api.CodeSandboxRuntimeUnavailable, op+": "+err.Error(), err)
}
