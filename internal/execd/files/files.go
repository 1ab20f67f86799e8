// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

// Package files owns execd's file and directory operations: path
// expansion, file info with owner names and octal modes, permissions,
// moves, glob search, content replacement, atomic streamed uploads, ranged
// downloads, directory listing, mkdir -p and rm -rf. Errors are errdefs
// kinds with messages for users. execd's HTTP layer is its only caller.
package files

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/errdefs"
)

// Resolve expands a user-given path: "~" and "~/..." become the home
// directory, $VAR and ${VAR} are expanded, a relative path is made
// absolute, and the result is cleaned. An empty path or one with a NUL is
// an error.
func Resolve(p string) (string, error) {
	if p == "" {
		return "", errdefs.New(errdefs.ErrInvalidArgument, api.CodeExecdInvalidPath, "path is empty")
	}
	if strings.ContainsRune(p, 0) {
		return "", errdefs.New(errdefs.ErrInvalidArgument, api.CodeExecdInvalidPath, "path contains a NUL byte")
	}
	home := os.Getenv("HOME")
	if home == "" {
		home = "/"
	}
	if p == "~" {
		p = home
	} else if rest, ok := strings.CutPrefix(p, "~/"); ok {
		p = filepath.Join(home, rest)
	}
	if strings.Contains(p, "$") {
		p = os.Expand(p, os.Getenv)
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeExecdInvalidPath, "path %q: %v", p, err)
	}
	return abs, nil
}

// notFound is the error for a missing path.
func notFound(p string) error {
	return errdefs.Newf(errdefs.ErrNotFound, api.CodeExecdFileNotFound, "%s: no such file or directory", p)
}

// FSError turns a filesystem error on path p into a user-facing error.
func FSError(p string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, fs.ErrNotExist):
		return notFound(p)
	case errors.Is(err, fs.ErrPermission):
		return errdefs.Newf(errdefs.ErrPermissionDenied, api.CodeExecdPermissionDenied, "%s: permission denied", p)
	case errors.Is(err, syscall.ENOTDIR):
		return errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeExecdInvalidPath, "%s: a parent is not a directory", p)
	case errors.Is(err, syscall.EISDIR):
		return errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeExecdInvalidPath, "%s: is a directory", p)
	case errors.Is(err, syscall.ENOSPC):
		return errdefs.Newf(errdefs.ErrResourceExhausted, api.CodeExecdNoSpace, "%s: no space left on device", p)
	case errors.Is(err, syscall.EROFS):
		return errdefs.Newf(errdefs.ErrFailedPrecondition, api.CodeExecdReadOnly, "%s: read-only file system", p)
	}
	return fmt.Errorf("%s: %w", p, err)
}

// names caches uid and gid lookups within one request.
type names struct {
	mu     sync.Mutex
	users  map[uint32]string
	groups map[uint32]string
}

func newNames() *names {
	return &names{users: map[uint32]string{}, groups: map[uint32]string{}}
}

func (n *names) user(uid uint32) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if s, ok := n.users[uid]; ok {
		return s
	}
	s := strconv.FormatUint(uint64(uid), 10)
	if u, err := user.LookupId(s); err == nil {
		s = u.Username
	}
	n.users[uid] = s
	return s
}

func (n *names) group(gid uint32) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if s, ok := n.groups[gid]; ok {
		return s
	}
	s := strconv.FormatUint(uint64(gid), 10)
	if g, err := user.LookupGroupId(s); err == nil {
		s = g.Name
	}
	n.groups[gid] = s
	return s
}

// OctalDigits renders permission bits as octal digits in a decimal
// number, the contract's mode format: 0755 is 755.
func OctalDigits(m fs.FileMode) int {
	bits := uint64(m.Perm())
	if m&fs.ModeSetuid != 0 {
		bits |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		bits |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		bits |= 0o1000
	}
	n, _ := strconv.Atoi(strconv.FormatUint(bits, 8))
	return n
}

