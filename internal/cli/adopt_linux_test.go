// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func run(t *testing.T, env map[string]string, args ...string) (int, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := Main(context.Background(), args, strings.NewReader(""), &out, &errb, func(k string) string { return env[k] })
	return code, errb.String()
}

// TestAdoptAndInstallRejectBadInput: the commands the Kubernetes pods run
// fail with one line naming what is wrong, and write nothing.
func TestAdoptAndInstallRejectBadInput(t *testing.T) {
	dir := t.TempDir()
	files := []string{"--token-file", filepath.Join(dir, "token"), "--env-file", filepath.Join(dir, "env"), "--start", filepath.Join(dir, "start")}
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"no files", nil, []string{"adopt"}, "are required"},
		{"no spec", nil, append([]string{"adopt"}, files...), "$CORRAL_ADOPT"},
		{"bad json", map[string]string{"CORRAL_ADOPT": "{"}, append([]string{"adopt"}, files...), "$CORRAL_ADOPT"},
		{"no entrypoint", map[string]string{"CORRAL_ADOPT": `{"token":"t"}`}, append([]string{"adopt"}, files...), "no entrypoint"},
		{"env without =", map[string]string{"CORRAL_ADOPT": `{"token":"t","args":["x"],"env":["NOEQUALS"]}`}, append([]string{"adopt"}, files...), "KEY=VALUE"},
		{"env with a newline", map[string]string{"CORRAL_ADOPT": `{"token":"t","args":["x"],"env":["A=1\nB=2"]}`}, append([]string{"adopt"}, files...), "KEY=VALUE"},
		{"install without a path", nil, []string{"install-binary"}, "one PATH"},
		{"install into nowhere", nil, []string{"install-binary", "/nonexistent/dir/corral"}, "install-binary:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stderr := run(t, tc.env, tc.args...)
			if code == 0 || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, stderr %q; want a failure mentioning %q", code, stderr, tc.want)
			}
		})
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("a refused adoption wrote %d files", len(entries))
	}
}

// TestInstallBinaryCopiesItself: the copy is this executable, executable.
func TestInstallBinaryCopiesItself(t *testing.T) {
	dst := filepath.Join(t.TempDir(), "corral")
	if code, stderr := run(t, nil, "install-binary", dst); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	want, _ := os.ReadFile("/proc/self/exe")
	got, err := os.ReadFile(dst)
	fi, _ := os.Stat(dst)
	if err != nil || !bytes.Equal(got, want) || fi.Mode().Perm() != 0o555 {
		t.Errorf("copy: %d bytes (want %d), mode %v, %v", len(got), len(want), fi.Mode(), err)
	}
}
