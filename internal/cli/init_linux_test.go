// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package cli

import "testing"

func TestLookupCredential(t *testing.T) {
	for _, tc := range []struct {
		spec     string
		uid, gid uint32
	}{
		{"1000:1001", 1000, 1001},
		{"0", 0, 0},             // root is in every passwd: its primary group
		{"54321", 54321, 54321}, // no passwd entry: the UID as the group
		{"root", 0, 0},
		{"root:0", 0, 0},
		{"54321:root", 54321, 0},
	} {
		c, err := lookupCredential(tc.spec)
		if err != nil || c.Uid != tc.uid || c.Gid != tc.gid {
			t.Errorf("%q = %+v, %v; want %d:%d", tc.spec, c, err, tc.uid, tc.gid)
		}
	}
	for _, bad := range []string{"no-such-user-corral", "0:no-such-group-corral"} {
		if _, err := lookupCredential(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
