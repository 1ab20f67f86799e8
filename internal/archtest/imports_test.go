// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package archtest

import (
	"strings"
	"testing"
)

// matches reports whether package rel is one of pats: a package path, or
// a path ending in "/..." for that directory and every package below it.
func matches(rel string, pats []string) bool {
	for _, p := range pats {
		if rel == p {
			return true
		}
		if dir, ok := strings.CutSuffix(p, "/..."); ok && (rel == dir || strings.HasPrefix(rel, dir+"/")) {
			return true
		}
	}
	return false
}

// TestWhoImportsWhat holds the package docs that say who imports a
// package to what go list sees. Each row is a package and the only
// packages whose non-test files may import it; tests of any package may.
// A package doc that names its importers has a row here, or loses the
// sentence.
func TestWhoImportsWhat(t *testing.T) {
	importers := []struct {
		pkg string
		by  []string
	}{
		// The composition root: cmd/corral calls cli.Main.
		{"internal/cli", []string{"cmd/corral"}},
		// Only corral serve makes the server, the manager, the store and
		// a runtime; the server is the manager's one other user.
		{"internal/server", []string{"internal/cli"}},
		{"internal/lifecycle", []string{"internal/cli", "internal/server"}},
		{"internal/store", []string{"internal/cli"}},
		{"internal/driver/fakedriver", []string{"internal/cli"}},
		{"internal/driver/docker", []string{"internal/cli"}},
		{"internal/driver/kube", []string{"internal/cli"}},
		// A benchmark uses the native runtime's RunscArgs; only corral
		// serve constructs it.
		{"internal/driver/oci", []string{"internal/cli", "bench/..."}},
		// corral controller, and the Kubernetes tier that runs it in the
		// test process.
		{"internal/kube/controller", []string{"internal/cli", "internal/kube/kubetest"}},
		// execd is served by corral execd and corral init; its parts only
		// by execd.
		{"internal/execd", []string{"internal/cli"}},
		{"internal/execd/files", []string{"internal/execd"}},
		{"internal/execd/code", []string{"internal/execd", "internal/execd/codeinterp"}},
		{"internal/execd/envd", []string{"internal/execd"}},
		{"internal/execd/codeinterp", []string{"internal/execd"}},
		{"internal/execd/code/jupyter", []string{"internal/execd/code"}},
		{"internal/memtrim", []string{"internal/cli"}},
		// Errors as HTTP answers: the two servers write them, the SDK reads
		// them. The lifecycle and the drivers speak errdefs only.
		{"errdefs/errhttp", []string{"internal/server", "internal/execd", "internal/execd/codeinterp", "sdk"}},
		// Tests only.
		{"internal/driver/drivertest", nil},
		{"internal/kube/kubetest", nil},
		{"internal/testutil", []string{"internal/kube/kubetest", "internal/testutil/...", "bench/..."}},
		{"internal/testutil/netlab", nil},
		{"internal/testutil/registry", []string{"internal/kube/kubetest", "internal/testutil/dockertest"}},
		{"internal/testutil/dockertest", nil},
		{"internal/testutil/corraltest", []string{"bench/..."}},
		{"internal/testutil/contracttest", nil},
	}
	pkgs := list(t)
	for _, r := range importers {
		if _, ok := pkgs[module+"/"+r.pkg]; !ok {
			t.Errorf("%s is not a package; drop its row", r.pkg)
		}
	}
	for path, p := range pkgs {
		rel := strings.TrimPrefix(path, module+"/")
		for _, d := range p.imports {
			drel, ours := strings.CutPrefix(d, module+"/")
			if !ours {
				continue
			}
			for _, r := range importers {
				if drel == r.pkg && !matches(rel, r.by) {
					t.Errorf("%s imports %s; only %v may (tests aside)", rel, drel, r.by)
				}
			}
		}
	}
}

// TestLeavesImportOnly holds the package docs that say what a package
// imports to what go list sees: besides the standard library, each of
// these packages imports only the module's packages in its row, and no
// other module.
func TestLeavesImportOnly(t *testing.T) {
	leaves := []struct {
		pkg     string
		imports []string
	}{
		// The domain model, under every other internal package (with
		// insandbox's paths, which no volume may cover).
		{"internal/sandbox", []string{"api", "errdefs", "internal/insandbox"}},
		// The runtime contract: the model and the error kinds, never an
		// implementation or the manager.
		{"internal/driver", []string{"api", "errdefs", "internal/sandbox"}},
		// Fixed points of the in-sandbox interface, shared by every
		// runtime and role.
		{"internal/insandbox", []string{"api"}},
		{"internal/logctx", nil},
		{"internal/cmdline", nil},
	}
	pkgs := list(t)
	for _, l := range leaves {
		p, ok := pkgs[module+"/"+l.pkg]
		if !ok {
			t.Errorf("%s is not a package; drop its row", l.pkg)
			continue
		}
		for _, d := range p.imports {
			drel, ours := strings.CutPrefix(d, module+"/")
			switch {
			case ours && !matches(drel, l.imports):
				t.Errorf("%s imports %s; it may import only %v and the standard library", l.pkg, drel, l.imports)
			case !ours && !isStd(d):
				t.Errorf("%s imports %s; it may import no other module", l.pkg, d)
			}
		}
	}
}
