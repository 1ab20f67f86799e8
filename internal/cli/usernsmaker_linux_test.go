// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package cli

import (
	"strings"
	"testing"
)

// TestUsernsMakerRejectsArguments: the helper the server starts takes no
// arguments or flags; given some, it says so and exits 2 before it reads
// its socket.
func TestUsernsMakerRejectsArguments(t *testing.T) {
	for _, args := range [][]string{{"userns-maker", "extra"}, {"userns-maker", "--bogus"}, {"userns-maker", "--", "x"}} {
		code, stderr := run(t, nil, args...)
		if code != 2 || !strings.Contains(stderr, "userns-maker") {
			t.Errorf("%q: exit %d, stderr %q; want 2 and a line naming the command", args, code, stderr)
		}
	}
}
