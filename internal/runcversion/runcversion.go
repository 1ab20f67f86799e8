// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

// Package runcversion tells whether an OCI runtime has the fixes of the
// container escapes corral's isolation relies on: from what the runtime
// prints for --version (runc, crun, runsc) it names the known escapes a
// runc build is still open to. The native and docker runtimes check at
// start and warn; docs/runtime-oci.md lists the versions.
package runcversion

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
)

// A fix names the runc releases that closed an escape.
type fix struct {
	cve, what string
	// fixed reports whether runc version v (major, minor, patch, rc: rc 0
	// for a release) has the fix.
	fixed func(v version) bool
	// distro are distribution builds that carry the fix on an older
	// version ("commit:" lines, prefixes).
	distro []string
}

type version struct{ major, minor, patch, rc int }

func (v version) atLeast(major, minor, patch int) bool {
	if v.major != major {
		return v.major > major
	}
	if v.minor != minor {
		return v.minor > minor
	}
	return v.patch >= patch
}

// fixes are the runc escapes checked, with the releases that fixed them.
func fixes() []fix {
	return []fix{
		{cve: "CVE-2024-21626", what: "a leaked host directory descriptor as the working directory (container escape)",
			fixed:  func(v version) bool { return v.atLeast(1, 1, 12) },
			distro: []string{"1.1.5+ds1-1+deb12u", "1.0.0~rc93+ds1-5+deb11u3"}},
		{cve: "CVE-2025-31133, CVE-2025-52565, CVE-2025-52881", what: "/dev/null, /dev/console and procfs write redirection (container escape)",
			fixed: func(v version) bool {
				switch {
				case v.major == 1 && v.minor == 2:
					return v.patch >= 8
				case v.major == 1 && v.minor == 3:
					return v.patch >= 3
				case v.major == 1 && v.minor == 4 && v.patch == 0 && v.rc > 0:
					return v.rc >= 3
				}
				return v.atLeast(1, 4, 0)
			}},
	}
}

// runcLine and commitLine are compiled on first use: every corral process
// links this package, a sandbox's PID 1 too, and never uses it.
var (
	runcLine = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`(?m)^runc version (\d+)\.(\d+)\.(\d+)(?:-rc\.?(\d+))?`)
	})
	commitLine = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(?m)^commit: (\S+)`) })
)

// Check reads a runtime's --version output and returns what is wrong
// with it, one sentence each; none for a runtime with every fix, and for
// crun and runsc, which share no code with runc's escapes.
func Check(out string) []string {
	switch {
	case strings.HasPrefix(out, "crun version"), strings.HasPrefix(out, "runsc version"):
		return nil
	}
	m := runcLine().FindStringSubmatch(out)
	if m == nil {
		first, _, _ := strings.Cut(strings.TrimSpace(out), "\n")
		return []string{fmt.Sprintf("the OCI runtime's version (%q) is not one corral knows: it could not check it for known container escapes", first)}
	}
	var v version
	v.major, _ = strconv.Atoi(m[1])
	v.minor, _ = strconv.Atoi(m[2])
	v.patch, _ = strconv.Atoi(m[3])
	if m[4] != "" {
		v.rc, _ = strconv.Atoi(m[4])
	}
	commit := ""
	if c := commitLine().FindStringSubmatch(out); c != nil {
		commit = c[1]
	}
	var problems []string
	for _, f := range fixes() {
		if f.fixed(v) {
			continue
		}
		patched := false
		for _, d := range f.distro {
			patched = patched || strings.HasPrefix(commit, d)
		}
		if !patched {
			build := ""
			if commit != "" {
				build = " (" + commit + ")"
			}
			problems = append(problems, fmt.Sprintf("runc %d.%d.%d%s is open to %s: %s; install runc 1.2.8, 1.3.3 or later, or run crun or runsc",
				v.major, v.minor, v.patch, build, f.cve, f.what))
		}
	}
	return problems
}
