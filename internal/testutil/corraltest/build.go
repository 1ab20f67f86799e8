// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

// Package corraltest builds corral from this checkout (Build,
// BuildTagged, RunWithCorral for a TestMain, BuildStandIn for the program
// that stands in for a tenant's PID 1) and serves it (Serve, whose
// Served.Stop also unmounts what the server left mounted in its data
// directory; Unmount for a server started otherwise). It imports no
// runtime, so the SDK's tests can serve corral without linking one. Tests
// and bench/ import it (internal/archtest checks).
package corraltest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Build builds the corral binary (statically, as it ships) into dir
// and returns its path. TestMain functions call it once per package, and
// benchmarks once per run.
func Build(dir string) (string, error) { return BuildTagged(dir, "") }

// BuildTagged builds corral with build tags (comma-separated; "kube"
// adds the Kubernetes commands) into dir, named corral or corral-TAGS.
func BuildTagged(dir, tags string) (string, error) {
	bin := filepath.Join(dir, "corral")
	var flags []string
	if tags != "" {
		bin += "-" + strings.ReplaceAll(tags, ",", "-")
		flags = []string{"-tags", tags}
	}
	if err := goBuild(bin, "./cmd/corral", flags...); err != nil {
		return "", fmt.Errorf("build corral: %w", err)
	}
	return bin, nil
}

// goBuild builds the module's package pkg (statically) into bin.
func goBuild(bin, pkg string, flags ...string) error {
	mod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return fmt.Errorf("go env GOMOD: %w", err)
	}
	args := append(append([]string{"build"}, flags...), "-o", bin, pkg)
	b := exec.Command("go", args...)
	b.Dir = filepath.Dir(strings.TrimSpace(string(mod)))
	b.Env = append(os.Environ(), "CGO_ENABLED=0")
	b.Stdout, b.Stderr = os.Stderr, os.Stderr
	return b.Run()
}

// RunWithCorral is a TestMain body: it builds the corral binary into a
// temporary directory, sets *bin to its path, runs the tests and removes
// the directory. It returns the exit code.
func RunWithCorral(m interface{ Run() int }, bin *string) int {
	dir, err := os.MkdirTemp("", "corral-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if *bin, err = Build(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// BuildStandIn builds testdata/standin (statically) into dir and returns
// its path: a program that stands in for a PID 1 a tenant put where
// corral's init goes, and abuses everything corral init is given.
func BuildStandIn(dir string) (string, error) {
	bin := filepath.Join(dir, "standin")
	if err := goBuild(bin, "./internal/testutil/corraltest/testdata/standin"); err != nil {
		return "", fmt.Errorf("build the stand-in: %w", err)
	}
	return bin, nil
}
