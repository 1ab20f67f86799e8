// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package oci

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/corral-dev/corral/internal/safefile"
)

// overlayOptions is the mount data of an overlay of lowers (top first)
// under a writable upper, and whether it fits in one mount(2) call: a
// stack named by whole DiffIDs can exceed a page.
func overlayOptions(lowers []string, upper, work string) (string, bool) {
	opts := "lowerdir=" + strings.Join(lowers, ":") + ",upperdir=" + upper + ",workdir=" + work
	return opts, len(opts) <= 4000
}

// mountOverlay stacks lowers (top first) under a writable upper at target.
func mountOverlay(lowers []string, upper, work, target string) error {
	if opts, ok := overlayOptions(lowers, upper, work); ok {
		if err := unix.Mount("overlay", target, "overlay", 0, opts); err != nil {
			return fmt.Errorf("mount overlay: %w", err)
		}
		return nil
	}
	mnt, err := detachedOverlay(lowers, upper, work)
	if err != nil {
		return err
	}
	defer mnt.Close()
	if err := unix.MoveMount(int(mnt.Fd()), "", unix.AT_FDCWD, target, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("mount overlay of %d layers: %w", len(lowers), err)
	}
	return nil
}

// detachedOverlay makes the overlay of lowers (top first) under upper
// with the new mount API and returns its root, attached nowhere: no mount
// namespace lists it, and it is unmounted when the descriptor closes. The
// kernel takes at most 255 bytes in one fsconfig value, so a longer stack
// is given one layer at a time ("lowerdir+", Linux 6.8).
func detachedOverlay(lowers []string, upper, work string) (*os.File, error) {
	fsfd, err := unix.Fsopen("overlay", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("mount overlay of %d layers: %w", len(lowers), err)
	}
	defer unix.Close(fsfd)
	if joined := strings.Join(lowers, ":"); len(joined) < 256 {
		if err := unix.FsconfigSetString(fsfd, "lowerdir", joined); err != nil {
			return nil, fmt.Errorf("mount overlay of %d layers: %w%s", len(lowers), err, fsLog(fsfd))
		}
	} else {
		for _, l := range lowers {
			if err := unix.FsconfigSetString(fsfd, "lowerdir+", l); err != nil {
				return nil, fmt.Errorf("mount overlay of %d layers (this kernel takes at most about %d): %w%s", len(lowers), 4000/(len(l)+1), err, fsLog(fsfd))
			}
		}
	}
	for _, kv := range [][2]string{{"upperdir", upper}, {"workdir", work}} {
		if err := unix.FsconfigSetString(fsfd, kv[0], kv[1]); err != nil {
			return nil, fmt.Errorf("mount overlay: %s: %w%s", kv[0], err, fsLog(fsfd))
		}
	}
	if err := unix.FsconfigCreate(fsfd); err != nil {
		return nil, fmt.Errorf("mount overlay of %d layers: %w%s", len(lowers), err, fsLog(fsfd))
	}
	mfd, err := unix.Fsmount(fsfd, unix.FSMOUNT_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("mount overlay of %d layers: %w", len(lowers), err)
	}
	return os.NewFile(uintptr(mfd), "overlay"), nil
}

// fsLog is what the kernel said about a failed file system context
// (": " and its messages), or "".
func fsLog(fsfd int) string {
	var out []string
	buf := make([]byte, 1024)
	for range 8 {
		n, err := unix.Read(fsfd, buf)
		if err != nil || n <= 0 {
			break
		}
		out = append(out, strings.TrimSpace(string(buf[:n])))
	}
	if len(out) == 0 {
		return ""
	}
	return ": " + strings.Join(out, "; ")
}

// mountRunDir mounts a small tmpfs at dir unless one is there already. It
// stays mounted when the server stops: running sandboxes keep their
// bundles in it.
func mountRunDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	var st, parent unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return err
	}
	if err := unix.Statfs(filepath.Dir(dir), &parent); err != nil {
		return err
	}
	if st.Type == unix.TMPFS_MAGIC && st.Fsid != parent.Fsid {
		return nil
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0700,size=256m"); err != nil {
		return fmt.Errorf("mount the runtime tmpfs: %w", err)
	}
	return nil
}

// UnmountRunDir removes the runtime tmpfs of a driver root; for tests and
// uninstalls, once no sandbox runs.
func UnmountRunDir(root string) error { return unmount(runDir(root)) }

// unmount detaches a mount point; one that is not mounted is fine.
func unmount(target string) error {
	err := unix.Unmount(target, unix.MNT_DETACH)
	if err == nil || errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT) {
		return nil
	}
	return fmt.Errorf("unmount %s: %w", target, err)
}

