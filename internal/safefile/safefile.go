// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

// Package safefile reads and writes files in directories that a sandbox
// (or a tenant's image) can write, from the host, where corral runs as
// root: a name is resolved beneath its directory only, never through a
// symbolic link or a mount, a FIFO or device never blocks or is read, and
// a read is bounded. Drivers, the image store and anything else on the
// host that touches a sandbox's files use it; see docs/security.md.
package safefile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// ErrTooLarge is returned when a file holds more than the caller allows.
var ErrTooLarge = errors.New("file is larger than allowed")

// ErrNotRegular is returned when the name is not a regular file (a FIFO,
// a device, a socket, a directory).
var ErrNotRegular = errors.New("not a regular file")

// ErrLink is returned when resolving the name would follow a symbolic
// link or cross a mount point.
var ErrLink = errors.New("a symbolic link or mount point is in the way")

// resolve are the rules every lookup follows: beneath the directory, no
// symbolic links at all (a magic /proc link neither), no mount crossings.
const resolve = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV

// openat2 opens name beneath the directory dirfd under the rules.
func openat2(dirfd int, name string, flags uint64) (*os.File, error) {
	if name == "" || filepath.IsAbs(name) {
		return nil, fmt.Errorf("%q: %w", name, fs.ErrInvalid)
	}
	fd, err := openHow(dirfd, name, flags, resolve)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), name), nil
}

// OpenDir opens dir itself (which must not be a link) for lookups beneath it.
func OpenDir(dir string) (*os.File, error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: dir, Err: err}
	}
	return os.NewFile(uintptr(fd), dir), nil
}

// Open opens name (a path relative to dir, which may have several
// components) for reading if it is a regular file beneath dir. It never
// follows a link, never blocks on a FIFO and never opens a device.
func Open(dir, name string) (*os.File, fs.FileInfo, error) {
	d, err := OpenDir(dir)
	if err != nil {
		return nil, nil, err
	}
	defer d.Close()
	return OpenAt(d, name)
}

// OpenAt is Open beneath an open directory.
func OpenAt(dir *os.File, name string) (*os.File, fs.FileInfo, error) {
	f, err := openat2(int(dir.Fd()), name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK)
	if err != nil {
		return nil, nil, err
	}
	return regular(f, name)
}

// regular returns f if it is a regular file, and closes it if not.
func regular(f *os.File, name string) (*os.File, fs.FileInfo, error) {
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, fmt.Errorf("%s: %w", name, ErrNotRegular)
	}
	return f, fi, nil
}

// ReadFile reads name beneath dir if it is a regular file of at most
// limit bytes; a longer one is ErrTooLarge, and nothing past limit is
// ever read.
func ReadFile(dir, name string, limit int64) ([]byte, fs.FileInfo, error) {
	f, fi, err := Open(dir, name)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	b, err := readLimited(f, limit)
	return b, fi, err
}

// ReadFileAt is ReadFile beneath an open directory.
func ReadFileAt(dir *os.File, name string, limit int64) ([]byte, fs.FileInfo, error) {
	f, fi, err := OpenAt(dir, name)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	b, err := readLimited(f, limit)
	return b, fi, err
}

func readLimited(r io.Reader, limit int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, ErrTooLarge
	}
	return b, nil
}

// Tail returns up to the last n bytes of the regular file f, from its
// start if it is shorter; what f holds past its size at the call is not read.
func Tail(f *os.File, n int64) ([]byte, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	off := max(fi.Size()-n, 0)
	buf := make([]byte, fi.Size()-off)
	k, err := f.ReadAt(buf, off)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return buf[:k], nil
}

