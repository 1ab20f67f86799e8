// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package imagestore

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Whiteout markers of image layers (the OCI and Docker layer format).
const (
	whiteoutPrefix = ".wh."
	whiteoutOpaque = ".wh..wh..opq"
)

// unpack extracts a layer tar into dir (which must exist and be empty) in
// the form overlayfs stacks: a deleted file becomes a 0/0 character
// device, an opaque directory gets the trusted.overlay.opaque xattr. It
// refuses entries that escape dir, through ".." or through a symbolic
// link, and returns the sha256 of the stream it read (the layer's DiffID).
func unpack(r io.Reader, dir string) (string, int64, error) {
	h := sha256.New()
	tr := tar.NewReader(io.TeeReader(r, h))
	var size int64
	type dirTimes struct {
		path  string
		mtime time.Time
	}
	var dirs []dirTimes
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return "", 0, fmt.Errorf("read layer: %w", err)
		}
		name, err := cleanName(hdr.Name)
		if err != nil {
			return "", 0, err
		}
		if name == "" {
			continue // the root itself
		}
		parent, base := path.Split(name)
		if err := checkParents(dir, parent); err != nil {
			return "", 0, err
		}
		target := filepath.Join(dir, name)
		if base == whiteoutOpaque {
			if err := unix.Setxattr(filepath.Join(dir, parent), "trusted.overlay.opaque", []byte("y"), 0); err != nil {
				return "", 0, fmt.Errorf("opaque whiteout %s: %w", name, err)
			}
			continue
		}
		if gone, ok := strings.CutPrefix(base, whiteoutPrefix); ok {
			if err := unix.Mknod(filepath.Join(dir, parent, gone), unix.S_IFCHR, 0); err != nil && !errors.Is(err, os.ErrExist) {
				return "", 0, fmt.Errorf("whiteout %s: %w", name, err)
			}
			continue
		}
		// A later entry replaces an earlier one with the same name, except
		// that a directory stays a directory.
		if fi, err := os.Lstat(target); err == nil && !(fi.IsDir() && hdr.Typeflag == tar.TypeDir) {
			if err := os.RemoveAll(target); err != nil {
				return "", 0, err
			}
		}
		mode := os.FileMode(hdr.Mode & 0o7777)
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := os.Mkdir(target, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
				return "", 0, err
			}
			dirs = append(dirs, dirTimes{target, hdr.ModTime})
		case tar.TypeReg: // the reader reports the old TypeRegA as TypeReg
			f, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
			if err != nil {
				return "", 0, err
			}
			n, err := io.Copy(f, tr)
			size += n
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return "", 0, fmt.Errorf("write %s: %w", name, err)
			}
		case tar.TypeSymlink:
			if err := os.Symlink(hdr.Linkname, target); err != nil {
				return "", 0, err
			}
		case tar.TypeLink:
			src, err := cleanName(hdr.Linkname)
			if err != nil || src == "" {
				return "", 0, fmt.Errorf("layer entry %q: bad hard link target %q", hdr.Name, hdr.Linkname)
			}
			srcParent, _ := path.Split(src)
			if err := checkParents(dir, srcParent); err != nil {
				return "", 0, err
			}
			if err := os.Link(filepath.Join(dir, src), target); err != nil {
				return "", 0, err
			}
			continue // a link shares its target's metadata
		case tar.TypeFifo:
			if err := unix.Mkfifo(target, uint32(mode)); err != nil {
				return "", 0, err
			}
		case tar.TypeChar, tar.TypeBlock:
			// Device nodes come from the runtime's /dev, not from images.
			continue
		default:
			continue
		}
		if err := os.Lchown(target, hdr.Uid, hdr.Gid); err != nil {
			return "", 0, fmt.Errorf("chown %s: %w", name, err)
		}
		for k, v := range hdr.PAXRecords {
			if attr, ok := strings.CutPrefix(k, "SCHILY.xattr."); ok && safeXattr(attr) {
				_ = unix.Lsetxattr(target, attr, []byte(v), 0)
			}
		}
		if hdr.Typeflag != tar.TypeSymlink {
			// chown clears set-id bits, so the mode comes after it.
			if err := os.Chmod(target, toFileMode(hdr.Mode)); err != nil {
				return "", 0, err
			}
		}
		ts := []unix.Timespec{unix.NsecToTimespec(hdr.ModTime.UnixNano()), unix.NsecToTimespec(hdr.ModTime.UnixNano())}
		_ = unix.UtimesNanoAt(unix.AT_FDCWD, target, ts, unix.AT_SYMLINK_NOFOLLOW)
	}
	// Directory times last: creating their entries changed them.
	for i := len(dirs) - 1; i >= 0; i-- {
		ts := []unix.Timespec{unix.NsecToTimespec(dirs[i].mtime.UnixNano()), unix.NsecToTimespec(dirs[i].mtime.UnixNano())}
		_ = unix.UtimesNanoAt(unix.AT_FDCWD, dirs[i].path, ts, unix.AT_SYMLINK_NOFOLLOW)
	}
	// Drain what follows the tar's end, so the digest covers the stream.
	if _, err := io.Copy(io.Discard, io.TeeReader(r, h)); err != nil {
		return "", 0, err
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), size, nil
}

func toFileMode(m int64) os.FileMode {
	mode := os.FileMode(m & 0o777)
	if m&0o4000 != 0 {
		mode |= os.ModeSetuid
	}
	if m&0o2000 != 0 {
		mode |= os.ModeSetgid
	}
	if m&0o1000 != 0 {
		mode |= os.ModeSticky
	}
	return mode
}

// cleanName normalizes a tar entry name to a relative path, refusing one
// that leaves the layer.
func cleanName(n string) (string, error) {
	c := path.Clean("/" + n)
	if strings.Contains(n, "\x00") || c != "/" && strings.HasPrefix(path.Clean(n), "..") {
		return "", fmt.Errorf("layer entry %q escapes the layer", n)
	}
	return strings.TrimPrefix(c, "/"), nil
}

// checkParents refuses an entry whose parent directories are not plain
// directories inside dir: writing through a symbolic link planted by an
// earlier entry could reach files outside the layer.
func checkParents(dir, parent string) error {
	cur := dir
	for _, part := range strings.Split(strings.Trim(parent, "/"), "/") {
		if part == "" {
			continue
		}
		cur = filepath.Join(cur, part)
		fi, err := os.Lstat(cur)
		if errors.Is(err, os.ErrNotExist) {
			// Parents missing from the tar are created as directories.
			if err := os.Mkdir(cur, 0o755); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return err
		}
		if !fi.IsDir() {
			return fmt.Errorf("layer entry below %q goes through a non-directory (symbolic link?); refusing it", strings.TrimPrefix(cur, dir))
		}
	}
	return nil
}

// safeXattr reports whether an image may set an extended attribute on a
// file it brings: user attributes and POSIX ACLs. Nothing of overlayfs's
// own (trusted.overlay.*: redirects, opaque markers, metacopy), of other
// trusted or security namespaces (file capabilities, LSM labels, IMA) is
// taken from an image, whose layers this server writes as root.
func safeXattr(name string) bool {
	return strings.HasPrefix(name, "user.") || name == "system.posix_acl_access" || name == "system.posix_acl_default"
}
