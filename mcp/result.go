// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package mcp

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/corral-dev/corral/errdefs"
	"github.com/corral-dev/corral/sdk"
)

// Error classes of a failed tool call: whose fault it is, which says what
// the caller should do next.
const (
	// ClassBadArguments: the call asked for something invalid or not
	// allowed by the policy; change the arguments.
	ClassBadArguments = "bad_arguments"
	// ClassSandbox: the sandbox (or the code in it) failed; look at it.
	ClassSandbox = "sandbox"
	// ClassPlatform: corral could not do it; retry if retryable.
	ClassPlatform = "platform"
	// ClassBudget: the session's budget is spent; stop.
	ClassBudget = "budget"
)

// ToolError is a failed call's classified error. It never carries a
// stack trace or a backend's own text beyond the API's message.
type ToolError struct {
	Class     string `json:"class" jsonschema:"bad_arguments, sandbox, platform or budget"`
	Code      string `json:"code,omitempty" jsonschema:"the corral API code when there is one"`
	Message   string `json:"message"`
	Retryable bool   `json:"retryable" jsonschema:"whether the same call may succeed later"`
}

func (e *ToolError) Error() string { return e.Message }

// Failure is embedded in every tool's output: set only when the call
// failed, and then the only field present.
type Failure struct {
	Error *ToolError `json:"error,omitempty" jsonschema:"set, alone, when the call failed"`
}

func badArgs(format string, args ...any) *ToolError {
	return &ToolError{Class: ClassBadArguments, Message: fmt.Sprintf(format, args...)}
}

func sandboxFault(format string, args ...any) *ToolError {
	return &ToolError{Class: ClassSandbox, Message: fmt.Sprintf(format, args...)}
}

func budgetSpent(code, format string, args ...any) *ToolError {
	return &ToolError{Class: ClassBudget, Code: code, Message: fmt.Sprintf(format, args...)}
}

// errMessage is an error's message without the wrapping of the SDK.
func errMessage(err error) string {
	var ae *sdk.APIError
	if errors.As(err, &ae) {
		return ae.Message
	}
	var ed *errdefs.Error
	if errors.As(err, &ed) && ed.Message != "" {
		return ed.Message
	}
	return err.Error()
}

// classify turns any error of a tool into a ToolError.
func classify(err error) *ToolError {
	var te *ToolError
	if errors.As(err, &te) {
		return te
	}
	e := &ToolError{Message: errMessage(err)}
	var ae *sdk.APIError
	if errors.As(err, &ae) {
		e.Code = ae.Code
	}
	switch {
	case strings.HasSuffix(e.Code, "::API_NOT_SUPPORTED") || errors.Is(err, errdefs.ErrNotImplemented):
		e.Class = ClassPlatform // this server or runtime cannot do it
	case errors.Is(err, context.DeadlineExceeded):
		e.Class, e.Retryable, e.Message = ClassPlatform, true, "the call took longer than the policy's call timeout"
	case errors.Is(err, context.Canceled):
		e.Class, e.Message = ClassPlatform, "the call was cancelled"
	case errors.Is(err, errdefs.ErrInvalidArgument), errors.Is(err, errdefs.ErrNotFound), errors.Is(err, errdefs.ErrAlreadyExists):
		e.Class = ClassBadArguments
	case errors.Is(err, errdefs.ErrFailedPrecondition):
		e.Class = ClassSandbox
	case errors.Is(err, errdefs.ErrResourceExhausted), errors.Is(err, errdefs.ErrUnavailable):
		e.Class, e.Retryable = ClassPlatform, true
	default:
		e.Class = ClassPlatform
		if ae == nil && !errors.Is(err, errdefs.ErrNotImplemented) && !errors.Is(err, errdefs.ErrPermissionDenied) &&
			!errors.Is(err, errdefs.ErrUnauthenticated) {
			// A transport failure between the tool layer and corral.
			e.Retryable = true
		}
	}
	return e
}

// Output is one captured output stream: its head and tail, the middle
// elided when it was longer than the policy's cap.
type Output struct {
	Text         string `json:"text" jsonschema:"the stream, or its head and tail joined by an elision marker"`
	Bytes        int64  `json:"bytes" jsonschema:"how many bytes the stream had"`
	DroppedBytes int64  `json:"dropped_bytes" jsonschema:"how many bytes were elided from the middle"`
}

// capture keeps the first and last limit/2 bytes written to it.
type capture struct {
	limit int
	head  []byte
	tail  []byte // a ring once full
	pos   int    // next write position in tail once full
	total int64
}

func newCapture(limit int) *capture { return &capture{limit: max(limit, 2)} }

func (c *capture) Write(p []byte) (int, error) {
	c.WriteString(string(p))
	return len(p), nil
}

func (c *capture) WriteString(s string) {
	c.total += int64(len(s))
	headCap := c.limit / 2
	if n := min(headCap-len(c.head), len(s)); n > 0 {
		c.head = append(c.head, s[:n]...)
		s = s[n:]
	}
	tailCap := c.limit - headCap
	for len(s) > 0 {
		if len(c.tail) < tailCap {
			n := min(tailCap-len(c.tail), len(s))
			c.tail = append(c.tail, s[:n]...)
			s = s[n:]
			continue
		}
		if len(s) >= tailCap {
			copy(c.tail, s[len(s)-tailCap:])
			c.pos = 0
			return
		}
		n := copy(c.tail[c.pos:], s)
		s = s[n:]
		c.pos = (c.pos + n) % tailCap
	}
}

// output is what was captured; truncated reports an elision.
func (c *capture) output() (Output, bool) {
	tail := append(append([]byte{}, c.tail[c.pos:]...), c.tail[:c.pos]...)
	kept := int64(len(c.head) + len(tail))
	dropped := c.total - kept
	if dropped == 0 {
		return Output{Text: validUTF8(string(c.head) + string(tail)), Bytes: c.total}, false
	}
	text := validUTF8(string(c.head)) + fmt.Sprintf("\n[... %d bytes elided ...]\n", dropped) + validUTF8(string(tail))
	return Output{Text: text, Bytes: c.total, DroppedBytes: dropped}, true
}

// validUTF8 replaces what a cut in the middle of a character left.
func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// capText caps one string the way streams are capped.
func capText(s string, limit int) (Output, bool) {
	c := newCapture(limit)
	c.WriteString(s)
	return c.output()
}
