// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package errdefs_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/corral-dev/corral/errdefs"
)

// A user-facing error says only its message; Detail, for logs, also says
// every cause kept below it, through wrapping and joining.
func TestDetailKeepsTheCauses(t *testing.T) {
	t.Parallel()
	engine := errors.New("engine: mount /var/lib/secret denied")
	inner := errdefs.Wrap(errdefs.ErrUnavailable, "X::Y", "the runtime is unavailable", engine)
	outer := fmt.Errorf("sandbox a: %w", errors.Join(errors.New("other"), errdefs.Wrap(errdefs.ErrUnavailable, "X::Z", "could not start", inner)))
	if got := inner.Error(); got != "the runtime is unavailable" {
		t.Fatalf("Error() = %q: the cause must not reach the message", got)
	}
	want := "sandbox a: other\ncould not start [cause: the runtime is unavailable] [cause: engine: mount /var/lib/secret denied]"
	if got := errdefs.Detail(outer); got != want {
		t.Errorf("Detail = %q\nwant      %q", got, want)
	}
	if errdefs.Detail(nil) != "" || errdefs.Detail(errors.New("plain")) != "plain" {
		t.Error("Detail of nil or of a plain error is not its text")
	}
}
