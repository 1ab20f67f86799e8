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
	kind   error
	status int
	code   string
}

func table() []mapping {
	return []mapping{
		{errdefs.ErrNotFound, http.StatusNotFound, CodeNotFound},
		{errdefs.ErrAlreadyExists, http.StatusConflict, CodeAlreadyExists},
		{errdefs.ErrInvalidArgument, http.StatusBadRequest, CodeInvalidArgument},
		{errdefs.ErrFailedPrecondition, http.StatusConflict, CodeFailedPrecondition},
		{errdefs.ErrUnavailable, http.StatusServiceUnavailable, CodeUnavailable},
		{errdefs.ErrNotImplemented, http.StatusNotImplemented, CodeNotImplemented},
		{errdefs.ErrPermissionDenied, http.StatusForbidden, CodePermissionDenied},
		{errdefs.ErrUnauthenticated, http.StatusUnauthorized, CodeUnauthenticated},
		{errdefs.ErrResourceExhausted, http.StatusTooManyRequests, CodeResourceExhausted},
	}
}

// Status returns the HTTP status for err's kind (500 when it has none).
func Status(err error) int {
	s, _, _ := FromError(err)
	return s
}

// FromError returns the status, code and message to answer err with. The
// message of a 5xx error is generic unless the error is an *errdefs.Error,
// whose message is written for users; the caller logs the cause.
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
			status, code = m.status, m.code
			if status < 500 {
				message = err.Error()
			}
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
func KindName(err error) string {
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
