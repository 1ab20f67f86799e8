// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

// Package runscversion tells how old a gVisor runsc is, from what it
// prints for --version, and whether that is older than the gVisor corral
// pins (tools/runsc/go.mod, built and installed by scripts/runtimes.sh
// runsc). gVisor publishes no advisories per release, so age is the
// check: a runsc older than the pinned one lacks the Sentry's fixes since
// and is not what corral's runsc tier is tested on. The native runtime
// checks the runsc it finds at start and warns (docs/isolation.md).
package runscversion

import (
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"
)

// Pinned is the date of the gVisor commit tools/runsc/go.mod pins
// (v0.0.0-20260905035102-160fafc42237); a test keeps them equal.
const Pinned = "2026-09-05"

// versionLine is runsc's first line of --version ("runsc version X",
// runc's format). It and dated are compiled on first use: every corral
// process links this package, a sandbox's PID 1 too, and never uses it.
var versionLine = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^runsc version (\S+)`) })

// dated are the version strings whose date is known. Each has the date
// as its first group.
var dated = sync.OnceValue(func() []*regexp.Regexp {
	return []*regexp.Regexp{
		// gVisor's release builds: release-20221219.0 (and the g<name>-
		// prefixes its own release check accepts).
		regexp.MustCompile(`^(?:release|g[a-z]*)-(\d{8})(?:\.\d+)?$`),
		// Debian's package: 0.0~20221219.0.
		regexp.MustCompile(`^0\.0~(\d{8})(?:\.\d+)?(?:[+~-][0-9A-Za-z.+~-]*)?$`),
		// A Go module pseudo-version of gVisor's Go branch, as
		// scripts/runtimes.sh builds it: v0.0.0-20260905035102-160fafc42237
		// (or vX.Y.Z-pre.0.YYYYMMDDhhmmss-commit).
		regexp.MustCompile(`^v\d+\.\d+\.\d+-(?:[0-9A-Za-z.-]*\.)?(\d{8})\d{6}-[0-9a-f]{12}$`),
	}
})

// Version reads runsc's --version output: the version string and the
// date of the gVisor it was built from (zero if the string is not one of
// gVisor's, Debian's or a module pseudo-version).
func Version(out string) (string, time.Time) {
	m := versionLine().FindStringSubmatch(out)
	if m == nil {
		return "", time.Time{}
	}
	v := m[1]
	for _, re := range dated() {
		if d := re.FindStringSubmatch(v); d != nil {
			if t, err := time.Parse("20060102", d[1]); err == nil {
				return v, t
			}
		}
	}
	return v, time.Time{}
}

// Check reads the --version output of the runsc at path and returns what
// is wrong with it, one sentence each: nothing for a gVisor as recent as
// the one corral pins, else that it is older or of a version corral
// cannot date.
func Check(path, out string) []string {
	pinned, _ := time.Parse(time.DateOnly, Pinned)
	v, date := Version(out)
	install := fmt.Sprintf("corral pins and tests gVisor of %s (scripts/runtimes.sh runsc installs it)", Pinned)
	switch {
	case v == "":
		first, _, _ := strings.Cut(strings.TrimSpace(out), "\n")
		return []string{fmt.Sprintf("gVisor's runsc (%s) prints %q for its version, which corral does not know: it could not tell how old it is; %s", path, first, install)}
	case date.IsZero():
		return []string{fmt.Sprintf("gVisor's runsc (%s) is version %q, which corral cannot date: it could not tell how old it is; %s", path, v, install)}
	case date.Before(pinned):
		return []string{fmt.Sprintf("gVisor's runsc (%s) is version %s, of %s: older than the gVisor of %s corral pins and tests, it lacks gVisor's fixes since (scripts/runtimes.sh runsc installs the pinned one)",
			path, v, date.Format(time.DateOnly), Pinned)}
	}
	return nil
}