// ParseMode reads the contract's mode: octal digits written in decimal.
func ParseMode(n int) (fs.FileMode, error) {
	if n < 0 {
		return 0, errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeExecdInvalidRequestBody, "mode %d: must be octal digits such as 644", n)
	}
	v, err := strconv.ParseUint(strconv.Itoa(n), 8, 32)
	if err != nil || v > 0o7777 {
		return 0, errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeExecdInvalidRequestBody, "mode %d: must be octal digits such as 644 (at most 7777)", n)
	}
	m := fs.FileMode(v & 0o777)
	if v&0o4000 != 0 {
		m |= fs.ModeSetuid
	}
	if v&0o2000 != 0 {
		m |= fs.ModeSetgid
	}
	if v&0o1000 != 0 {
		m |= fs.ModeSticky
	}
	return m, nil
}

func fileType(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return api.FileTypeFile
	case m.IsDir():
		return api.FileTypeDirectory
	case m&fs.ModeSymlink != 0:
		return api.FileTypeSymlink
	}
	return api.FileTypeOther
}

// info builds the FileInfo of path from an lstat.
func info(path string, fi fs.FileInfo, n *names) api.FileInfo {
	out := api.FileInfo{Path: path, Type: fileType(fi.Mode()), Size: fi.Size(), ModifiedAt: fi.ModTime().UTC(), Mode: OctalDigits(fi.Mode())}
	out.CreatedAt = out.ModifiedAt
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		out.Owner, out.Group = n.user(st.Uid), n.group(st.Gid)
		out.CreatedAt = time.Unix(st.Ctim.Sec, st.Ctim.Nsec).UTC()
	}
	var sx unix.Statx_t
	if unix.Statx(unix.AT_FDCWD, path, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_BTIME, &sx) == nil && sx.Mask&unix.STATX_BTIME != 0 {
		out.CreatedAt = time.Unix(sx.Btime.Sec, int64(sx.Btime.Nsec)).UTC()
	}
	return out
}

// Info returns the FileInfo of each path, keyed by the path as given. A
// missing path fails the whole call with ErrNotFound.
func Info(paths []string) (map[string]api.FileInfo, error) {
	out := make(map[string]api.FileInfo, len(paths))
	n := newNames()
	for _, p := range paths {
		abs, err := Resolve(p)
		if err != nil {
			return nil, err
		}
		fi, err := os.Lstat(abs)
		if err != nil {
			return nil, FSError(p, err)
		}
		out[p] = info(abs, fi, n)
	}
	return out, nil
}

// RemoveFiles removes files; missing ones are ignored. A directory is an
// error: directories are removed with RemoveDirs.
func RemoveFiles(paths []string) error {
	for _, p := range paths {
		abs, err := Resolve(p)
		if err != nil {
			return err
		}
		fi, err := os.Lstat(abs)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return FSError(p, err)
		}
		if fi.IsDir() {
			return errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeExecdInvalidPath, "%s is a directory; remove it with DELETE /directories", p)
		}
		if err := os.Remove(abs); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return FSError(p, err)
		}
	}
	return nil
}

// lookupOwner resolves a user name (or numeric uid); -1 when empty.
func lookupOwner(name string) (int, error) {
	if name == "" {
		return -1, nil
	}
	if u, err := user.Lookup(name); err == nil {
		return strconv.Atoi(u.Uid)
	}
	if id, err := strconv.Atoi(name); err == nil && id >= 0 {
		return id, nil
	}
	return 0, errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeExecdInvalidRequestBody, "owner %q: no such user", name)
}

// lookupGroup resolves a group name (or numeric gid); -1 when empty.
func lookupGroup(name string) (int, error) {
	if name == "" {
		return -1, nil
	}
	if g, err := user.LookupGroup(name); err == nil {
		return strconv.Atoi(g.Gid)
	}
	if id, err := strconv.Atoi(name); err == nil && id >= 0 {
		return id, nil
	}
	return 0, errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeExecdInvalidRequestBody, "group %q: no such group", name)
}

