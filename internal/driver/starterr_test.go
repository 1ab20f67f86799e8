// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package driver_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/corral-dev/corral/errdefs"
	"github.com/corral-dev/corral/internal/driver"
)

// Every runtime says an early exit the same way: the tenant's failure,
// the code, the reason, and a bounded end of the console.
func TestExitedDuringStart(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 5000)
	for _, tc := range []struct {
		code            int
		reason, console string
		want            string
	}{
		{3, "", "", "sandbox s1: the entrypoint exited with code 3 before it was ready"},
		{1, "Error", "a\n\nb\n", "sandbox s1: the entrypoint exited with code 1 (Error) before it was ready: a; b"},
		{2, "", "1\n2\n3\n4\n5\n6\n7\n", "sandbox s1: the entrypoint exited with code 2 before it was ready: 3; 4; 5; 6; 7"},
	} {
		err := driver.ExitedDuringStart("s1", tc.code, tc.reason, tc.console, nil)
		if !errors.Is(err, errdefs.ErrInvalidArgument) || err.Error() != tc.want {
			t.Errorf("ExitedDuringStart(%d, %q, %q) = %v, want %q", tc.code, tc.reason, tc.console, err, tc.want)
		}
	}
	err := driver.ExitedDuringStart("s1", 1, "", long, errors.New("inner"))
	if msg := err.Error(); len(msg) > 2200 || !strings.HasSuffix(msg, "xxx") || !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("a long console: %d bytes %q…", len(msg), msg[:80])
	}
}
