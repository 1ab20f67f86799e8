// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package oci

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/corral-dev/corral/internal/safefile"
)

// mountOverlay stacks lowers (top first) under a writable upper at target.
// A stack whose options do not fit in one page (layers are named by their
// whole DiffID) goes through the new mount API, one layer at a time
// ("lowerdir+", Linux 6.8).
func mountOverlay(lowers []string, upper, work, target string) error {
	opts := "lowerdir=" + strings.Join(lowers, ":") + ",upperdir=" + upper + ",workdir=" + work
	if len(opts) <= 4000 {
		if err := unix.Mount("overlay", target, "overlay", 0, opts); err != nil {
			return fmt.Errorf("mount overlay: %w", err)
		}
		return nil
	}
	fsfd, err := unix.Fsopen("overlay", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return fmt.Errorf("mount overlay of %d layers: %w", len(lowers), err)
	}
	defer unix.Close(fsfd)
	for _, l := range lowers {
		if err := unix.FsconfigSetString(fsfd, "lowerdir+", l); err != nil {
			return fmt.Errorf("mount overlay of %d layers (this kernel takes at most about %d): %w", len(lowers), 4000/(len(l)+1), err)
		}
	}
	for k, v := range map[string]string{"upperdir": upper, "workdir": work} {
		if err := unix.FsconfigSetString(fsfd, k, v); err != nil {
			return fmt.Errorf("mount overlay: %s: %w", k, err)
		}
	}
	if err := unix.FsconfigCreate(fsfd); err != nil {
		return fmt.Errorf("mount overlay of %d layers: %w", len(lowers), err)
	}
	mfd, err := unix.Fsmount(fsfd, unix.FSMOUNT_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("mount overlay of %d layers: %w", len(lowers), err)
	}
	defer unix.Close(mfd)
	if err := unix.MoveMount(mfd, "", unix.AT_FDCWD, target, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("mount overlay of %d layers: %w", len(lowers), err)
	}
	return nil
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

// BundleSize bounds what a sandbox's bundle holds (its runtime config,
// console log, status, the egress enforcer's state and log), on a tmpfs
// of its own: whatever the sandbox makes of its console or its enforcer's
// log, it fills only that.
const BundleSize = 8 << 20

// mountBundle mounts the bundle's own tmpfs at dir.
func mountBundle(dir string) error {
	opts := "mode=0700,size=" + strconv.Itoa(BundleSize)
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, opts); err != nil {
		return fmt.Errorf("mount the bundle's tmpfs: %w", err)
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

// buildHostSkeleton makes the bottom layer of the "host" image in dir: the
// top-level directories of a root filesystem, the host's symbolic links
// for merged-/usr layouts, empty mount points for the system directories,
// and a curated copy of /etc. It is rebuilt when the server starts.
func buildHostSkeleton(dir string) error {
	tmp := dir + ".new"
	if err := os.RemoveAll(tmp); err != nil {
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
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	return os.Rename(tmp, dir)
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
// "name:group") into numbers using the root filesystem's passwd and group
// files.
func resolveUser(rootfs, spec string) (uid, gid uint32, err error) {
	if spec == "" {
		return 0, 0, nil
	}
	userPart, groupPart, hasGroup := strings.Cut(spec, ":")
	u, g, ok := lookupColonFile(rootfs, "/etc/passwd", userPart, 2, 3)
	if !ok {
		n, err := strconv.ParseUint(userPart, 10, 32)
		if err != nil {
			return 0, 0, fmt.Errorf("image user %q: not in the image's /etc/passwd", userPart)
		}
		u, g = uint32(n), uint32(n)
	}
	if hasGroup {
		if gg, _, ok := lookupColonFile(rootfs, "/etc/group", groupPart, 2, 2); ok {
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
func lookupColonFile(rootfs, name, key string, a, b int) (uint32, uint32, bool) {
	f, _, err := safefile.OpenInRoot(rootfs, name)
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
