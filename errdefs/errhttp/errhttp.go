// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

// Package errhttp translates errdefs kinds to HTTP statuses and error codes
// and back. Servers call FromError when they answer; clients call ToError
// when they read an error response. It imports only errdefs and the standard
// library, so the SDK can use it.
package errhttp

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/corral-dev/corral/errdefs"
)

// Generic codes, one per kind, used when an error carries no specific code.
const (
	CodeNotFound           = "NOT_FOUND"
	CodeAlreadyExists      = "ALREADY_EXISTS"
	CodeInvalidArgument    = "INVALID_ARGUMENT"
	CodeFailedPrecondition = "FAILED_PRECONDITION"
	CodeUnavailable        = "UNAVAILABLE"
	CodeNotImplemented     = "NOT_IMPLEMENTED"
	CodePermissionDenied   = "PERMISSION_DENIED"
	CodeUnauthenticated    = "UNAUTHENTICATED"
	CodeResourceExhausted  = "RESOURCE_EXHAUSTED"
	CodeDeadlineExceeded   = "DEADLINE_EXCEEDED"
	CodeCanceled           = "CANCELED"
	CodeInternal           = "GENERAL::UNKNOWN_ERROR"
)

// HeaderKind names the error kind of an error answer, so that clients can
// tell kinds apart that share a status (409 is both ErrAlreadyExists and
// ErrFailedPrecondition). Servers that do not send it are read by status.
const HeaderKind = "Corral-Error-Kind"

// InternalMessage is what a 5xx without a user-facing message says.
const InternalMessage = "An unexpected error occurred."

type mapping struct {
	kind    error
	status  int
	code    string
	message string // what an error of the kind without a user-facing message says
}

func table() []mapping {
	return []mapping{
		{errdefs.ErrNotFound, http.StatusNotFound, CodeNotFound, "The resource was not found."},
		{errdefs.ErrAlreadyExists, http.StatusConflict, CodeAlreadyExists, "The resource already exists."},
		{errdefs.ErrInvalidArgument, http.StatusBadRequest, CodeInvalidArgument, "The request is not valid."},
		{errdefs.ErrFailedPrecondition, http.StatusConflict, CodeFailedPrecondition, "The resource is not in a state that allows this request."},
		{errdefs.ErrUnavailable, http.StatusServiceUnavailable, CodeUnavailable, "The service is unavailable; try again later."},
		{errdefs.ErrNotImplemented, http.StatusNotImplemented, CodeNotImplemented, "This operation is not supported here."},
		{errdefs.ErrPermissionDenied, http.StatusForbidden, CodePermissionDenied, "Permission denied."},
		{errdefs.ErrUnauthenticated, http.StatusUnauthorized, CodeUnauthenticated, "Authentication is required."},
		{errdefs.ErrResourceExhausted, http.StatusTooManyRequests, CodeResourceExhausted, "A limit was reached; try again later."},
	}
}

// Status returns the HTTP status for err's kind (500 when it has none).
func Status(err error) int {
	s, _, _ := FromError(err)
	return s
}

// FromError returns the status, code and message to answer err with. Only
// an *errdefs.Error's message, which is written for users, is ever shown:
// any other error gets its kind's sentence (or InternalMessage without
// one), because its text may be a backend's (an engine's, the cluster's,
// a file path) and the caller logs it instead.
func FromError(err error) (status int, code, message string) {
	status, code = http.StatusInternalServerError, CodeInternal
	message = InternalMessage
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		status, code, message = http.StatusGatewayTimeout, CodeDeadlineExceeded, "The operation did not finish in time."
	case errors.Is(err, context.Canceled):
		status, code, message = 499, CodeCanceled, "The request was canceled."
	}
	for _, m := range table() {
		if errors.Is(err, m.kind) {
			status, code, message = m.status, m.code, m.message
			break
		}
	}
	var pe *errdefs.Error
	if errors.As(err, &pe) {
		if pe.Code != "" {
			code = pe.Code
		}
		message = pe.Message
		if pe.Kind == nil {
			status = http.StatusInternalServerError
		}
	}
	return status, code, message
}

// KindName returns the name of err's kind for HeaderKind ("" if none).
// As in FromError, an *errdefs.Error's own kind decides, not its cause's.
func KindName(err error) string {
	var pe *errdefs.Error
	if errors.As(err, &pe) {
		if pe.Kind == nil {
			return ""
		}
		err = pe.Kind
	}
	for _, m := range table() {
		if errors.Is(err, m.kind) {
			return strings.ToLower(m.code)
		}
	}
	return ""
}

// ToError rebuilds an error of the right kind from an error response, so
// that errors.Is(err, errdefs.ErrNotFound) works in clients. kindName is
// the HeaderKind value, or "".
func ToError(status int, code, message, kindName string) error {
	if message == "" {
		message = http.StatusText(status)
	}
	kind := kindFor(status, code)
	for _, m := range table() {
		if kindName != "" && strings.EqualFold(kindName, m.code) {
			kind = m.kind
		}
	}
	return &errdefs.Error{Kind: kind, Code: code, Message: message}
}

func kindFor(status int, code string) error {
	switch status {
	case http.StatusBadRequest, http.StatusUnprocessableEntity, http.StatusRequestedRangeNotSatisfiable,
		http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType, http.StatusMethodNotAllowed:
		return errdefs.ErrInvalidArgument
	case http.StatusUnauthorized:
		return errdefs.ErrUnauthenticated
	case http.StatusForbidden:
		return errdefs.ErrPermissionDenied
	case http.StatusNotFound, http.StatusGone:
		return errdefs.ErrNotFound
	case http.StatusConflict:
		// 409 is shared by two kinds; the code tells them apart.
		if code == CodeAlreadyExists || strings.HasSuffix(code, "::"+CodeAlreadyExists) {
			return errdefs.ErrAlreadyExists
		}
		return errdefs.ErrFailedPrecondition
	case http.StatusPreconditionFailed, http.StatusLocked:
		return errdefs.ErrFailedPrecondition
	case http.StatusTooManyRequests:
		return errdefs.ErrResourceExhausted
	case http.StatusNotImplemented:
		return errdefs.ErrNotImplemented
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return errdefs.ErrUnavailable
	}
	return nil
}