// apply sets mode (when mode is not 0) and owner/group (when named) on abs.
func apply(abs, shown string, perm api.Permission) error {
	uid, err := lookupOwner(perm.Owner)
	if err != nil {
		return err
	}
	gid, err := lookupGroup(perm.Group)
	if err != nil {
		return err
	}
	if uid >= 0 || gid >= 0 {
		if err := os.Lchown(abs, uid, gid); err != nil {
			return FSError(shown, err)
		}
	}
	if perm.Mode != 0 {
		m, err := ParseMode(perm.Mode)
		if err != nil {
			return err
		}
		if err := os.Chmod(abs, m); err != nil {
			return FSError(shown, err)
		}
	}
	return nil
}

// Chmod applies a permission to each path. A missing path is an error.
func Chmod(perms map[string]api.Permission) error {
	for p, perm := range perms {
		abs, err := Resolve(p)
		if err != nil {
			return err
		}
		if _, err := os.Lstat(abs); err != nil {
			return FSError(p, err)
		}
		if err := apply(abs, p, perm); err != nil {
			return err
		}
	}
	return nil
}

// Move renames each src to dest, creating dest's parent directories. An
// existing dest is not overwritten.
func Move(items []api.RenameFileItem) error {
	for _, it := range items {
		src, err := Resolve(it.Src)
		if err != nil {
			return err
		}
		dest, err := Resolve(it.Dest)
		if err != nil {
			return err
		}
		if _, err := os.Lstat(src); err != nil {
			return FSError(it.Src, err)
		}
		if _, err := os.Lstat(dest); err == nil {
			return errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeExecdFileExists, "%s already exists", it.Dest)
		}
		if err := os.MkdirAll(filepath.Dir(dest), 0o755); err != nil {
			return FSError(it.Dest, err)
		}
		if err := os.Rename(src, dest); err != nil {
			return FSError(it.Src, err)
		}
	}
	return nil
}

// Mkdirs creates each directory with its parents and applies its
// permission (mode 0 means 755).
func Mkdirs(perms map[string]api.Permission) error {
	for p, perm := range perms {
		abs, err := Resolve(p)
		if err != nil {
			return err
		}
		mode := fs.FileMode(0o755)
		if perm.Mode != 0 {
			if mode, err = ParseMode(perm.Mode); err != nil {
				return err
			}
		}
		if err := os.MkdirAll(abs, mode); err != nil {
			return FSError(p, err)
		}
		if perm.Mode == 0 {
			perm.Mode = 755
		}
		if err := apply(abs, p, perm); err != nil {
			return err
		}
	}
	return nil
}

// RemoveDirs removes each directory and everything below it; missing ones
// are ignored. The root directory is refused.
func RemoveDirs(paths []string) error {
	for _, p := range paths {
		abs, err := Resolve(p)
		if err != nil {
			return err
		}
		if abs == "/" {
			return errdefs.New(errdefs.ErrInvalidArgument, api.CodeExecdInvalidPath, "refusing to remove /")
		}
		if err := os.RemoveAll(abs); err != nil {
			return FSError(p, err)
		}
	}
	return nil
}

// List returns the entries below dir down to depth levels (depth 1: its
// children), in lexical order with each directory's descendants after it.
// Symbolic links are reported, never followed.
func List(dir string, depth int) ([]api.FileInfo, error) {
	abs, err := Resolve(dir)
	if err != nil {
		return nil, err
	}
	fi, err := os.Lstat(abs)
	if err != nil {
		return nil, FSError(dir, err)
	}
	if !fi.IsDir() {
		return nil, errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeExecdInvalidPath, "%s is not a directory", dir)
	}
	out := []api.FileInfo{}
	n := newNames()
	var walk func(string, int) error
	walk = func(d string, level int) error {
		if level > depth {
			return nil
		}
		entries, err := os.ReadDir(d)
		if err != nil {
			return FSError(d, err)
		}
		for _, e := range entries {
			p := filepath.Join(d, e.Name())
			efi, err := os.Lstat(p)
			if err != nil {
				continue // vanished meanwhile
			}
			out = append(out, info(p, efi, n))
			if efi.IsDir() {
				if err := walk(p, level+1); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return out, walk(abs, 1)
}
