// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package v1alpha1

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/corral-dev/corral/internal/testutil"
)

// TestGeneratedFilesAreCurrent regenerates the deepcopy code and the CRD
// manifests with controller-gen and fails if the committed ones differ:
// run `go generate ./internal/kube/...` after changing the types.
func TestGeneratedFilesAreCurrent(t *testing.T) {
	root := testutil.ModuleRoot(t)
	// controller-gen reads the sources in a subprocess; reading them here
	// too makes go test's cache notice when they change.
	srcs, _ := filepath.Glob("*.go")
	for _, f := range srcs {
		if _, err := os.ReadFile(f); err != nil {
			t.Fatal(err)
		}
	}
	gen := func(args ...string) string {
		cmd := exec.Command("go", append([]string{"tool", "controller-gen"}, args...)...)
		cmd.Dir = root
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("controller-gen %v: %v\n%s", args, err, stderr.String())
		}
		return string(out)
	}
	pkg := "paths=./internal/kube/apis/v1alpha1"
	want := gen("object", pkg, "output:object:stdout")
	got, err := os.ReadFile("zz_generated.deepcopy.go")
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, string(got)); d != "" {
		t.Errorf("zz_generated.deepcopy.go is stale; run go generate ./internal/kube/... (-want +got):\n%s", d)
	}

	crdDir := filepath.Join(root, "deploy", "kubernetes", "crd")
	files, _ := filepath.Glob(filepath.Join(crdDir, "*.yaml"))
	var committed []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		committed = append(committed, string(b))
	}
	var generated []string
	for _, doc := range strings.Split(gen("crd:crdVersions=v1", pkg, "output:crd:stdout"), "\n---\n") {
		if doc = strings.TrimSpace(strings.TrimPrefix(doc, "---\n")); doc != "" {
			generated = append(generated, "---\n"+doc+"\n")
		}
	}
	if d := cmp.Diff(generated, committed); d != "" {
		t.Errorf("the CRD manifests in deploy/kubernetes/crd are stale; run go generate ./internal/kube/... (-generated +committed):\n%s", d)
	}
}
