// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

// Package treecopy copies a directory tree that a sandbox wrote (an
// overlay's writable layer) into a new directory of the host's, keeping
// what a layer needs: contents, modes, owners, times, extended
// attributes, symbolic links, hard links, FIFOs and the overlay's
// whiteouts and opaque directories, so the copy can serve as a lower
// layer of another overlay. The oci driver's snapshots use it.
//
// It is hand-written rather than taken from a general copier because the
// source is hostile input to a process running as root: every lookup is
// relative to an open directory and never follows a link, a name is
// opened only after it was seen to be a regular file (so a FIFO never
// blocks the copy and a device is never opened), holes stay holes (a
// sandbox's one-terabyte sparse file costs the host nothing), the depth
// is bounded, and device nodes other than whiteouts are left out.
package treecopy

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// MaxDepth bounds how deeply directories may nest in a copied tree: a
// deeper tree is refused rather than costing a descriptor per level.
const MaxDepth = 512

// ErrTooDeep is returned for a tree that nests deeper than MaxDepth.
var ErrTooDeep = errors.New("directories nest too deeply")

// Options tune a copy.
type Options struct {
	// Skip lists paths relative to the source's root (slash-separated,
	// no leading slash) that are not copied.
	Skip []string
}

// Stats count what a copy made.
type Stats struct {
	Dirs, Files, Links, Whiteouts, Others int64
	// Bytes is the data copied (holes excluded).
	Bytes int64
	// Skipped counts entries left out: sockets, device nodes.
	Skipped int64
}

type copier struct {
	skip    map[string]bool
	dstRoot int
	// links maps a multiply linked source inode to the path of its first
	// copy, relative to the destination's root.
	links map[[2]uint64]string
	stats Stats
	// clone is false once the file system refused FICLONE.
	clone bool
}

// Copy copies the tree at src into dst, which must not exist; dst's
// parent must be a directory only the host writes. On error dst may hold
// part of the copy: the caller removes it.
func Copy(src, dst string, opts Options) (Stats, error) {
	sfd, err := unix.Open(src, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return Stats{}, &os.PathError{Op: "open", Path: src, Err: err}
	}
	defer unix.Close(sfd)
	if err := unix.Mkdir(dst, 0o700); err != nil {
		return Stats{}, &os.PathError{Op: "mkdir", Path: dst, Err: err}
	}
	dfd, err := unix.Open(dst, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return Stats{}, &os.PathError{Op: "open", Path: dst, Err: err}
	}
	defer unix.Close(dfd)
	c := &copier{skip: map[string]bool{}, dstRoot: dfd, links: map[[2]uint64]string{}, clone: true}
	for _, s := range opts.Skip {
		c.skip[strings.Trim(path.Clean(s), "/")] = true
	}
	var st unix.Stat_t
	if err := unix.Fstat(sfd, &st); err != nil {
		return Stats{}, err
	}
	if err := c.dir(sfd, dfd, "", 0); err != nil {
		return c.stats, err
	}
	if err := c.metaFd(dfd, &st, sfd); err != nil {
		return c.stats, err
	}
	return c.stats, nil
}

// dir copies the entries of the open source directory sfd into the open
// destination directory dfd; rel is its path from the root.
func (c *copier) dir(sfd, dfd int, rel string, depth int) error {
	if depth >= MaxDepth {
		return fmt.Errorf("%s: %w", rel, ErrTooDeep)
	}
	// The descriptor is duplicated: reading the directory through an
	// *os.File closes it at the end.
	rfd, err := unix.Dup(sfd)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(rfd), rel)
	defer f.Close()
	for {
		names, err := f.Readdirnames(256)
		for _, name := range names {
			if err := c.entry(sfd, dfd, rel, name, depth); err != nil {
				return err
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read %s: %w", rel, err)
		}
	}
}

func join(rel, name string) string {
	if rel == "" {
		return name
	}
	return rel + "/" + name
}

