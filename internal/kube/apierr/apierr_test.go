// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package apierr

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/errdefs"
)

// Each answer of the API server maps to the kind that says what the
// caller can do, and the API server's own words stay out of the message.
func TestClassify(t *testing.T) {
	gr := schema.GroupResource{Group: "corral.dev", Resource: "sandboxes"}
	secret := "rbac-rule-naming-secret-things"
	for _, c := range []struct {
		err  error
		kind error
		code string
	}{
		{apierrors.NewNotFound(gr, secret), errdefs.ErrNotFound, api.CodeSandboxNotFound},
		{apierrors.NewAlreadyExists(gr, secret), errdefs.ErrAlreadyExists, api.CodeSandboxAlreadyExists},
		{apierrors.NewInvalid(schema.GroupKind{Group: "corral.dev", Kind: "Sandbox"}, secret, field.ErrorList{field.Invalid(field.NewPath("spec"), secret, "bad")}), errdefs.ErrInvalidArgument, api.CodeInvalidParameter},
		{apierrors.NewBadRequest(secret), errdefs.ErrInvalidArgument, api.CodeInvalidParameter},
		{apierrors.NewForbidden(gr, secret, errors.New(secret)), errdefs.ErrUnavailable, api.CodeSandboxRuntimeForbidden},
		{apierrors.NewUnauthorized(secret), errdefs.ErrUnavailable, api.CodeSandboxRuntimeForbidden},
		{apierrors.NewConflict(gr, secret, errors.New(secret)), errdefs.ErrFailedPrecondition, api.CodeSandboxConflict},
		{apierrors.NewInternalError(errors.New(secret)), errdefs.ErrUnavailable, api.CodeSandboxRuntimeUnavailable},
		{fmt.Errorf("dial: %s", secret), errdefs.ErrUnavailable, api.CodeSandboxRuntimeUnavailable},
	} {
		got := Classify("create sandbox", c.err)
		var pe *errdefs.Error
		if !errors.Is(got, c.kind) || !errors.As(got, &pe) || pe.Code != c.code {
			t.Errorf("%v: %v, want kind %v code %s", c.err, got, c.kind, c.code)
			continue
		}
		if strings.Contains(pe.Message, secret) || !strings.HasPrefix(pe.Message, "create sandbox: ") {
			t.Errorf("%v: message %q", c.err, pe.Message)
		}
		if !errors.Is(got, c.err) {
			t.Errorf("%v: the cause is lost", c.err)
		}
	}
	if Classify("x", nil) != nil {
		t.Error("nil is not nil")
	}
	for _, e := range []error{context.Canceled, fmt.Errorf("get: %w", context.DeadlineExceeded)} {
		if got := Classify("x", e); got != e {
			t.Errorf("Classify(%v) = %v, want it as it is", e, got)
		}
	}
}
