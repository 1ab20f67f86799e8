// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package driver_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/corral-dev/corral/internal/driver"
)

// Tail keeps the last Max bytes however the writes fall, and says when
// it dropped some.
func TestTailKeepsTheEnd(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		max    int
		writes []string
	}{
		{5, nil},
		{5, []string{"abc"}},
		{5, []string{"abcde"}},
		{5, []string{"abcdef"}},
		{5, []string{"ab", "cd", "ef", "g"}},
		{5, []string{"abcdefghij", "k"}},
		{5, []string{"a", "bcdefghijk"}},
		{1, []string{"xyz", "", "w"}},
		{0, []string{"a"}},
	} {
		tl := &driver.Tail{Max: tc.max}
		for _, w := range tc.writes {
			if n, err := tl.Write([]byte(w)); n != len(w) || err != nil {
				t.Fatalf("Write(%q) = %d, %v", w, n, err)
			}
		}
		all := strings.Join(tc.writes, "")
		want := all[max(0, len(all)-tc.max):]
		if got := string(tl.Bytes()); got != want || tl.Truncated != (len(all) > tc.max) {
			t.Errorf("%s: kept %q (truncated %v), want %q (%v)", fmt.Sprint(tc.max, tc.writes), got, tl.Truncated, want, len(all) > tc.max)
		}
	}
}
