// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package initproc

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestLookupCredential(t *testing.T) {
	for _, tc := range []struct {
		spec     string
		uid, gid uint32
	}{
		{"1000:1001", 1000, 1001},
		{"0", 0, 0},             // root is in every passwd: its primary group
		{"54321", 54321, 54321}, // no passwd entry: the UID as the group
		{"root", 0, 0},
		{"root:0", 0, 0},
		{"54321:root", 54321, 0},
	} {
		c, err := LookupCredential(tc.spec)
		if err != nil || c.Uid != tc.uid || c.Gid != tc.gid {
			t.Errorf("%q = %+v, %v; want %d:%d", tc.spec, c, err, tc.uid, tc.gid)
		}
	}
	for _, bad := range []string{"no-such-user-corral", "0:no-such-group-corral"} {
		if _, err := LookupCredential(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// The entrypoint never sees execd's token verifier or settings.
func TestEntrypointEnvDropsExecdsOwn(t *testing.T) {
	got := EntrypointEnv([]string{"PATH=/bin", "EXECD_ACCESS_TOKEN=sha256:x", "CORRAL_EXECD_STATE=/s", "EXECD_ENVS=/e", "A=EXECD_ACCESS_TOKEN"})
	if !slices.Equal(got, []string{"PATH=/bin", "EXECD_ENVS=/e", "A=EXECD_ACCESS_TOKEN"}) {
		t.Fatalf("entrypoint env %q", got)
	}
}

// A warm sandbox nobody prepared gets its FIFO and its token file once;
// what exists already is left alone.
func TestPrepareWarm(t *testing.T) {
	dir := t.TempDir()
	fifo, tok := filepath.Join(dir, "w", "start"), filepath.Join(dir, "w", "token")
	if err := PrepareWarm(fifo, tok, "first"); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(fifo); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Fatalf("start FIFO: %v %v", fi, err)
	}
	if err := PrepareWarm(fifo, tok, "second"); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(tok); err != nil || string(b) != "first" {
		t.Fatalf("token file %q %v: an adoption's token must not be overwritten", b, err)
	}
	if fi, _ := os.Stat(tok); fi.Mode().Perm() != 0o600 {
		t.Fatalf("token file mode %v", fi.Mode())
	}
}
