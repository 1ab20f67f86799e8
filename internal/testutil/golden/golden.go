// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

// Package golden compares what a test produced with a file checked in
// under testdata, so that a change to what corral asks of the kernel or a
// runtime (a capability, a mount, a namespace) is a diff someone reviews.
// `go test ./PKG -run TEST -update` rewrites the files instead.
package golden

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata instead of comparing with them")

// JSON compares v, as indented JSON, with testdata/NAME.golden.json.
func JSON(t *testing.T, name string, v any) {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	Bytes(t, name+".golden.json", append(b, '\n'))
}

// Bytes compares got with testdata/file.
func Bytes(t *testing.T, file string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", file)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -run '%s' -update writes it)", err, t.Name())
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from what the code makes now; if the change is meant, review it and rewrite the file with go test -run '%s' -update:\n%s",
			path, t.Name(), diff(string(want), string(got)))
	}
}

// diff lists the lines only in want (-) and only in got (+), in order:
// enough to read a golden change without a diff tool.
func diff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	// The longest common subsequence of lines, for files of a few
	// hundred lines.
	lcs := make([][]int, len(w)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(g)+1)
	}
	for i := len(w) - 1; i >= 0; i-- {
		for j := len(g) - 1; j >= 0; j-- {
			if w[i] == g[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var out strings.Builder
	i, j := 0, 0
	for i < len(w) || j < len(g) {
		switch {
		case i < len(w) && j < len(g) && w[i] == g[j]:
			i, j = i+1, j+1
		case i < len(w) && (j == len(g) || lcs[i+1][j] >= lcs[i][j+1]):
			out.WriteString("- " + w[i] + "\n")
			i++
		default:
			out.WriteString("+ " + g[j] + "\n")
			j++
		}
	}
	return out.String()
}
