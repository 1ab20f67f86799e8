// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package golden

import "testing"

func TestDiffShowsOnlyChangedLines(t *testing.T) {
	got := diff("a\nb\nc\nd\n", "a\nB\nc\nd\ne\n")
	if want := "- b\n+ B\n+ e\n"; got != want {
		t.Errorf("diff = %q, want %q", got, want)
	}
	if d := diff("same\n", "same\n"); d != "" {
		t.Errorf("diff of equal texts = %q", d)
	}
}
