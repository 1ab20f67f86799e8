// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package verifier

import (
	"strings"
	"testing"
)

func TestMatch(t *testing.T) {
	t.Parallel()
	tok := "3q2-7w_e0kXlYcUAnUe5qkLJ0a8cJ6yqkM0XhVQk3rE"
	v := Of(tok)
	if strings.Contains(v, tok) || !strings.HasPrefix(v, "sha256:") || len(v) != 7+64 {
		t.Fatalf("Of(token) = %q", v)
	}
	cases := []struct {
		name              string
		stored, presented string
		want              bool
	}{
		{"verifier and its token", v, tok, true},
		{"verifier and another token", v, tok + "x", false},
		{"the verifier presented as the token", v, v, false},
		{"plain token", tok, tok, true},
		{"plain token, wrong", tok, "nope", false},
		{"empty stored", "", "", false},
		{"empty stored, something presented", "", tok, false},
		{"empty presented", v, "", false},
		{"bad hex", "sha256:zz", "zz", false},
		{"short digest", "sha256:abcd", "x", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Match(tc.stored, tc.presented); got != tc.want {
				t.Errorf("Match(%q, %q) = %v, want %v", tc.stored, tc.presented, got, tc.want)
			}
		})
	}
}
