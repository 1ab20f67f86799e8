// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package initproc

import (
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"github.com/corral-dev/corral/internal/testutil"
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

// ExecdEnvs makes a file the entrypoint's user owns and exports it; one
// the image or request named is used as it is; a link or a FIFO in the
// file's place is refused and nothing is exported.
func TestExecdEnvs(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "envs")
	env, got, err := ExecdEnvs([]string{"A=1"}, path, &syscall.Credential{Uid: 1234, Gid: 4321})
	if err != nil || got != path || !slices.Equal(env, []string{"A=1", "EXECD_ENVS=" + path}) {
		t.Fatalf("ExecdEnvs = %q, %q, %v", env, got, err)
	}
	fi, err := os.Lstat(path)
	if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the file = %v, %v", fi, err)
	}
	if st := fi.Sys().(*syscall.Stat_t); st.Uid != 1234 || st.Gid != 4321 {
		t.Errorf("the file is owned by %d:%d, want the entrypoint's 1234:4321", st.Uid, st.Gid)
	}
	// Found again (a restored snapshot), it is kept and handed to root.
	_ = os.WriteFile(path, []byte("K=v\n"), 0o644)
	if _, _, err := ExecdEnvs(nil, path, nil); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) != "K=v\n" {
		t.Errorf("the file's lines were lost: %q", b)
	}
	if env, got, err := ExecdEnvs([]string{"EXECD_ENVS=/opt/app/.env"}, path, nil); err != nil || got != "/opt/app/.env" || len(env) != 1 {
		t.Errorf("with EXECD_ENVS set = %q, %q, %v", env, got, err)
	}
	link := filepath.Join(dir, "link")
	_ = os.Symlink("/etc/passwd", link)
	fifo := filepath.Join(dir, "fifo")
	_ = syscall.Mkfifo(fifo, 0o600)
	for _, p := range []string{link, fifo} {
		if env, got, err := ExecdEnvs([]string{"A=1"}, p, nil); err == nil || got != "" || len(env) != 1 {
			t.Errorf("ExecdEnvs(%s) = %q, %q, %v; want a refusal", p, env, got, err)
		}
	}
	if fi, _ := os.Stat("/etc/passwd"); fi.Sys().(*syscall.Stat_t).Uid != 0 {
		t.Error("the link's target changed owner")
	}
}

// TestWaitGateFailsClosed: PID 1 goes on only once the runtime opened the
// gate; a gate closed without opening (a runtime that died) or with
// anything else in it stops it.
func TestWaitGateFailsClosed(t *testing.T) {
	for _, tc := range []struct {
		write string
		ok    bool
	}{{GateOpen, true}, {"", false}, {"open", false}, {GateOpen + "more", false}} {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.WriteString(tc.write); err != nil {
			t.Fatal(err)
		}
		w.Close()
		fd, err := syscall.Dup(int(r.Fd()))
		r.Close()
		if err != nil {
			t.Fatal(err)
		}
		if err := WaitGate(fd); (err == nil) != tc.ok {
			t.Errorf("WaitGate after %q = %v, want ok %v", tc.write, err, tc.ok)
		}
	}
	if err := WaitGate(2); err == nil {
		t.Error("WaitGate(2) = nil")
	}
}
