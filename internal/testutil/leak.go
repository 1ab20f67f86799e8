// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package testutil

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// longLived are goroutines that libraries start once per process and
// never stop; they are not the package's to end.
var longLived = []goleak.Option{
	// klog's flush daemon, started by client-go's import.
	goleak.IgnoreTopFunction("k8s.io/klog/v2.(*flushDaemon).run.func1"),
}

// VerifyTestMain is a TestMain body for a package that starts goroutines:
// it runs the tests and then fails the package if any goroutine the tests
// started is still running (goleak retries for a while, so goroutines
// that are on their way out are not reported). opts ignore more.
func VerifyTestMain(m *testing.M, opts ...goleak.Option) {
	os.Exit(NoLeaks(m.Run(), opts...))
}

// NoLeaks is the check of VerifyTestMain for a TestMain that does more:
// given m.Run's code, it returns the code to exit with.
func NoLeaks(code int, opts ...goleak.Option) int {
	if code != 0 {
		return code
	}
	if err := goleak.Find(append(append([]goleak.Option{}, longLived...), opts...)...); err != nil {
		fmt.Fprintf(os.Stderr, "goroutines outlive the tests: %v\n", err)
		return 1
	}
	return 0
}
