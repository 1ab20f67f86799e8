// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package testutil

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// BuildCorral builds the corral binary (statically, as it ships) into dir
// and returns its path. TestMain functions call it once per package.
func BuildCorral(dir string) (string, error) {
	mod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	bin := filepath.Join(dir, "corral")
	b := exec.Command("go", "build", "-o", bin, "./cmd/corral")
	b.Dir = filepath.Dir(strings.TrimSpace(string(mod)))
	b.Env = append(os.Environ(), "CGO_ENABLED=0")
	b.Stdout, b.Stderr = os.Stderr, os.Stderr
	if err := b.Run(); err != nil {
		return "", fmt.Errorf("build corral: %w", err)
	}
	return bin, nil
}
