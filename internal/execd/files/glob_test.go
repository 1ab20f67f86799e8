// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package files

import (
	"strings"
	"testing"
	"time"
)

func TestMatch(t *testing.T) {
	t.Parallel()
	cases := []struct {
		pattern, name string
		want          bool
	}{
		{"*.py", "main.py", true},
		{"*.py", "main.pyc", false},
		{"*.py", "dir/main.py", false},
		{"**/*.py", "dir/sub/main.py", true},
		{"**/*.py", "main.py", true},
		{"**", "a/b/c", true},
		{"src/**/test_*.go", "src/a/b/test_x.go", true},
		{"src/**/test_*.go", "src/test_x.go", true},
		{"src/**/test_*.go", "lib/test_x.go", false},
		{"?.txt", "a.txt", true},
		{"?.txt", "ab.txt", false},
		{"[abc].txt", "b.txt", true},
		{"[!abc].txt", "b.txt", false},
		{"[a-c]*", "cat", true},
		{"[^a-c]*", "cat", false},
		{"*.{go,py}", "x.py", true},
		{"*.{go,py}", "x.rs", false},
		{"{a,b}/{c,d}", "b/d", true},
		{"[", "[", true},
		{`\*`, "*", true},
		{"a*b*c", "aXXbYYc", true},
		{"a*b*c", "aXXbYY", false},
	}
	for _, tc := range cases {
		if got := Match(tc.pattern, tc.name); got != tc.want {
			t.Errorf("Match(%q, %q) = %v, want %v", tc.pattern, tc.name, got, tc.want)
		}
	}
}

func FuzzMatch(f *testing.F) {
	f.Add("**/*.{go,py}", "a/b/c.go")
	f.Add("[a-", "a")
	f.Add("{{{{", "x")
	f.Add("*a*a*a*a*a*a*b", strings.Repeat("a", 100))
	f.Fuzz(func(t *testing.T, pattern, name string) {
		if len(pattern) > 200 || len(name) > 1000 {
			return
		}
		start := time.Now()
		_ = Match(pattern, name)
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("Match(%q, %q) took %v", pattern, name, d)
		}
	})
}
