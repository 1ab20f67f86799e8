// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package safefile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/corral-dev/corral/internal/testutil"
)

// hostile lays out, in a directory a sandbox could write, every way of
// putting something other than a small regular file where one is read.
func hostile(t *testing.T) (dir, secret string) {
	t.Helper()
	dir, outside := t.TempDir(), t.TempDir()
	secret = filepath.Join(outside, "secret")
	if err := os.WriteFile(secret, []byte("42\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(dir, "ok"), []byte("7\n"), 0o644))
	must(os.Symlink(secret, filepath.Join(dir, "link-out")))
	must(os.Symlink("ok", filepath.Join(dir, "link-in")))
	must(os.Symlink("/dev/zero", filepath.Join(dir, "zero")))
	must(syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o600))
	must(os.Mkdir(filepath.Join(dir, "dir"), 0o755))
	must(os.WriteFile(filepath.Join(dir, "huge"), make([]byte, 1<<20), 0o644))
	must(os.Symlink(outside, filepath.Join(dir, "parent-link")))
	return dir, secret
}

func TestReadFileRefusesWhatASandboxCanPlant(t *testing.T) {
	t.Parallel()
	dir, _ := hostile(t)
	cases := []struct {
		name string
		want error
	}{
		{"link-out", ErrLink},
		{"link-in", ErrLink},
		{"zero", ErrLink},
		{"fifo", ErrNotRegular},
		{"dir", ErrNotRegular},
		{"huge", ErrTooLarge},
		{"parent-link/secret", ErrLink},
		{"../" + filepath.Base(dir) + "/ok", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			done := make(chan error, 1)
			go func() {
				_, _, err := ReadFile(dir, tc.name, 32)
				done <- err
			}()
			select {
			case err := <-done:
				if tc.name == "../"+filepath.Base(dir)+"/ok" {
					// ".." out of the directory is refused by RESOLVE_BENEATH.
					if err == nil {
						t.Fatalf("ReadFile(%q) = nil error, want a refusal", tc.name)
					}
					return
				}
				if !errors.Is(err, tc.want) {
					t.Fatalf("ReadFile(%q) = %v, want %v", tc.name, err, tc.want)
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("ReadFile(%q) blocked", tc.name)
			}
		})
	}
	b, fi, err := ReadFile(dir, "ok", 32)
	if err != nil || string(b) != "7\n" || fi.Size() != 2 {
		t.Fatalf("ReadFile(ok) = %q, %v", b, err)
	}
	if _, _, err := ReadFile(dir, "/etc/passwd", 32); err == nil {
		t.Fatal("ReadFile of an absolute name succeeded")
	}
	if _, _, err := ReadFile(dir, "missing", 32); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("ReadFile(missing) = %v, want not-exist", err)
	}
}

func TestReadFileRefusesADevice(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	dir := t.TempDir()
	// /dev/zero's numbers: read through a link it is endless.
	if err := syscall.Mknod(filepath.Join(dir, "exit"), syscall.S_IFCHR|0o600, 1<<8|5); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ReadFile(dir, "exit", 32); !errors.Is(err, ErrNotRegular) {
		t.Fatalf("ReadFile(a character device) = %v, want ErrNotRegular", err)
	}
}

func TestMkdirAllStaysBeneath(t *testing.T) {
	t.Parallel()
	dir, secret := hostile(t)
	if err := MkdirAll(dir, "/a/b/c", 0o755); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(dir, "a/b/c")); err != nil || !fi.IsDir() {
		t.Fatalf("a/b/c was not made: %v", err)
	}
	for _, name := range []string{"parent-link/x", "link-in/x", "../x", "a/../../x"} {
		if err := MkdirAll(dir, name, 0o755); err == nil {
			t.Errorf("MkdirAll(%q) succeeded", name)
		}
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(secret), "x")); err == nil {
		t.Fatal("a directory was made outside through a link")
	}
}

