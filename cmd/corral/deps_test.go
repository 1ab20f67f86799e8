// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/corral-dev/corral/internal/testutil/golden"
)

// Every sandbox runs this binary as its PID 1, and every server runs it:
// what it links from outside the module is a reviewed list. A new
// package in either build, the
// shipped one (linux/amd64, no cgo) or the kube one, fails this test
// until testdata/deps*.txt is rewritten with -update, and so shows in
// review. Standard-library packages are listed too (net/http/pprof
// would be news).
func TestWhatTheBinaryLinks(t *testing.T) {
	for _, b := range []struct{ file, tags string }{{"deps.txt", ""}, {"deps-kube.txt", "kube"}} {
		t.Run(b.file, func(t *testing.T) {
			cmd := exec.Command("go", "list", "-deps", "-tags", b.tags, "-f", "{{if not .Standard}}{{.ImportPath}}{{else}}std {{.ImportPath}}{{end}}", ".")
			cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH=amd64", "CGO_ENABLED=0")
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("go list: %v", err)
			}
			var keep []string
			for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
				// corral's own packages are not dependencies; internal
				// packages of the standard library and the runtime come
				// and go with Go releases: neither is news.
				if strings.HasPrefix(l, "github.com/corral-dev/corral") ||
					strings.HasPrefix(l, "std ") && (strings.Contains(l, "internal/") || strings.HasPrefix(l, "std vendor/") || strings.HasPrefix(l, "std runtime/")) {
					continue
				}
				keep = append(keep, l)
			}
			golden.Bytes(t, b.file, []byte(strings.Join(keep, "\n")+"\n"))
		})
	}
}
