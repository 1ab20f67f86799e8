// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package cli

import (
	"context"
	"fmt"

	"github.com/corral-dev/corral/internal/cli/client"
	"github.com/corral-dev/corral/internal/driver/oci"
)

// runUsernsMaker is `corral userns-maker`: the native runtime's helper that
// makes user namespaces for ID ranges, on the socket the server hands it
// as fd 3 (see package oci). It ends when the server closes its end.
func runUsernsMaker(_ context.Context, e *env, args []string) int {
	fs := client.NewFlagSet(e, "userns-maker", "userns-maker (started by corral serve)")
	if ok, code := client.ParseFlags(fs, e, args); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintln(e.Stderr, "corral userns-maker: takes no arguments")
		return 2
	}
	if err := oci.ServeUsernsMaker(3, "/proc/self/exe"); err != nil {
		fmt.Fprintln(e.Stderr, "corral userns-maker (started by corral serve, its socket at fd 3):", err)
		return 1
	}
	return 0
}