// MkdirAll makes the directory name beneath dir (components separated by
// "/", none of them ".."), like os.MkdirAll, without following a link
// that a component already is: a link is an error.
func MkdirAll(dir, name string, perm os.FileMode) error {
	d, err := OpenDir(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	cur := d
	defer func() {
		if cur != d {
			cur.Close()
		}
	}()
	for _, part := range strings.Split(strings.Trim(name, "/"), "/") {
		if part == "" || part == "." {
			continue
		}
		if part == ".." {
			return fmt.Errorf("%q: %w", name, fs.ErrInvalid)
		}
		if err := unix.Mkdirat(int(cur.Fd()), part, uint32(perm.Perm())); err != nil && !errors.Is(err, unix.EEXIST) {
			return &fs.PathError{Op: "mkdir", Path: name, Err: err}
		}
		next, err := openat2(int(cur.Fd()), part, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW)
		if err != nil {
			return err
		}
		if cur != d {
			cur.Close()
		}
		cur = next
	}
	return nil
}

// inRoot resolves names the way a process chrooted to the directory
// would: ".." and absolute links stop at the directory, and no magic
// /proc link or mount crossing is followed.
const inRoot = unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV

// OpenInRoot opens name in the root file system at root (an image's, a
// sandbox's) as a program inside it would see it, links included, if it
// is a regular file; a FIFO or device is never opened for reading.
func OpenInRoot(root, name string) (*os.File, fs.FileInfo, error) {
	d, err := OpenDir(root)
	if err != nil {
		return nil, nil, err
	}
	defer d.Close()
	return OpenInRootAt(d, name)
}

// OpenInRootAt is OpenInRoot in the root file system open at root (a
// directory, or a detached mount's root).
func OpenInRootAt(root *os.File, name string) (*os.File, fs.FileInfo, error) {
	fd, err := openHow(int(root.Fd()), name, unix.O_RDONLY|unix.O_NONBLOCK, inRoot)
	if err != nil {
		return nil, nil, err
	}
	return regular(os.NewFile(uintptr(fd), name), name)
}

// OpenDirNoLinks opens the directory at the absolute path p as a bare
// descriptor (O_PATH) if no element of p is a symbolic link: a path
// resolved earlier that someone has since redirected through a link is
// refused (ErrLink) rather than followed.
func OpenDirNoLinks(p string) (*os.File, error) {
	if !filepath.IsAbs(p) {
		return nil, fmt.Errorf("%q: %w", p, fs.ErrInvalid)
	}
	return openPath(unix.AT_FDCWD, p, unix.RESOLVE_NO_SYMLINKS|unix.RESOLVE_NO_MAGICLINKS)
}

// openPath opens a directory as O_PATH under the rules how (openat2
// takes no other flag beside O_PATH).
func openPath(dirfd int, name string, how uint64) (*os.File, error) {
	for {
		fd, err := unix.Openat2(dirfd, name, &unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: how})
		if errors.Is(err, unix.EINTR) || errors.Is(err, unix.EAGAIN) {
			continue
		}
		if err != nil {
			if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.EXDEV) {
				return nil, fmt.Errorf("%s: %w", name, ErrLink)
			}
			return nil, &fs.PathError{Op: "open", Path: name, Err: err}
		}
		return os.NewFile(uintptr(fd), name), nil
	}
}

// OpenDirInRootAt opens directory name (relative) of the tree at root as
// a program inside that tree would (its links resolve inside it, never
// out of it) as a bare descriptor (O_PATH): a bind mount's source that no
// later change of the tree can redirect.
func OpenDirInRootAt(root *os.File, name string) (*os.File, error) {
	return openPath(int(root.Fd()), name, inRoot)
}

// MkdirAllInRoot makes directory name (absolute, without "..") in the
// root file system at root as a program inside it would, following the
// links it holds inside it only. It reports whether it made anything.
func MkdirAllInRoot(root, name string, perm os.FileMode) (bool, error) {
	d, err := OpenDir(root)
	if err != nil {
		return false, err
	}
	defer d.Close()
	return MkdirAllInRootAt(d, name, perm)
}

// MkdirAllInRootAt is MkdirAllInRoot in the root file system open at d.
func MkdirAllInRootAt(d *os.File, name string, perm os.FileMode) (bool, error) {
	made := false
	prefix := ""
	for _, part := range strings.Split(strings.Trim(name, "/"), "/") {
		if part == "" || part == "." {
			continue
		}
		if part == ".." {
			return made, fmt.Errorf("%q: %w", name, fs.ErrInvalid)
		}
		parent := prefix
		prefix += "/" + part
		fd, err := openHow(int(d.Fd()), prefix, unix.O_RDONLY|unix.O_DIRECTORY, inRoot)
		if err == nil {
			unix.Close(fd)
			continue
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return made, err
		}
		pfd, err := openHow(int(d.Fd()), "/"+strings.TrimPrefix(parent, "/"), unix.O_RDONLY|unix.O_DIRECTORY, inRoot)
		if err != nil {
			return made, err
		}
		err = unix.Mkdirat(pfd, part, uint32(perm.Perm()))
		unix.Close(pfd)
		if err != nil && !errors.Is(err, unix.EEXIST) {
			return made, &fs.PathError{Op: "mkdir", Path: name, Err: err}
		}
		made = true
	}
	return made, nil
}

