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
// error is returned as it is. The message is corral's: the API server's
// text (object names, admission webhooks' words, RBAC rules) is kept only
// as the cause, for the log.
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
		return errdefs.Wrap(errdefs.ErrInvalidArgument, api.CodeInvalidParameter, op+": the cluster refused the request as not valid (details are in the server log)", err)
	case apierrors.IsForbidden(err), apierrors.IsUnauthorized(err):
		return errdefs.Wrap(errdefs.ErrUnavailable, api.CodeSandboxRuntimeForbidden, op+": the cluster refused this server; check its RBAC (details are in the server log)", err)
	case apierrors.IsConflict(err):
		return errdefs.Wrap(errdefs.ErrFailedPrecondition, api.CodeSandboxConflict, op+": the object changed meanwhile; try again", err)
	}
	return errdefs.Wrap(errdefs.ErrUnavailable, api.CodeSandboxRuntimeUnavailable, op+": the cluster did not answer as expected (details are in the server log)", err)
}