// entry copies one name of the source directory sfd.
func (c *copier) entry(sfd, dfd int, rel, name string, depth int) error {
	p := join(rel, name)
	if c.skip[p] || name == "." || name == ".." || strings.ContainsRune(name, '/') {
		return nil
	}
	var st unix.Stat_t
	if err := unix.Fstatat(sfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil // gone since the listing
		}
		return fmt.Errorf("stat %s: %w", p, err)
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		return c.subdir(sfd, dfd, p, name, &st, depth)
	case unix.S_IFREG:
		return c.file(sfd, dfd, p, name, &st)
	case unix.S_IFLNK:
		target, err := readlinkat(sfd, name)
		if err != nil {
			return fmt.Errorf("readlink %s: %w", p, err)
		}
		if err := unix.Symlinkat(target, dfd, name); err != nil {
			return fmt.Errorf("symlink %s: %w", p, err)
		}
		c.stats.Links++
		return c.meta(sfd, dfd, name, &st)
	case unix.S_IFCHR:
		if st.Rdev != 0 {
			c.stats.Skipped++
			return nil
		}
		// An overlay whiteout: the name is deleted from the layers below.
		if err := unix.Mknodat(dfd, name, unix.S_IFCHR, 0); err != nil {
			return fmt.Errorf("whiteout %s: %w", p, err)
		}
		c.stats.Whiteouts++
		return c.meta(sfd, dfd, name, &st)
	case unix.S_IFIFO:
		if err := unix.Mkfifoat(dfd, name, 0o600); err != nil {
			return fmt.Errorf("mkfifo %s: %w", p, err)
		}
		c.stats.Others++
		return c.meta(sfd, dfd, name, &st)
	default: // sockets and block devices
		c.stats.Skipped++
		return nil
	}
}

func (c *copier) subdir(sfd, dfd int, p, name string, st *unix.Stat_t, depth int) error {
	if err := unix.Mkdirat(dfd, name, 0o700); err != nil {
		return fmt.Errorf("mkdir %s: %w", p, err)
	}
	s, err := unix.Openat(sfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", p, err)
	}
	defer unix.Close(s)
	if err := sameInode(s, st); err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	d, err := unix.Openat(dfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", p, err)
	}
	defer unix.Close(d)
	c.stats.Dirs++
	if err := c.dir(s, d, p, depth+1); err != nil {
		return err
	}
	// Times last: the entries made inside changed them.
	return c.metaFd(d, st, s)
}

func (c *copier) file(sfd, dfd int, p, name string, st *unix.Stat_t) error {
	key := [2]uint64{st.Dev, st.Ino}
	if st.Nlink > 1 {
		if first, ok := c.links[key]; ok {
			if err := unix.Linkat(c.dstRoot, first, dfd, name, 0); err != nil {
				return fmt.Errorf("link %s: %w", p, err)
			}
			return nil
		}
	}
	s, err := unix.Openat(sfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOATIME, 0)
	if errors.Is(err, unix.EPERM) {
		s, err = unix.Openat(sfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	}
	if err != nil {
		return fmt.Errorf("open %s: %w", p, err)
	}
	defer unix.Close(s)
	if err := sameInode(s, st); err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	d, err := unix.Openat(dfd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("create %s: %w", p, err)
	}
	defer unix.Close(d)
	n, err := c.data(s, d, st.Size)
	if err != nil {
		return fmt.Errorf("copy %s: %w", p, err)
	}
	c.stats.Files++
	c.stats.Bytes += n
	if st.Nlink > 1 {
		c.links[key] = p
	}
	return c.metaFd(d, st, s)
}

// data copies a regular file's data extents, a clone where the file
// system shares blocks, and leaves its holes as holes.
func (c *copier) data(s, d int, size int64) (int64, error) {
	if size == 0 {
		return 0, nil
	}
	if c.clone {
		err := unix.IoctlFileClone(d, s)
		if err == nil {
			return size, nil
		}
		c.clone = false
	}
	var copied int64
	off := int64(0)
	for off < size {
		start, err := unix.Seek(s, off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			break // only a hole remains
		}
		if err != nil {
			return copied, err
		}
		end, err := unix.Seek(s, start, unix.SEEK_HOLE)
		if err != nil {
			return copied, err
		}
		end = min(end, size)
		if err := copyRange(s, d, start, end-start); err != nil {
			return copied, err
		}
		copied += end - start
		off = end
	}
	return copied, unix.Ftruncate(d, size)
}

// copyRange copies n bytes at off from s to the same offset of d, in the
// kernel where it can.
func copyRange(s, d int, off, n int64) error {
	for n > 0 {
		so, do := off, off
		k, err := unix.CopyFileRange(s, &so, d, &do, int(min(n, 1<<30)), 0)
		if errors.Is(err, unix.EXDEV) || errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOSYS) {
			return copyRead(s, d, off, n)
		}
		if err != nil {
			return err
		}
		if k == 0 {
			return nil // the file shrank: nothing is left to copy
		}
		off += int64(k)
		n -= int64(k)
	}
	return nil
}

func copyRead(s, d int, off, n int64) error {
	buf := make([]byte, 1<<20)
	for n > 0 {
		k, err := unix.Pread(s, buf[:min(int64(len(buf)), n)], off)
		if err != nil {
			return err
		}
		if k == 0 {
			return nil
		}
		if _, err := unix.Pwrite(d, buf[:k], off); err != nil {
			return err
		}
		off += int64(k)
		n -= int64(k)
	}
	return nil
}

