// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package treecopy

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/corral-dev/corral/internal/testutil"
)

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func lstat(t *testing.T, p string) *unix.Stat_t {
	t.Helper()
	var st unix.Stat_t
	must(t, unix.Lstat(p, &st))
	return &st
}

// TestCopyKeepsWhatALayerNeeds copies a tree laid out like an overlay's
// writable layer and checks every kind of entry, then stacks the copy as
// a lower layer and checks the overlay sees what the writer saw.
func TestCopyKeepsWhatALayerNeeds(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	src := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(src, "etc/app"), 0o750))
	must(t, os.WriteFile(filepath.Join(src, "etc/app/conf"), []byte("kept"), 0o640))
	must(t, os.Chown(filepath.Join(src, "etc/app/conf"), 1234, 5678))
	must(t, os.Chown(filepath.Join(src, "etc/app"), 1234, 5678))
	must(t, os.WriteFile(filepath.Join(src, "suid"), []byte("#!/bin/sh\n"), 0o755))
	must(t, os.Chown(filepath.Join(src, "suid"), 1000, 1000))
	must(t, unix.Chmod(filepath.Join(src, "suid"), 0o4755))
	must(t, unix.Setxattr(filepath.Join(src, "etc/app/conf"), "user.origin", []byte("tenant"), 0))
	// The overlay's bookkeeping: an opaque directory, a whiteout, an
	// origin handle that means nothing in another stack.
	must(t, os.Mkdir(filepath.Join(src, "opaque"), 0o755))
	must(t, unix.Setxattr(filepath.Join(src, "opaque"), "trusted.overlay.opaque", []byte("y"), 0))
	must(t, unix.Setxattr(filepath.Join(src, "opaque"), "trusted.overlay.origin", []byte("handle"), 0))
	must(t, unix.Mknod(filepath.Join(src, "deleted"), unix.S_IFCHR, 0))
	// Links that point out of the tree stay links.
	must(t, os.Symlink("/etc/shadow", filepath.Join(src, "shadow")))
	must(t, os.Symlink("etc/app", filepath.Join(src, "app")))
	must(t, unix.Lchown(filepath.Join(src, "shadow"), 42, 43))
	// Hard links stay one file.
	must(t, os.WriteFile(filepath.Join(src, "a"), []byte("same"), 0o644))
	must(t, os.Link(filepath.Join(src, "a"), filepath.Join(src, "etc/b")))
	// A FIFO must not block the copy; a device and a socket are left out.
	must(t, unix.Mkfifo(filepath.Join(src, "fifo"), 0o600))
	must(t, unix.Chmod(filepath.Join(src, "fifo"), 0o622))
	must(t, unix.Mknod(filepath.Join(src, "null"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))))
	must(t, unix.Mknod(filepath.Join(src, "disk"), unix.S_IFBLK|0o666, int(unix.Mkdev(7, 0))))
	// A terabyte that is all hole.
	f, err := os.Create(filepath.Join(src, "sparse"))
	must(t, err)
	must(t, f.Truncate(1<<40))
	_, err = f.WriteAt([]byte("end"), 1<<40-3)
	must(t, err)
	must(t, f.Close())
	// What execd keeps is skipped.
	must(t, os.MkdirAll(filepath.Join(src, "var/lib/corral-execd/cmd"), 0o700))
	must(t, os.WriteFile(filepath.Join(src, "var/lib/corral-execd/cmd/out"), []byte("log"), 0o600))
	old := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	must(t, os.Chtimes(filepath.Join(src, "etc/app/conf"), old, old))
	must(t, os.Chtimes(filepath.Join(src, "etc/app"), old, old))

	dst := filepath.Join(t.TempDir(), "layer")
	done := make(chan struct{})
	var stats Stats
	go func() {
		defer close(done)
		stats, err = Copy(src, dst, Options{Skip: []string{"var/lib/corral-execd"}})
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("Copy blocked (on the FIFO?)")
	}
	must(t, err)

	if b, _ := os.ReadFile(filepath.Join(dst, "etc/app/conf")); string(b) != "kept" {
		t.Errorf("etc/app/conf = %q", b)
	}
	st := lstat(t, filepath.Join(dst, "etc/app/conf"))
	if st.Uid != 1234 || st.Gid != 5678 || st.Mode&0o7777 != 0o640 || st.Mtim.Sec != old.Unix() {
		t.Errorf("etc/app/conf: uid %d gid %d mode %o mtime %d", st.Uid, st.Gid, st.Mode&0o7777, st.Mtim.Sec)
	}
	if st := lstat(t, filepath.Join(dst, "etc/app")); st.Uid != 1234 || st.Mode&0o7777 != 0o750 || st.Mtim.Sec != old.Unix() {
		t.Errorf("etc/app: uid %d mode %o mtime %d", st.Uid, st.Mode&0o7777, st.Mtim.Sec)
	}
	if st := lstat(t, filepath.Join(dst, "suid")); st.Mode&0o7777 != 0o4755 || st.Uid != 1000 {
		t.Errorf("suid: mode %o uid %d (chown must not clear the set-id bit)", st.Mode&0o7777, st.Uid)
	}
	buf := make([]byte, 64)
	if n, err := unix.Getxattr(filepath.Join(dst, "etc/app/conf"), "user.origin", buf); err != nil || string(buf[:n]) != "tenant" {
		t.Errorf("user.origin = %q, %v", buf[:max(n, 0)], err)
	}
	if n, err := unix.Getxattr(filepath.Join(dst, "opaque"), "trusted.overlay.opaque", buf); err != nil || string(buf[:n]) != "y" {
		t.Errorf("trusted.overlay.opaque = %q, %v", buf[:max(n, 0)], err)
	}
	if _, err := unix.Getxattr(filepath.Join(dst, "opaque"), "trusted.overlay.origin", buf); !errors.Is(err, unix.ENODATA) {
		t.Errorf("trusted.overlay.origin was copied (%v): it names a file of another stack", err)
	}
	if st := lstat(t, filepath.Join(dst, "deleted")); st.Mode&unix.S_IFMT != unix.S_IFCHR || st.Rdev != 0 {
		t.Errorf("whiteout: mode %o rdev %d", st.Mode, st.Rdev)
	}
	if l, err := os.Readlink(filepath.Join(dst, "shadow")); err != nil || l != "/etc/shadow" {
		t.Errorf("shadow link = %q, %v", l, err)
	}
	if st := lstat(t, filepath.Join(dst, "shadow")); st.Uid != 42 || st.Gid != 43 {
		t.Errorf("link owner %d:%d", st.Uid, st.Gid)
	}
	if fi, err := os.Lstat(filepath.Join(dst, "app")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("app is not a link: %v", err)
	}
	if a, b := lstat(t, filepath.Join(dst, "a")), lstat(t, filepath.Join(dst, "etc/b")); a.Ino != b.Ino || a.Nlink != 2 {
		t.Errorf("hard links: inodes %d and %d, nlink %d", a.Ino, b.Ino, a.Nlink)
	}
	if st := lstat(t, filepath.Join(dst, "fifo")); st.Mode&unix.S_IFMT != unix.S_IFIFO || st.Mode&0o777 != 0o622 {
		t.Errorf("fifo: mode %o", st.Mode)
	}
	for _, name := range []string{"null", "disk", "var/lib/corral-execd"} {
		if _, err := os.Lstat(filepath.Join(dst, name)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s was copied (%v)", name, err)
		}
	}
	st = lstat(t, filepath.Join(dst, "sparse"))
	if st.Size != 1<<40 || st.Blocks*512 > 1<<20 {
		t.Errorf("sparse: size %d, %d bytes on disk", st.Size, st.Blocks*512)
	}
	if stats.Bytes > 1<<20 || stats.Skipped != 2 || stats.Whiteouts != 1 {
		t.Errorf("stats = %+v", stats)
	}

	// The copy is a layer: stacked over a lower that has the whiteout's
	// name and a file in the opaque directory, neither shows.
	lower, upper, work, mnt := t.TempDir(), t.TempDir(), t.TempDir(), t.TempDir()
	must(t, os.WriteFile(filepath.Join(lower, "deleted"), []byte("gone"), 0o644))
	must(t, os.Mkdir(filepath.Join(lower, "opaque"), 0o755))
	must(t, os.WriteFile(filepath.Join(lower, "opaque/hidden"), []byte("gone"), 0o644))
	must(t, os.WriteFile(filepath.Join(lower, "base"), []byte("base"), 0o644))
	must(t, unix.Mount("overlay", mnt, "overlay", 0, "lowerdir="+dst+":"+lower+",upperdir="+upper+",workdir="+work))
	t.Cleanup(func() { _ = unix.Unmount(mnt, unix.MNT_DETACH) })
	for name, want := range map[string]bool{"deleted": false, "opaque/hidden": false, "base": true, "etc/app/conf": true} {
		if _, err := os.Lstat(filepath.Join(mnt, name)); (err == nil) != want {
			t.Errorf("in the overlay, %s exists = %v, want %v", name, err == nil, want)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(mnt, "etc/b")); string(b) != "same" {
		t.Errorf("etc/b through the overlay = %q", b)
	}
}