// hostSystemDirs are the host directories the "host" image shows; each is
// overlaid read-only below the sandbox's own writable layer.
func hostSystemDirs() []string {
	return []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}
}

// hostEtcFiles are the files of the host's /etc the "host" image copies:
// what programs need to run, and nothing secret (no shadow, no keys, no
// credentials, no machine identity).
func hostEtcFiles() []string {
	return []string{
		"passwd", "group", "nsswitch.conf", "ld.so.conf", "ld.so.conf.d", "ld.so.cache", "alternatives",
		"os-release", "debian_version", "ssl/certs", "ca-certificates.conf", "bash.bashrc", "profile",
		"profile.d", "environment", "localtime", "timezone", "mime.types", "protocols", "services",
		"inputrc", "login.defs", "shells", "magic", "ethertypes", "gai.conf", "host.conf", "python3",
		"python3.11", "perl", "vim", "terminfo", "locale.alias", "locale.gen", "default/locale",
	}
}

// buildHostSkeleton makes the bottom layer of the "host" image under
// base: the top-level directories of a root filesystem, the host's
// symbolic links for merged-/usr layouts, empty mount points for the
// system directories, and a curated copy of /etc. It returns the layer's
// directory, named by a digest of its content.
//
// A layer is never changed once made: running sandboxes have it as the
// lowest layer of their root overlay, and a lower layer that changes under
// a mounted overlay is undefined behaviour (in practice the sandbox's root
// directory lists empty and its entrypoint may fail to start). A server
// that starts with the same host files reuses the layer; one that finds
// them changed makes another beside it, and sweepHostSkeletons removes
// the old once no sandbox uses it.
func buildHostSkeleton(base string) (string, error) {
	if err := os.MkdirAll(base, 0o755); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(base, skeletonTemp)
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp) // after a rename, nothing is left there
	if err := fillHostSkeleton(tmp); err != nil {
		return "", err
	}
	sum, err := treeDigest(tmp)
	if err != nil {
		return "", err
	}
	dir := filepath.Join(base, sum)
	if err := os.Rename(tmp, dir); err != nil {
		if fi, serr := os.Stat(dir); serr == nil && fi.IsDir() {
			return dir, nil // the same content, made before
		}
		return "", err
	}
	return dir, nil
}

// skeletonTemp prefixes a host skeleton being built.
const skeletonTemp = ".new-"

// fillHostSkeleton writes the host image's bottom layer into the empty
// directory tmp.
func fillHostSkeleton(tmp string) error {
	if err := os.Chmod(tmp, 0o755); err != nil {
		return err
	}
	for _, d := range []string{"etc", "tmp", "var/tmp", "var/lib", "var/cache", "var/log", "root", "home", "opt", "srv", "mnt",
		"run", "proc", "sys", "dev", "work"} {
		if err := os.MkdirAll(filepath.Join(tmp, d), 0o755); err != nil {
			return err
		}
	}
	for _, d := range []string{"tmp", "var/tmp"} {
		if err := os.Chmod(filepath.Join(tmp, d), 0o1777); err != nil {
			return err
		}
	}
	if err := os.Chmod(filepath.Join(tmp, "root"), 0o700); err != nil {
		return err
	}
	for _, d := range hostSystemDirs() {
		fi, err := os.Lstat(d)
		if err != nil {
			continue
		}
		target := filepath.Join(tmp, d)
		if fi.Mode()&os.ModeSymlink != 0 {
			link, err := os.Readlink(d)
			if err != nil {
				return err
			}
			if err := os.Symlink(link, target); err != nil {
				return err
			}
			continue
		}
		if err := os.MkdirAll(target, 0o755); err != nil {
			return err
		}
	}
	for _, f := range hostEtcFiles() {
		if err := copyTree(filepath.Join("/etc", f), filepath.Join(tmp, "etc", f)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("host image: /etc/%s: %w", f, err)
		}
	}
	return nil
}

// treeDigest names a directory tree by its content: every entry's path,
// mode and symbolic link target or file content, in lexical order.
func treeDigest(dir string) (string, error) {
	h := sha256.New()
	io.WriteString(h, "corral host skeleton 1\n")
	err := filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		fi, err := e.Info()
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%q %o ", rel, fi.Mode())
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			link, err := os.Readlink(path)
			if err != nil {
				return err
			}
			fmt.Fprintf(h, "%q", link)
		case fi.Mode().IsRegular():
			f, err := os.Open(path)
			if err != nil {
				return err
			}
			_, err = io.Copy(h, f)
			f.Close()
			if err != nil {
				return err
			}
		}
		io.WriteString(h, "\n")
		return nil
	})
	if err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)[:16]), nil
}

