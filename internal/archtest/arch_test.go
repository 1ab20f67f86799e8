// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

// Package archtest checks the module's shape: which packages may import
// what, and that every package says what it is for.
package archtest

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/corral-dev/corral/internal/testutil"
)

const module = "github.com/corral-dev/corral"

type pkg struct {
	path    string
	doc     string
	deps    []string
	imports []string
	hasGo   bool // has non-test Go files
}

// list runs go list over the module's packages.
func list(t *testing.T) map[string]pkg {
	t.Helper()
	cmd := exec.Command("go", "list", "-f",
		"{{.ImportPath}}\t{{len .GoFiles}}\t{{join .Deps \" \"}}\t{{join .Imports \" \"}}\t{{.Doc}}", "./...")
	cmd.Dir = testutil.ModuleRoot(t)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	pkgs := map[string]pkg{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.SplitN(sc.Text(), "\t", 5)
		if len(f) != 5 {
			t.Fatalf("go list line %q", sc.Text())
		}
		pkgs[f[0]] = pkg{path: f[0], hasGo: f[1] != "0", deps: strings.Fields(f[2]), imports: strings.Fields(f[3]), doc: f[4]}
	}
	return pkgs
}

// isStd reports whether an import path is in the standard library: its
// first element has no dot.
func isStd(path string) bool {
	first, _, _ := strings.Cut(path, "/")
	return !strings.Contains(first, ".")
}

// TestPublicPackagesImportOnlyTheStandardLibrary keeps the SDK cheap to
// depend on: it, and the wire packages it uses, pull in nothing else.
func TestPublicPackagesImportOnlyTheStandardLibrary(t *testing.T) {
	public := map[string]bool{}
	for _, p := range []string{"sdk", "api", "sse", "errdefs", "errdefs/errhttp"} {
		public[module+"/"+p] = true
	}
	pkgs := list(t)
	for path := range public {
		p, ok := pkgs[path]
		if !ok || !slices.Contains(p.deps, "net/http") && path == module+"/sdk" {
			t.Fatalf("package %s not found, or go list gave no dependencies", path)
		}
		for _, d := range p.deps {
			if !isStd(d) && !public[d] {
				t.Errorf("%s depends on %s; public packages may use only the standard library and each other", path, d)
			}
		}
	}
}

// TestTheAgentLibraryUsesOnlyTheSDK: the public agent and mcp packages,
// which products embed, reach corral through the SDK only: within the
// module they use the public packages and the sandbox domain types (two
// leaves), never the server, a runtime or the store; nor do they link
// Kubernetes, Docker or SQLite.
func TestTheAgentLibraryUsesOnlyTheSDK(t *testing.T) {
	ours := []string{"api", "sse", "errdefs", "errdefs/errhttp", "sdk", "mcp", "internal/sandbox", "internal/insandbox"}
	pkgs := list(t)
	for _, lib := range []string{"agent", "mcp"} {
		p, ok := pkgs[module+"/"+lib]
		if !ok {
			t.Fatalf("no package %s", lib)
		}
		for _, d := range p.deps {
			if rel, in := strings.CutPrefix(d, module+"/"); in && !slices.Contains(ours, rel) {
				t.Errorf("%s depends on %s", lib, rel)
			}
			for _, banned := range []string{"k8s.io/", "sigs.k8s.io/", "github.com/moby/", "github.com/docker/", "modernc.org/sqlite", "github.com/mattn/go-sqlite3"} {
				if strings.HasPrefix(d, banned) {
					t.Errorf("%s depends on %s", lib, d)
				}
			}
		}
	}
}

// TestLayering keeps execd, which runs inside sandboxes, free of the
// control plane, the control plane free of the CLI, and the leaves
// (host networking, the enforcer, the shared records) free of the
// runtime contract.
func TestLayering(t *testing.T) {
	forbidden := map[string][]string{
		"internal/execd":     {"internal/lifecycle", "internal/driver", "internal/server", "internal/store", "internal/auth", "internal/cli", "sdk"},
		"internal/initproc":  {"internal/lifecycle", "internal/driver", "internal/server", "internal/store", "internal/cli"},
		"internal/lifecycle": {"internal/server", "internal/cli", "sdk"},
		"internal/driver":    {"internal/lifecycle", "internal/server", "internal/store", "internal/cli", "sdk"},
		"internal/server":    {"internal/cli"},
		"internal/egress":    {"internal/lifecycle", "internal/driver", "internal/server", "internal/store", "internal/cli", "sdk"},
		// Host networking is a leaf under the drivers and the enforcer.
		"internal/hostnet": {"internal/lifecycle", "internal/driver", "internal/egress", "internal/server", "internal/store", "internal/cli", "sdk"},
		// The shared records implement lifecycle's contract; the runtime
		// contract is none of their business.
		"internal/kube/records": {"internal/driver"},
		"internal/testutil":     {"internal/driver"},
		// The server's runtime meets the controller at the CRD types,
		// not by linking the reconcilers.
		"internal/driver/kube": {"internal/kube/controller"},
	}
	for path, p := range list(t) {
		rel := strings.TrimPrefix(path, module+"/")
		for prefix, bad := range forbidden {
			if rel != prefix && !strings.HasPrefix(rel, prefix+"/") {
				continue
			}
			for _, d := range p.deps {
				drel := strings.TrimPrefix(d, module+"/")
				for _, b := range bad {
					if drel == b || strings.HasPrefix(drel, b+"/") {
						t.Errorf("%s depends on %s", rel, drel)
					}
				}
			}
		}
	}
}

