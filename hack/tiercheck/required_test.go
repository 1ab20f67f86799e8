// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestRequiredTestsExist: every line of required.txt names a test (or an
// example) function that exists in its package, once; a renamed or deleted test would
// otherwise fail CI only as "did not run", after the whole run.
func TestRequiredTestsExist(t *testing.T) {
	f, err := os.Open("required.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	root := filepath.Join("..", "..")
	seen := map[string]bool{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		pkg, name, ok := strings.Cut(line, ".")
		example := strings.HasPrefix(name, "Example")
		if !ok || !(strings.HasPrefix(name, "Test") || example) || strings.TrimSpace(line) != line || strings.Contains(name, "/") {
			t.Errorf("line %d: %q is not package.TestName (or package.ExampleName)", n, line)
			continue
		}
		if seen[line] {
			t.Errorf("line %d: %s is listed twice", n, line)
		}
		seen[line] = true
		files, _ := filepath.Glob(filepath.Join(root, pkg, "*_test.go"))
		sig := `\(t \*testing\.T\)`
		if example {
			sig = `\(\)`
		}
		def := regexp.MustCompile(`(?m)^func ` + regexp.QuoteMeta(name) + sig)
		found := false
		for _, file := range files {
			b, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			if def.Match(b) {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("line %d: no func %s(t *testing.T) in %s", n, name, pkg)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(seen) < 100 {
		t.Errorf("required.txt names %d tests; it had over 150", len(seen))
	}
}
