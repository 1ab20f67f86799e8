// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package mitm

import (
	"testing"

	"go.uber.org/goleak"
)

// The package's tests end every goroutine they start.
// testutil imports this package, so goleak is called directly.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