// sweepHostSkeletons removes the host skeletons under base other than
// keep that no sandbox's bundle names (they are in no running overlay),
// and legacy, the one directory every sandbox shared before skeletons
// were named by their content, once no bundle names it either. It
// returns what it could not remove.
func sweepHostSkeletons(base, keep, legacy, bundles string) error {
	configs, _ := filepath.Glob(filepath.Join(bundles, "*", "config.json"))
	inUse := func(dir string) bool {
		for _, c := range configs {
			b, err := os.ReadFile(c)
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				return true // unknown: keep it
			}
			// A skeleton is the lowest layer: its path ends the lowerdir list.
			if bytes.Contains(b, []byte(dir+",")) || bytes.Contains(b, []byte(dir+":")) {
				return true
			}
		}
		return false
	}
	candidates := []string{legacy}
	entries, err := os.ReadDir(base)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	for _, e := range entries {
		dir := filepath.Join(base, e.Name())
		if dir == keep {
			continue
		}
		if strings.HasPrefix(e.Name(), skeletonTemp) {
			// Another instance may be building it now (tests run two on one
			// root); one an hour old was left by a crash.
			if fi, err := e.Info(); err != nil || time.Since(fi.ModTime()) < time.Hour {
				continue
			}
		}
		candidates = append(candidates, dir)
	}
	var errs []error
	for _, dir := range candidates {
		if _, err := os.Lstat(dir); err != nil || inUse(dir) {
			continue
		}
		if err := os.RemoveAll(dir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// copyTree copies a file, symbolic link or directory tree.
func copyTree(src, dst string) error {
	fi, err := os.Lstat(src)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	switch {
	case fi.Mode()&os.ModeSymlink != 0:
		link, err := os.Readlink(src)
		if err != nil {
			return err
		}
		return os.Symlink(link, dst)
	case fi.IsDir():
		if err := os.MkdirAll(dst, fi.Mode().Perm()); err != nil {
			return err
		}
		entries, err := os.ReadDir(src)
		if err != nil {
			return err
		}
		for _, e := range entries {
			if err := copyTree(filepath.Join(src, e.Name()), filepath.Join(dst, e.Name())); err != nil {
				return err
			}
		}
		return nil
	case fi.Mode().IsRegular():
		in, err := os.Open(src)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, fi.Mode().Perm())
		if err != nil {
			return err
		}
		_, err = io.Copy(out, in)
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		return err
	}
	return nil
}

// resolveUser turns an image's User ("name", "uid", "uid:gid",
// "name:group") into numbers using the passwd and group files of the root
// file system open at root.
func resolveUser(root *os.File, spec string) (uid, gid uint32, err error) {
	if spec == "" {
		return 0, 0, nil
	}
	userPart, groupPart, hasGroup := strings.Cut(spec, ":")
	u, g, ok := lookupColonFile(root, "/etc/passwd", userPart, 2, 3)
	if !ok {
		n, err := strconv.ParseUint(userPart, 10, 32)
		if err != nil {
			return 0, 0, fmt.Errorf("image user %q: not in the image's /etc/passwd", userPart)
		}
		u, g = uint32(n), uint32(n)
	}
	if hasGroup {
		if gg, _, ok := lookupColonFile(root, "/etc/group", groupPart, 2, 2); ok {
			g = gg
		} else if n, err := strconv.ParseUint(groupPart, 10, 32); err == nil {
			g = uint32(n)
		} else {
			return 0, 0, fmt.Errorf("image group %q: not in the image's /etc/group", groupPart)
		}
	}
	return u, g, nil
}

// lookupColonFile finds name (or a numeric id in field a) in a
// passwd-style file of the image and returns fields a and b as numbers.
// The file is the image's: its links resolve inside the root file
// system, only a regular file is read, and only its first 4 MiB.
func lookupColonFile(root *os.File, name, key string, a, b int) (uint32, uint32, bool) {
	f, _, err := safefile.OpenInRootAt(root, name)
	if err != nil {
		return 0, 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(io.LimitReader(f, 4<<20))
	for sc.Scan() {
		fields := strings.Split(sc.Text(), ":")
		if len(fields) <= max(a, b) || fields[0] != key && fields[a] != key {
			continue
		}
		x, err1 := strconv.ParseUint(fields[a], 10, 32)
		y, err2 := strconv.ParseUint(fields[b], 10, 32)
		if err1 == nil && err2 == nil {
			return uint32(x), uint32(y), true
		}
	}
	return 0, 0, false
}
