// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package runcversion

import (
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, out string
		want      []string // each a substring of one problem
	}{
		{"Debian 12's runc: the 2024 fix backported, not the 2025 ones",
			"runc version 1.1.5+ds1\ncommit: 1.1.5+ds1-1+deb12u1\nspec: 1.0.2-dev\ngo: go1.19.8\nlibseccomp: 2.5.4\n", []string{"CVE-2025-31133"}},
		{"an old upstream runc", "runc version 1.1.11\ncommit: v1.1.11-0-g4bccb38c\nspec: 1.0.2-dev\n", []string{"CVE-2024-21626", "CVE-2025-31133"}},
		{"1.2.7", "runc version 1.2.7\ncommit: v1.2.7-0-g1234567\n", []string{"CVE-2025-31133"}},
		{"1.2.8", "runc version 1.2.8\ncommit: v1.2.8-0-g1234567\n", nil},
		{"1.3.2", "runc version 1.3.2\n", []string{"CVE-2025-52565"}},
		{"1.3.3", "runc version 1.3.3\n", nil},
		{"1.4.0-rc.2", "runc version 1.4.0-rc.2\n", []string{"CVE-2025-52881"}},
		{"1.4.0-rc.3", "runc version 1.4.0-rc.3\n", nil},
		{"1.4.1", "runc version 1.4.1\ncommit: v1.4.1\n", nil},
		// What the runc scripts/runtimes.sh builds from tools/runc prints.
		{"the runc corral installs", "runc version 1.5.3\ncommit: v1.5.3\nspec: 1.3.0\ngo: go1.26.8\nlibseccomp: 2.5.4\n", nil},
		{"crun", "crun version 1.26\ncommit: abc\nrundir: /run/crun\nspec: 1.0.0\n+SYSTEMD +SECCOMP\n", nil},
		{"runsc", "runsc version release-20260101.0\nspec: 1.2.1\n", nil},
		{"unknown", "youki version 0.5.7\n", []string{"not one corral knows"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Check(tc.out)
			if len(got) != len(tc.want) {
				t.Fatalf("Check = %q, want %d problems (%q)", got, len(tc.want), tc.want)
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("problem %d = %q, want %q in it", i, got[i], w)
				}
			}
		})
	}
}
