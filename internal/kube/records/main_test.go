// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package records_test

import (
	"testing"

	"github.com/corral-dev/corral/internal/kube/kubetest"
)

// The package's tests end every goroutine they start (the shared
// cluster client's idle connections aside).
func TestMain(m *testing.M) { kubetest.VerifyTestMain(m) }