func openHow(dirfd int, name string, flags uint64, how uint64) (int, error) {
	for {
		fd, err := unix.Openat2(dirfd, name, &unix.OpenHow{Flags: flags | unix.O_CLOEXEC | unix.O_NOCTTY, Resolve: how})
		if errors.Is(err, unix.EINTR) || errors.Is(err, unix.EAGAIN) {
			continue
		}
		if err != nil {
			if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.EXDEV) {
				return -1, fmt.Errorf("%s: %w", name, ErrLink)
			}
			return -1, &fs.PathError{Op: "open", Path: name, Err: err}
		}
		return fd, nil
	}
}

// WriteFileAtomic replaces name in dir with data: written to a new file
// beside it (never through a link someone left there) and renamed over
// it, so a reader sees the old content or the new.
func WriteFileAtomic(dir, name string, data []byte, perm os.FileMode) error {
	d, err := OpenDir(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	tmp := "." + name + ".tmp"
	if err := unix.Unlinkat(int(d.Fd()), tmp, 0); err != nil && !errors.Is(err, unix.ENOENT) {
		return &fs.PathError{Op: "unlink", Path: tmp, Err: err}
	}
	fd, err := unix.Openat(int(d.Fd()), tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, uint32(perm.Perm()))
	if err != nil {
		return &fs.PathError{Op: "create", Path: tmp, Err: err}
	}
	f := os.NewFile(uintptr(fd), tmp)
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = unix.Renameat(int(d.Fd()), tmp, int(d.Fd()), name)
	}
	if err != nil {
		_ = unix.Unlinkat(int(d.Fd()), tmp, 0)
		return &fs.PathError{Op: "write", Path: name, Err: err}
	}
	return nil
}

// CheckNoLinksInRoot checks the absolute path name in the root file system
// open at root for what a runtime would follow to place a mount there: it
// fails with ErrLink if any existing element of name (the last one
// included) is a symbolic link or a mount point, and with an error
// wrapping fs.ErrInvalid if one is not a directory before the last.
// Elements that do not exist yet are fine: the runtime makes them as
// directories, where the checked prefix leads.
func CheckNoLinksInRoot(root *os.File, name string) error {
	return checkNoLinks(root, name, unix.RESOLVE_NO_XDEV)
}

// CheckNoLinksAcrossMounts is CheckNoLinksInRoot in a root whose mounts
// are the runtime's own (a container's /proc, /dev, its volumes): mount
// points on the way are crossed, links still refused.
func CheckNoLinksAcrossMounts(root *os.File, name string) error {
	return checkNoLinks(root, name, 0)
}

func checkNoLinks(root *os.File, name string, extra uint64) error {
	rel := strings.TrimPrefix(name, "/")
	if rel == "" {
		return nil
	}
	how := &unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | extra}
	fd, err := unix.Openat2(int(root.Fd()), rel, how)
	for errors.Is(err, unix.EINTR) || errors.Is(err, unix.EAGAIN) {
		fd, err = unix.Openat2(int(root.Fd()), rel, how)
	}
	if err == nil {
		unix.Close(fd)
	}
	switch {
	case err == nil, errors.Is(err, unix.ENOENT):
		return nil
	case errors.Is(err, unix.ELOOP), errors.Is(err, unix.EXDEV):
		return fmt.Errorf("%s: %w", name, ErrLink)
	case errors.Is(err, unix.ENOTDIR):
		return fmt.Errorf("%s: an element before the last is not a directory: %w", name, fs.ErrInvalid)
	}
	return &fs.PathError{Op: "check", Path: name, Err: err}
}
