// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/errdefs"
)

// refusal is how the API answers a runtime's error of one kind: the kind
// the API gives it (a runtime that refuses this server, or is out of
// capacity, is unavailable to the user), a code and a reason.
type refusal struct {
	kind         error
	code, reason string
}

// refusals are the server's words for what drivers return as bare kinds.
var refusals = map[error]refusal{
	errdefs.ErrNotFound:           {errdefs.ErrNotFound, api.CodeSandboxNotFound, "the sandbox is gone from the runtime"},
	errdefs.ErrAlreadyExists:      {errdefs.ErrAlreadyExists, api.CodeSandboxAlreadyExists, "the runtime already has a sandbox of this id"},
	errdefs.ErrInvalidArgument:    {errdefs.ErrInvalidArgument, api.CodeInvalidParameter, "the runtime refused the request as not valid"},
	errdefs.ErrFailedPrecondition: {errdefs.ErrFailedPrecondition, api.CodeSandboxInvalidState, "the sandbox is not in a state that allows it"},
	errdefs.ErrUnavailable:        {errdefs.ErrUnavailable, api.CodeSandboxRuntimeUnavailable, "the runtime is unavailable"},
	errdefs.ErrNotImplemented:     {errdefs.ErrFailedPrecondition, api.CodeAPINotSupported, "the runtime does not support it"},
	errdefs.ErrPermissionDenied:   {errdefs.ErrUnavailable, api.CodeSandboxRuntimeForbidden, "the runtime refused this server permission"},
	errdefs.ErrUnauthenticated:    {errdefs.ErrUnavailable, api.CodeSandboxRuntimeForbidden, "the runtime refused this server's credentials"},
	errdefs.ErrResourceExhausted:  {errdefs.ErrUnavailable, api.CodeSandboxRuntimeUnavailable, "the runtime is out of capacity"},
}

// The kinds each route may answer a runtime's error with (the contract's
// statuses, and 503); any other is the server's failure, a 500.
var (
	createKinds  = []error{errdefs.ErrInvalidArgument, errdefs.ErrAlreadyExists, errdefs.ErrFailedPrecondition, errdefs.ErrUnavailable}
	changeKinds  = []error{errdefs.ErrNotFound, errdefs.ErrFailedPrecondition, errdefs.ErrUnavailable}
	endpointKind = []error{errdefs.ErrInvalidArgument, errdefs.ErrNotFound, errdefs.ErrUnavailable}
)

// refuse is how a route that may answer the kinds in answerable answers
// a runtime's error err: the API's kind (nil: a 500), code and reason.
// ok is false for an error of no kind.
func refuse(err error, answerable []error) (r refusal, ok bool) {
	r, ok = refusals[errdefs.KindOf(err)]
	if ok && !slices.Contains(answerable, r.kind) {
		r.kind = nil
	}
	return r, ok
}

// runtimeError is what a request is answered when the runtime fails op
// ("pause", "delete", ...) on a sandbox. Drivers return kinds, and a
// user-facing *errdefs.Error where the client needs the detail (an image
// that does not exist, a runtime that is down and why); that error
// stands. Any other gets the server's kind, code and message (refuse):
// the driver's text, which may be an engine's or the cluster's, is kept
// only as the cause, for the log.
func runtimeError(op string, err error, answerable []error) error {
	if err == nil || errdefs.UserFacing(err) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	r, ok := refuse(err, answerable)
	if !ok {
		return err
	}
	return &errdefs.Error{Kind: r.kind, Code: r.code, Message: fmt.Sprintf("could not %s the sandbox: %s (details are in the server log)", op, r.reason), Cause: err}
}

// userMessage is what a response or a sandbox's status may say about err:
// the message of a user-facing error, the server's sentence for its kind,
// or a generic one; the detail goes to the log.
func userMessage(err error) string {
	if msg, ok := errdefs.UserMessage(err); ok {
		return msg
	}
	if r, ok := refuse(err, nil); ok {
		return r.reason + " (details are in the server log)"
	}
	return "the runtime reported an error (details are in the server log)"
}

func errCode(err error, fallback string) string {
	var pe *errdefs.Error
	if errors.As(err, &pe) && pe.Code != "" {
		return pe.Code
	}
	return fallback
}
