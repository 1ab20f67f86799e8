// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package driver

import (
	"fmt"
	"strings"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/errdefs"
)

// ExitedDuringStart is the error of a create whose entrypoint exited
// before the sandbox was ready, in the same words on every runtime: the
// tenant's failure (ErrInvalidArgument, SANDBOX::START_FAILED) with the
// exit code, the runtime's reason when it gives one, and the end of what
// the sandbox printed (its last five non-empty lines, 2 KiB at most).
// cause, which may be nil, is for the server's log.
func ExitedDuringStart(id string, code int, reason, console string, cause error) error {
	msg := fmt.Sprintf("sandbox %s: the entrypoint exited with code %d", id, code)
	if reason != "" {
		msg += " (" + reason + ")"
	}
	msg += " before it was ready"
	if tail := consoleTail(console); tail != "" {
		msg += ": " + tail
	}
	if cause == nil {
		return errdefs.New(errdefs.ErrInvalidArgument, api.CodeSandboxStartFailed, msg)
	}
	return errdefs.Wrap(errdefs.ErrInvalidArgument, api.CodeSandboxStartFailed, msg, cause)
}

// consoleTail is the last five non-empty lines of console, joined by
// "; ", and no longer than 2 KiB (its end kept).
func consoleTail(console string) string {
	var lines []string
	for l := range strings.SplitSeq(console, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	out := strings.Join(lines[max(0, len(lines)-5):], "; ")
	if len(out) > 2048 {
		out = "…" + out[len(out)-2048:]
	}
	return out
}