// sameInode checks that the descriptor opened is the entry that was
// looked at.
func sameInode(fd int, st *unix.Stat_t) error {
	var got unix.Stat_t
	if err := unix.Fstat(fd, &got); err != nil {
		return err
	}
	if got.Dev != st.Dev || got.Ino != st.Ino {
		return errors.New("replaced while being copied")
	}
	return nil
}

// metaFd gives the open destination d the source's owner, mode,
// extended attributes and times (s is the open source).
func (c *copier) metaFd(d int, st *unix.Stat_t, s int) error {
	if err := unix.Fchown(d, int(st.Uid), int(st.Gid)); err != nil {
		return err
	}
	// After the owner: chown clears set-id bits.
	if err := unix.Fchmod(d, st.Mode&0o7777); err != nil {
		return err
	}
	if err := copyXattrs(fdXattrs{s}, fdXattrs{d}); err != nil {
		return err
	}
	return unix.UtimesNanoAt(unix.AT_FDCWD, fdPath(d), []unix.Timespec{st.Atim, st.Mtim}, 0)
}

// meta does what metaFd does for a name that is not opened (a link, a
// whiteout, a FIFO) in the source directory sfd and the destination dfd.
func (c *copier) meta(sfd, dfd int, name string, st *unix.Stat_t) error {
	if err := unix.Fchownat(dfd, name, int(st.Uid), int(st.Gid), unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFLNK {
		if err := unix.Fchmodat(dfd, name, st.Mode&0o7777, 0); err != nil {
			return err
		}
	}
	// The directory is resolved through this process's descriptor, the
	// name itself is never followed.
	if err := copyXattrs(pathXattrs(fdPath(sfd)+"/"+name), pathXattrs(fdPath(dfd)+"/"+name)); err != nil {
		return err
	}
	return unix.UtimesNanoAt(dfd, name, []unix.Timespec{st.Atim, st.Mtim}, unix.AT_SYMLINK_NOFOLLOW)
}

func fdPath(fd int) string { return "/proc/self/fd/" + strconv.Itoa(fd) }

// keepXattr says which extended attributes a layer keeps: the overlay's
// own only where they mean something in a lower layer (an opaque
// directory, a whiteout, a renamed directory), every other namespace.
func keepXattr(name string) bool {
	if rest, ok := strings.CutPrefix(name, "trusted.overlay."); ok {
		return rest == "opaque" || rest == "whiteout" || rest == "redirect"
	}
	return true
}

// xattrs reads and writes one file's extended attributes.
type xattrs interface {
	list(buf []byte) (int, error)
	get(name string, buf []byte) (int, error)
	set(name string, val []byte) error
}

// fdXattrs are an open file's.
type fdXattrs struct{ fd int }

func (x fdXattrs) list(buf []byte) (int, error)             { return unix.Flistxattr(x.fd, buf) }
func (x fdXattrs) get(name string, buf []byte) (int, error) { return unix.Fgetxattr(x.fd, name, buf) }
func (x fdXattrs) set(name string, val []byte) error        { return unix.Fsetxattr(x.fd, name, val, 0) }

// pathXattrs are those of the file at a path, whose last element is not
// followed.
type pathXattrs string

func (x pathXattrs) list(buf []byte) (int, error) { return unix.Llistxattr(string(x), buf) }
func (x pathXattrs) get(name string, buf []byte) (int, error) {
	return unix.Lgetxattr(string(x), name, buf)
}
func (x pathXattrs) set(name string, val []byte) error {
	return unix.Lsetxattr(string(x), name, val, 0)
}

// copyXattrs copies the kept extended attributes of src to dst. The
// kernel bounds a list and a value at 64 KiB each.
func copyXattrs(src, dst xattrs) error {
	buf := make([]byte, 64<<10)
	sz, err := src.list(buf)
	if err != nil {
		if errors.Is(err, unix.ENOTSUP) || errors.Is(err, unix.EPERM) {
			return nil
		}
		return fmt.Errorf("list xattrs: %w", err)
	}
	names := string(buf[:sz])
	val := make([]byte, 64<<10)
	for name := range strings.SplitSeq(names, "\x00") {
		if name == "" || !keepXattr(name) {
			continue
		}
		n, err := src.get(name, val)
		if err != nil {
			if errors.Is(err, unix.ENODATA) {
				continue
			}
			return fmt.Errorf("xattr %s: %w", name, err)
		}
		if err := dst.set(name, val[:n]); err != nil {
			return fmt.Errorf("xattr %s: %w", name, err)
		}
	}
	return nil
}

func readlinkat(dfd int, name string) (string, error) {
	buf := make([]byte, 4096)
	n, err := unix.Readlinkat(dfd, name, buf)
	if err != nil {
		return "", err
	}
	if n >= len(buf) {
		return "", errors.New("link target too long")
	}
	return string(buf[:n]), nil
}
