// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"testing"

	"github.com/corral-dev/corral/internal/testutil"
)

// The package's tests end every goroutine they start.
func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }
