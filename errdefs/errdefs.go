// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

// Package errdefs owns corral's closed set of error kinds. Every layer wraps
// its errors around one of these sentinels; the HTTP boundary (package
// errhttp) translates kinds to statuses and back, so errors.Is(err, kind)
// holds on both sides of the wire. Any package may import it; it imports only
// the standard library.
package errdefs

import (
	"errors"
	"fmt"
	"strings"
)

// The kinds. Cancellation and deadlines are context.Canceled and
// context.DeadlineExceeded; there are no copies of them here.
var (
	ErrNotFound           = errors.New("not found")
	ErrAlreadyExists      = errors.New("already exists")
	ErrInvalidArgument    = errors.New("invalid argument")
	ErrFailedPrecondition = errors.New("failed precondition")
	ErrUnavailable        = errors.New("unavailable")
	ErrNotImplemented     = errors.New("not implemented")
	ErrPermissionDenied   = errors.New("permission denied")
	ErrUnauthenticated    = errors.New("unauthenticated")
	ErrResourceExhausted  = errors.New("resource exhausted")
)

// Kinds lists every kind, in a stable order.
func Kinds() []error {
	return []error{
		ErrNotFound, ErrAlreadyExists, ErrInvalidArgument, ErrFailedPrecondition,
		ErrUnavailable, ErrNotImplemented, ErrPermissionDenied, ErrUnauthenticated,
		ErrResourceExhausted,
	}
}

// KindOf returns the kind err belongs to, or nil when it belongs to none.
func KindOf(err error) error {
	for _, k := range Kinds() {
		if errors.Is(err, k) {
			return k
		}
	}
	return nil
}

// Error is an error whose code and message are written for the API's users.
// It belongs to Kind; Cause, when set, is kept for logs and errors.Is.
type Error struct {
	Kind    error
	Code    string
	Message string
	Cause   error
}

func (e *Error) Error() string { return e.Message }

// Unwrap exposes both the kind and the cause to errors.Is and errors.As.
func (e *Error) Unwrap() []error {
	var errs []error
	for _, err := range []error{e.Kind, e.Cause} {
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// New returns a user-facing error of the given kind with a stable code.
func New(kind error, code, message string) error {
	return &Error{Kind: kind, Code: code, Message: message}
}

// Newf is New with a formatted message. %w verbs are not allowed; use Wrap.
func Newf(kind error, code, format string, args ...any) error {
	return &Error{Kind: kind, Code: code, Message: fmt.Sprintf(format, args...)}
}

// Wrap returns a user-facing error of the given kind that keeps cause for logs.
func Wrap(kind error, code, message string, cause error) error {
	return &Error{Kind: kind, Code: code, Message: message, Cause: cause}
}

// Invalid is shorthand for a user-facing ErrInvalidArgument with a formatted message.
func Invalid(code, format string, args ...any) error {
	return Newf(ErrInvalidArgument, code, format, args...)
}

// UserMessage is the message of the *Error in err's tree, written for
// the API's caller, and whether there is one (UserFacing).
func UserMessage(err error) (string, bool) {
	var pe *Error
	if errors.As(err, &pe) {
		return pe.Message, true
	}
	return "", false
}

// UserFacing reports whether err carries an *Error: a message written for
// the API's caller rather than a cause for the log.
func UserFacing(err error) bool {
	_, ok := UserMessage(err)
	return ok
}

// Detail is err's text for logs. An *Error's Error() is its user-facing
// message only, so Detail adds every cause such errors keep, however deep
// in err's tree they are.
func Detail(err error) string {
	if err == nil {
		return ""
	}
	var b strings.Builder
	b.WriteString(err.Error())
	var visit func(error)
	visit = func(e error) {
		if pe, ok := e.(*Error); ok && pe.Cause != nil {
			b.WriteString(" [cause: ")
			b.WriteString(pe.Cause.Error())
			b.WriteString("]")
		}
		switch u := e.(type) {
		case interface{ Unwrap() error }:
			if next := u.Unwrap(); next != nil {
				visit(next)
			}
		case interface{ Unwrap() []error }:
			for _, next := range u.Unwrap() {
				visit(next)
			}
		}
	}
	visit(err)
	return b.String()
}
