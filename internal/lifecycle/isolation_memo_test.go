// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package lifecycle

import (
	"fmt"
	"testing"
)

func TestIsolationMemo(t *testing.T) {
	var c isolationMemo
	decodes := 0
	tier := func(h string) string {
		return c.get([]byte(h), func() string { decodes++; return "tier of " + h })
	}
	for range 3 {
		if got := tier(`{"runsc":true}`); got != `tier of {"runsc":true}` {
			t.Fatalf("got %q", got)
		}
		if got := tier(`{"userns":true}`); got != `tier of {"userns":true}` {
			t.Fatalf("got %q", got)
		}
	}
	if decodes != 2 {
		t.Errorf("two handles asked three times each were decoded %d times, want 2", decodes)
	}
	// Past its limit it starts again rather than growing.
	for i := range memoLimit + 10 {
		tier(fmt.Sprint(i))
	}
	if n := len(c.m); n > memoLimit {
		t.Errorf("the memo holds %d entries, more than %d", n, memoLimit)
	}
	if got := tier(`{"runsc":true}`); got != `tier of {"runsc":true}` {
		t.Errorf("after the limit: %q", got)
	}
}