// TestTheClientLinksNoServer: the user's commands import the SDK and a
// few leaves, and nothing they link is the server, a runtime or an
// in-sandbox role, so that corral on a laptop is only the client.
func TestTheClientLinksNoServer(t *testing.T) {
	allowed := []string{"api", "errdefs", "sdk", "sse", "agent", "mcp", "internal/tarfs", "internal/version", "internal/logctx"}
	banned := []string{"internal/driver", "internal/lifecycle", "internal/server", "internal/store", "internal/egress", "internal/hostnet",
		"internal/initproc", "internal/execd", "internal/imagestore", "internal/kube", "internal/auth", "internal/secrets", "internal/cli"}
	pkgs := list(t)
	p, ok := pkgs[module+"/internal/cli/client"]
	if !ok {
		t.Fatal("no internal/cli/client")
	}
	for _, d := range p.imports {
		if rel, ours := strings.CutPrefix(d, module+"/"); ours && !slices.Contains(allowed, rel) {
			t.Errorf("internal/cli/client imports %s", rel)
		}
	}
	for _, d := range p.deps {
		rel, ours := strings.CutPrefix(d, module+"/")
		for _, b := range banned {
			if ours && (rel == b || strings.HasPrefix(rel, b+"/")) {
				t.Errorf("internal/cli/client links %s", rel)
			}
		}
	}
}

// TestEveryPackageIsDocumented asks each package for a package comment
// that starts the way godoc expects.
func TestEveryPackageIsDocumented(t *testing.T) {
	for path, p := range list(t) {
		if !p.hasGo {
			continue // test-only packages
		}
		name := path[strings.LastIndex(path, "/")+1:]
		if p.doc == "" {
			t.Errorf("%s has no package comment", path)
		} else if !strings.HasPrefix(p.doc, "Package "+name+" ") && !strings.HasPrefix(p.doc, "Command ") && name != "corral" {
			t.Errorf("%s: package comment %q should start with \"Package %s \"", path, p.doc, name)
		}
	}
}

// TestEveryPackageHasARow: the package table of docs/architecture.md has
// a row for every package under internal/, so the map cannot lose one.
func TestEveryPackageHasARow(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(testutil.ModuleRoot(t), "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	for path := range list(t) {
		rel, ok := strings.CutPrefix(path, module+"/")
		if !ok || !strings.HasPrefix(rel, "internal/") {
			continue
		}
		if !bytes.Contains(doc, []byte("| `"+rel+"` |")) {
			t.Errorf("docs/architecture.md has no row for %s in its package table", rel)
		}
	}
}

// isKube reports whether an import path is a Kubernetes library.
func isKube(path string) bool {
	return strings.HasPrefix(path, "k8s.io/") || strings.HasPrefix(path, "sigs.k8s.io/")
}

// TestKubernetesStaysInItsPackages keeps client-go and controller-runtime
// out of the default build: linking them costs every corral process,
// sandboxes' init and execd included, about 14 ms and 20 MB at start
// (docs/architecture.md, "Two builds"). Only the kube packages import
// them, and only a build with -tags kube links those into the binary.
func TestKubernetesStaysInItsPackages(t *testing.T) {
	pkgs := list(t)
	bin, ok := pkgs[module+"/cmd/corral"]
	if !ok {
		t.Fatal("cmd/corral not listed")
	}
	for _, d := range bin.deps {
		if isKube(d) {
			t.Errorf("the default corral binary links %s; Kubernetes belongs in files built with -tags kube", d)
			break
		}
	}
	for path, p := range pkgs {
		rel := strings.TrimPrefix(path, module+"/")
		if strings.HasPrefix(rel, "internal/kube/") || rel == "internal/driver/kube" {
			continue
		}
		for _, d := range p.imports {
			if isKube(d) {
				t.Errorf("%s imports %s; only internal/kube/... and internal/driver/kube may", rel, d)
			}
		}
	}
}