// TestCopyRefusesATreeTooDeep: a sandbox's deep nesting fails the copy
// instead of exhausting descriptors.
func TestCopyRefusesATreeTooDeep(t *testing.T) {
	t.Parallel()
	src := t.TempDir()
	d, err := os.Open(src)
	must(t, err)
	fd := int(d.Fd())
	for range MaxDepth + 1 {
		must(t, unix.Mkdirat(fd, "d", 0o755))
		next, err := unix.Openat(fd, "d", unix.O_RDONLY|unix.O_DIRECTORY, 0)
		must(t, err)
		if fd != int(d.Fd()) {
			unix.Close(fd)
		}
		fd = next
	}
	unix.Close(fd)
	d.Close()
	_, err = Copy(src, filepath.Join(t.TempDir(), "layer"), Options{})
	if !errors.Is(err, ErrTooDeep) {
		t.Fatalf("Copy(a tree %d deep) = %v, want ErrTooDeep", MaxDepth+1, err)
	}
}

// TestCopyData: a file's bytes, in data extents around holes, arrive
// whole, however they are laid out.
func TestCopyData(t *testing.T) {
	t.Parallel()
	src := t.TempDir()
	big := bytes.Repeat([]byte("0123456789abcdef"), 300000)
	must(t, os.WriteFile(filepath.Join(src, "big"), big, 0o644))
	f, err := os.Create(filepath.Join(src, "holes"))
	must(t, err)
	for _, off := range []int64{0, 3 << 20, 9 << 20} {
		_, err := f.WriteAt([]byte(strings.Repeat("x", 5000)), off)
		must(t, err)
	}
	must(t, f.Truncate(12<<20))
	must(t, f.Close())
	must(t, os.WriteFile(filepath.Join(src, "empty"), nil, 0o644))
	dst := filepath.Join(t.TempDir(), "layer")
	if _, err := Copy(src, dst, Options{}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"big", "holes", "empty"} {
		a, _ := os.ReadFile(filepath.Join(src, name))
		b, err := os.ReadFile(filepath.Join(dst, name))
		if err != nil || !bytes.Equal(a, b) {
			t.Errorf("%s: %d bytes copied of %d (%v)", name, len(b), len(a), err)
		}
	}
	if _, err := Copy(src, dst, Options{}); !errors.Is(err, os.ErrExist) {
		t.Errorf("Copy into an existing directory = %v, want ErrExist", err)
	}
}
