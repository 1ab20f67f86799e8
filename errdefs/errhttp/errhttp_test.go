// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package errhttp_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/corral-dev/corral/errdefs"
	"github.com/corral-dev/corral/errdefs/errhttp"
)

// TestRoundTrip walks every kind through server and client translation:
// what a handler returns is what errors.Is sees in the client.
func TestRoundTrip(t *testing.T) {
	t.Parallel()
	for _, kind := range errdefs.Kinds() {
		for _, err := range []error{
			fmt.Errorf("sandbox x: %w", kind),
			errdefs.New(kind, "SANDBOX::SOMETHING_SPECIFIC", "a message for users"),
		} {
			status, code, msg := errhttp.FromError(err)
			back := errhttp.ToError(status, code, msg, errhttp.KindName(err))
			if !errors.Is(back, kind) {
				t.Errorf("FromError(%v) = %d %s; ToError gives %v, which is not %v", err, status, code, back, kind)
			}
		}
	}
}

func TestFromError(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name       string
		err        error
		wantStatus int
		wantCode   string
		wantMsg    string
	}{
		{"plain error hides its text", errors.New("dial unix /var/run/x.sock: refused"), 500, errhttp.CodeInternal, errhttp.InternalMessage},
		{"unavailable hides its text", fmt.Errorf("docker: %w", errdefs.ErrUnavailable), 503, errhttp.CodeUnavailable, "The service is unavailable; try again later."},
		{"client error hides its text too", fmt.Errorf("open /var/lib/corral/x: %w", errdefs.ErrNotFound), 404, errhttp.CodeNotFound, "The resource was not found."},
		{"engine text under a kind is hidden", fmt.Errorf("create: %w: %w", errdefs.ErrInvalidArgument, errors.New("engine: invalid mount /secret")), 400, errhttp.CodeInvalidArgument, "The request is not valid."},
		{"user-facing error keeps code and message", errdefs.New(errdefs.ErrUnavailable, "X::Y", "try later"), 503, "X::Y", "try later"},
		{"deadline", context.DeadlineExceeded, 504, errhttp.CodeDeadlineExceeded, "The operation did not finish in time."},
		{"already exists", fmt.Errorf("key: %w", errdefs.ErrAlreadyExists), 409, errhttp.CodeAlreadyExists, "The resource already exists."},
		{"a user-facing error wrapped keeps its message", fmt.Errorf("op: %w", errdefs.New(errdefs.ErrNotFound, "X::Z", "no such sandbox")), 404, "X::Z", "no such sandbox"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, c, m := errhttp.FromError(tc.err)
			if s != tc.wantStatus || c != tc.wantCode || m != tc.wantMsg {
				t.Errorf("FromError = %d %q %q, want %d %q %q", s, c, m, tc.wantStatus, tc.wantCode, tc.wantMsg)
			}
		})
	}
}

func TestToErrorWithoutKindHeaderUsesStatus(t *testing.T) {
	t.Parallel()
	for status, want := range map[int]error{404: errdefs.ErrNotFound, 409: errdefs.ErrFailedPrecondition, 422: errdefs.ErrInvalidArgument,
		401: errdefs.ErrUnauthenticated, 503: errdefs.ErrUnavailable, 429: errdefs.ErrResourceExhausted} {
		if err := errhttp.ToError(status, "X", "m", ""); !errors.Is(err, want) {
			t.Errorf("ToError(%d) = kind %v, want %v", status, errdefs.KindOf(err), want)
		}
	}
}

func TestToErrorUnknownStatusHasNoKind(t *testing.T) {
	t.Parallel()
	err := errhttp.ToError(http.StatusInternalServerError, "GENERAL::UNKNOWN_ERROR", "boom", "")
	if errdefs.KindOf(err) != nil {
		t.Fatalf("a 500 maps to kind %v, want none", errdefs.KindOf(err))
	}
	if err.Error() != "boom" {
		t.Fatalf("message = %q", err.Error())
	}
}