func TestTail(t *testing.T) {
	t.Parallel()
	p := filepath.Join(t.TempDir(), "log")
	if err := os.WriteFile(p, []byte(strings.Repeat("x", 100)+"end"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, _ := os.Open(p)
	defer f.Close()
	if b, err := Tail(f, 3); err != nil || string(b) != "end" {
		t.Fatalf("Tail(3) = %q, %v", b, err)
	}
	if b, err := Tail(f, 1000); err != nil || len(b) != 103 {
		t.Fatalf("Tail(1000) = %d bytes, %v", len(b), err)
	}
}

// An image's root file system: links inside it resolve inside it, the
// way the sandbox will see them, never to the host's files.
func TestInRootResolvesLinksAsTheSandboxWill(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(root, "real/etc"), 0o755))
	must(os.WriteFile(filepath.Join(root, "real/etc/passwd"), []byte("app:x:1000:1000::/app:/bin/sh\n"), 0o644))
	must(os.Symlink("/real/etc", filepath.Join(root, "etc")))            // absolute, inside
	must(os.Symlink("../../../../../../etc", filepath.Join(root, "up"))) // climbs: stops at the root
	must(os.Symlink("/", filepath.Join(root, "top")))
	must(syscall.Mkfifo(filepath.Join(root, "fifo"), 0o600))

	f, _, err := OpenInRoot(root, "/etc/passwd")
	if err != nil {
		t.Fatalf("OpenInRoot(/etc/passwd) = %v", err)
	}
	b := make([]byte, 64)
	n, _ := f.Read(b)
	f.Close()
	if !strings.HasPrefix(string(b[:n]), "app:") {
		t.Fatalf("read %q, want the image's passwd", b[:n])
	}
	// The host's /etc/passwd has root in it; the image's does not.
	for _, name := range []string{"/up/passwd", "/../../etc/passwd", "/top/etc/hostname"} {
		if f, _, err := OpenInRoot(root, name); err == nil {
			b := make([]byte, 64)
			n, _ := f.Read(b)
			f.Close()
			if strings.Contains(string(b[:n]), "root:") || name == "/top/etc/hostname" {
				t.Errorf("OpenInRoot(%q) reached the host: %q", name, b[:n])
			}
		}
	}
	done := make(chan error, 1)
	go func() { _, _, err := OpenInRoot(root, "/fifo"); done <- err }()
	select {
	case err := <-done:
		if !errors.Is(err, ErrNotRegular) {
			t.Errorf("OpenInRoot(fifo) = %v, want ErrNotRegular", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("OpenInRoot(fifo) blocked")
	}

	// A working directory through an absolute link lands inside.
	made, err := MkdirAllInRoot(root, "/etc/app/work", 0o755)
	if err != nil || !made {
		t.Fatalf("MkdirAllInRoot = %v, %v", made, err)
	}
	if fi, err := os.Stat(filepath.Join(root, "real/etc/app/work")); err != nil || !fi.IsDir() {
		t.Fatalf("the directory is not inside the root: %v", err)
	}
	if made, err := MkdirAllInRoot(root, "/etc/app/work", 0o755); err != nil || made {
		t.Fatalf("MkdirAllInRoot again = %v, %v; want nothing made", made, err)
	}
	host := filepath.Join(os.TempDir(), "corral-safefile-"+filepath.Base(root))
	if _, err := MkdirAllInRoot(root, "/up/../.."+host, 0o755); err == nil {
		t.Errorf("MkdirAllInRoot with .. succeeded")
	}
	if _, err := MkdirAllInRoot(root, "/top"+host, 0o755); err != nil {
		t.Fatalf("MkdirAllInRoot(/top/...) = %v", err)
	}
	if _, err := os.Stat(host); err == nil {
		os.RemoveAll(host)
		t.Fatal("a directory was made on the host through a link to /")
	}
}

func TestWriteFileAtomicReplacesALinkNotItsTarget(t *testing.T) {
	t.Parallel()
	dir, secret := hostile(t)
	for _, name := range []string{"link-out", ".state.json.tmp"} {
		if name == ".state.json.tmp" {
			if err := os.Symlink(secret, filepath.Join(dir, name)); err != nil {
				t.Fatal(err)
			}
			name = "state.json"
		}
		if err := WriteFileAtomic(dir, name, []byte(`{"pid":1}`), 0o600); err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(secret); string(b) != "42\n" {
			t.Fatalf("writing %s went through a link: the target now holds %q", name, b)
		}
		if b, _, err := ReadFile(dir, name, 64); err != nil || string(b) != `{"pid":1}` {
			t.Fatalf("%s = %q, %v", name, b, err)
		}
	}
}

// A mount target that climbs through a link the image or a snapshot
// planted (/v -> /, so /v/.corral is /.corral) is refused, wherever the
// link sits in the path; a path with no link, existing or not, passes.
func TestCheckNoLinksInRootRefusesPlantedLinks(t *testing.T) {
	root := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(root, ".corral"), 0o755))
	must(os.MkdirAll(filepath.Join(root, "a", "b"), 0o755))
	must(os.Symlink("/", filepath.Join(root, "v")))
	must(os.Symlink("../..", filepath.Join(root, "a", "up")))
	must(os.Symlink("b", filepath.Join(root, "a", "rel")))
	must(os.WriteFile(filepath.Join(root, "file"), nil, 0o644))
	d, err := OpenDir(root)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for _, tc := range []struct {
		path string
		want error
	}{
		{"/data", nil},
		{"/a/b", nil},
		{"/a/b/c/d", nil},
		{"/v", ErrLink},
		{"/v/.corral", ErrLink},
		{"/a/up/.corral", ErrLink},
		{"/a/rel", ErrLink},
		{"/a/rel/x", ErrLink},
		{"/file/x", os.ErrInvalid},
	} {
		err := CheckNoLinksInRoot(d, tc.path)
		if (tc.want == nil) != (err == nil) || (tc.want != nil && !errors.Is(err, tc.want)) {
			t.Errorf("CheckNoLinksInRoot(%s) = %v, want %v", tc.path, err, tc.want)
		}
	}
}
