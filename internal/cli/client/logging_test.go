// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package client

import (
	"bytes"
	"strings"
	"testing"

	"github.com/corral-dev/corral/errdefs"
)

// What a response leaves out is in the log: the server's logger writes
// the cause a user-facing error keeps, in both formats.
func TestLoggerWritesTheCause(t *testing.T) {
	t.Parallel()
	for _, format := range []string{"json", "text"} {
		var buf bytes.Buffer
		log, err := newLogger(&buf, format, "info")
		if err != nil {
			t.Fatal(err)
		}
		log.Info("failed", "err", errdefs.Wrap(errdefs.ErrUnavailable, "X::Y", "the runtime is unavailable", errEngine{}), "n", 3)
		if out := buf.String(); !strings.Contains(out, "the runtime is unavailable [cause: dial unix /run/docker.sock") || !strings.Contains(out, "n=3") && !strings.Contains(out, `"n":3`) {
			t.Errorf("%s log = %s", format, out)
		}
	}
}

type errEngine struct{}

func (errEngine) Error() string { return "dial unix /run/docker.sock: connection refused" }
