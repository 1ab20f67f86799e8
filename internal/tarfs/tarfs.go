// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

// Package tarfs streams a directory tree as a tar archive and unpacks one
// into a directory without letting it reach outside: every name is
// resolved inside an os.Root, so neither "..", absolute names nor links
// planted by the archive itself can escape. Links are recreated as links,
// never followed. Execd uses it for directory uploads and downloads, the
// CLI for `corral cp` of directories.
package tarfs

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Stats count what an archive held.
type Stats struct {
	Files, Dirs, Links int
	Bytes              int64
	// Skipped counts entries of kinds that are not copied (devices, fifos,
	// sockets).
	Skipped int
}

// Write writes the tree rooted at dir to w, names relative to dir. Regular
// files, directories, symlinks and hard links are archived; other kinds
// are counted in Skipped.
func Write(w io.Writer, dir string) (Stats, error) {
	var st Stats
	tw := tar.NewWriter(w)
	inodes := map[[2]uint64]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		if rel == "." {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		link := ""
		if info.Mode()&fs.ModeSymlink != 0 {
			if link, err = os.Readlink(p); err != nil {
				return err
			}
		}
		if !info.Mode().IsRegular() && !info.IsDir() && link == "" {
			st.Skipped++
			return nil
		}
		hdr, err := tar.FileInfoHeader(info, link)
		if err != nil {
			return err
		}
		hdr.Name = filepath.ToSlash(rel)
		hdr.Uname, hdr.Gname = "", ""
		if info.IsDir() {
			hdr.Name += "/"
		}
		if key, nlink, ok := inode(info); ok && info.Mode().IsRegular() && nlink > 1 {
			if first, seen := inodes[key]; seen {
				hdr.Typeflag, hdr.Linkname, hdr.Size = tar.TypeLink, first, 0
			} else {
				inodes[key] = hdr.Name
			}
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		switch {
		case hdr.Typeflag == tar.TypeReg:
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			n, err := io.Copy(tw, f)
			f.Close()
			if err != nil {
				return err
			}
			st.Files++
			st.Bytes += n
		case info.IsDir():
			st.Dirs++
		default:
			st.Links++
		}
		return nil
	})
	if err != nil {
		return st, err
	}
	return st, tw.Close()
}

// ExtractOptions tune Extract.
type ExtractOptions struct {
	// Chown applies the archive's numeric owners (when running as root).
	Chown bool
}

// Extract unpacks a tar stream into dir, which is created if missing.
// Existing files are replaced; existing directories are merged into.
func Extract(r io.Reader, dir string, opts ExtractOptions) (Stats, error) {
	var st Stats
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return st, err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return st, err
	}
	defer root.Close()
	type dirTime struct {
		name string
		t    time.Time
	}
	var dirTimes []dirTime
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return st, fmt.Errorf("read archive: %w: %w", ErrBadArchive, err)
		}
		name, err := cleanName(hdr.Name)
		if err != nil {
			return st, err
		}
		if name == "." {
			continue
		}
		if parent := path.Dir(name); parent != "." {
			if err := root.MkdirAll(parent, 0o755); err != nil {
				return st, entryErr(hdr.Name, err)
			}
		}
		mode := fs.FileMode(hdr.Mode).Perm() | fs.FileMode(hdr.Mode)&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky)
		switch hdr.Typeflag {
		case tar.TypeDir:
			if fi, err := root.Lstat(name); err == nil && !fi.IsDir() {
				if err := root.Remove(name); err != nil {
					return st, entryErr(hdr.Name, err)
				}
			}
			if err := root.MkdirAll(name, 0o755); err != nil {
				return st, entryErr(hdr.Name, err)
			}
			if err := chmod(root, name, mode, hdr); err != nil {
				return st, err
			}
			dirTimes = append(dirTimes, dirTime{name, hdr.ModTime})
			st.Dirs++
		case tar.TypeReg:
			if err := replaceable(root, name); err != nil {
				return st, entryErr(hdr.Name, err)
			}
			f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
			if err != nil {
				return st, entryErr(hdr.Name, err)
			}
			n, err := io.Copy(f, tr)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return st, entryErr(hdr.Name, err)
			}
			if err := chmod(root, name, mode, hdr); err != nil {
				return st, err
			}
			if opts.Chown {
				_ = root.Lchown(name, hdr.Uid, hdr.Gid)
			}
			_ = root.Chtimes(name, hdr.ModTime, hdr.ModTime)
			st.Files++
			st.Bytes += n
		case tar.TypeSymlink:
			if err := replaceable(root, name); err != nil {
				return st, entryErr(hdr.Name, err)
			}
			if strings.ContainsRune(hdr.Linkname, 0) {
				return st, fmt.Errorf("%s: link target contains a NUL byte: %w", hdr.Name, ErrBadArchive)
			}
			if err := root.Symlink(hdr.Linkname, name); err != nil {
				return st, entryErr(hdr.Name, err)
			}
			if opts.Chown {
				_ = root.Lchown(name, hdr.Uid, hdr.Gid)
			}
			st.Links++
		case tar.TypeLink:
			target, err := cleanName(hdr.Linkname)
			if err != nil {
				return st, err
			}
			if err := replaceable(root, name); err != nil {
				return st, entryErr(hdr.Name, err)
			}
			if err := root.Link(target, name); err != nil {
				return st, entryErr(hdr.Name, err)
			}
			st.Links++
		default:
			st.Skipped++
		}
	}
	// Directory times last: writing their entries changed them.
	for i := len(dirTimes) - 1; i >= 0; i-- {
		_ = root.Chtimes(dirTimes[i].name, dirTimes[i].t, dirTimes[i].t)
	}
	return st, nil
}

// cleanName turns an archive name into a clean relative path, refusing
// names that point outside the target.
func cleanName(name string) (string, error) {
	if name == "" || strings.ContainsRune(name, 0) {
		return "", fmt.Errorf("archive entry %q: bad name: %w", name, ErrBadArchive)
	}
	clean := path.Clean(strings.TrimPrefix(name, "./"))
	if path.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, "../") {
		return "", fmt.Errorf("archive entry %q points outside the target directory: %w", name, ErrBadArchive)
	}
	return clean, nil
}

// replaceable removes what is at name unless it is absent; a directory is
// not replaced by a file.
func replaceable(root *os.Root, name string) error {
	fi, err := root.Lstat(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.IsDir() {
		return fmt.Errorf("a directory is in the way: %w", ErrBadArchive)
	}
	return root.Remove(name)
}

func chmod(root *os.Root, name string, mode fs.FileMode, hdr *tar.Header) error {
	if err := root.Chmod(name, mode); err != nil {
		return entryErr(hdr.Name, err)
	}
	return nil
}

// ErrBadArchive marks errors caused by the archive's content (names or
// links that point outside, entries in each other's way, a corrupt
// stream), as opposed to the target filesystem's (no space, read-only).
var ErrBadArchive = errors.New("bad archive")

// entryErr wraps an error unpacking entry name, marking it as the
// archive's fault unless the filesystem itself failed.
func entryErr(name string, err error) error {
	for _, sys := range []error{syscall.ENOSPC, syscall.EDQUOT, syscall.EROFS, syscall.EIO, syscall.EACCES, syscall.EPERM} {
		if errors.Is(err, sys) {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	if errors.Is(err, ErrBadArchive) {
		return fmt.Errorf("%s: %w", name, err)
	}
	return fmt.Errorf("%s: %w: %w", name, ErrBadArchive, err)
}
