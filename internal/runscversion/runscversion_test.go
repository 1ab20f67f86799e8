// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package runscversion

import (
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestCheck(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, out string
		version   string
		date      string // "" when it cannot be dated
		want      string // a substring of the one problem, "" for none
	}{
		// What the runsc scripts/runtimes.sh builds from tools/runsc prints.
		{"the runsc corral installs", "runsc version v0.0.0-20260905035102-160fafc42237\nspec: 1.2.1\n",
			"v0.0.0-20260905035102-160fafc42237", "2026-09-05", ""},
		// Debian 12's runsc package (0.0~20221219.0-2+b3).
		{"Debian 12's", "runsc version 0.0~20221219.0\nspec: 1.0.2-dev\n", "0.0~20221219.0", "2022-12-19", "of 2022-12-19: older than the gVisor of 2026-09-05"},
		{"a 2022 release", "runsc version release-20221219.0\nspec: 1.0.2-dev\n", "release-20221219.0", "2022-12-19", "older than"},
		{"a newer release", "runsc version release-20261130.0\nspec: 1.2.1\n", "release-20261130.0", "2026-11-30", ""},
		{"the pinned day's release", "runsc version release-20260905.1\nspec: 1.2.1\n", "release-20260905.1", "2026-09-05", ""},
		{"an older pseudo-version", "runsc version v0.0.0-20250102030405-0123456789ab\nspec: 1.2.0\n", "v0.0.0-20250102030405-0123456789ab", "2025-01-02", "older than"},
		{"go build without the version set", "runsc version VERSION_MISSING\nspec: 1.2.1\n", "VERSION_MISSING", "", "cannot date"},
		{"a source build", "runsc version 0.0.0-dirty\n", "0.0.0-dirty", "", "cannot date"},
		{"not a date", "runsc version release-20221399.0\n", "release-20221399.0", "", "cannot date"},
		{"not runsc", "runc version 1.5.3\ncommit: v1.5.3\n", "", "", "does not know"},
		{"nothing", "", "", "", "does not know"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, date := Version(tc.out)
			if v != tc.version {
				t.Errorf("Version = %q, want %q", v, tc.version)
			}
			if got := fmtDate(date); got != tc.date {
				t.Errorf("date = %q, want %q", got, tc.date)
			}
			got := Check("/usr/bin/runsc", tc.out)
			switch {
			case tc.want == "" && len(got) != 0:
				t.Errorf("Check = %q, want nothing", got)
			case tc.want != "" && (len(got) != 1 || !strings.Contains(got[0], tc.want) || !strings.Contains(got[0], "/usr/bin/runsc")):
				t.Errorf("Check = %q, want one problem with %q and the path", got, tc.want)
			}
		})
	}
}

func fmtDate(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.Format(time.DateOnly)
}

// TestPinnedIsToolsRunsc: Pinned is the date of the commit tools/runsc
// pins, which scripts/runtimes.sh builds.
func TestPinnedIsToolsRunsc(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../tools/runsc/go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*gvisor\.dev/gvisor (v\S+)`).FindSubmatch(b)
	if m == nil {
		t.Fatal("tools/runsc/go.mod requires no gvisor.dev/gvisor")
	}
	_, date := Version("runsc version " + string(m[1]) + "\n")
	if got := fmtDate(date); got != Pinned {
		t.Errorf("tools/runsc pins gVisor %s, of %s; Pinned = %s", m[1], got, Pinned)
	}
}
