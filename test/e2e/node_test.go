// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// npmInstalls holds, for each scenario directory, its one `npm ci`.
var npmInstalls sync.Map

type npmInstall struct {
	sync.Once
	out []byte
	err error
}

// nodeDir returns the absolute path of a directory of node scenarios
// (jssdk, e2bjs, mcpjs) with its packages installed: `npm ci` from its
// lock file, once per test binary.
func nodeDir(t *testing.T, name string) string {
	t.Helper()
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is needed for the node scenarios: %v", tool, err)
		}
	}
	dir, err := filepath.Abs(name)
	if err != nil {
		t.Fatal(err)
	}
	v, _ := npmInstalls.LoadOrStore(dir, &npmInstall{})
	in := v.(*npmInstall)
	in.Do(func() {
		install := exec.Command("npm", "ci", "--no-audit", "--no-fund")
		install.Dir = dir
		in.out, in.err = install.CombinedOutput()
	})
	if in.err != nil {
		t.Fatalf("npm ci in %s: %v\n%s", name, in.err, in.out)
	}
	return dir
}
