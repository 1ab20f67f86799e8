// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

//go:build !linux

package cli

import (
	"fmt"

	"github.com/corral-dev/corral/errdefs"
)

func lockDataDir(string) (func(), error) {
	return nil, fmt.Errorf("corral serve runs on Linux: %w", errdefs.ErrNotImplemented)
}
