// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package oci

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/errdefs"
)

// A sandbox with a disk limit keeps its writable layer on a file system
// of its own of that size: an ext4 image beside it, on a loop device that
// goes with the mount. Writes past the limit fail in the sandbox (ENOSPC)
// and nowhere else; without a limit the layer is a directory of the data
// directory's file system, which every sandbox and the server's database
// share (docs/runtime-oci.md).

// mountDisk makes and mounts the size-limited file system at dir/fs and
// returns the upper and work directories on it.
func mountDisk(ctx context.Context, dir string, size int64) (upper, work string, err error) {
	mnt := filepath.Join(dir, "fs")
	if err := os.Mkdir(mnt, 0o700); err != nil {
		return "", "", err
	}
	if err := makeFS(ctx, filepath.Join(dir, "fs.img"), mnt, size); err != nil {
		return "", "", err
	}
	upper, work = filepath.Join(mnt, "upper"), filepath.Join(mnt, "work")
	for _, d := range []string{upper, work} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return "", "", err
		}
	}
	return upper, work, nil
}

// makeFS makes an ext4 file system of size in the new image file img and
// mounts it at the directory mnt.
func makeFS(ctx context.Context, img, mnt string, size int64) error {
	f, err := os.OpenFile(img, os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	err = f.Truncate(size)
	f.Close()
	if err != nil {
		return fmt.Errorf("disk image: %w", err)
	}
	// No reserved blocks (the sandbox's root may use them all), inode
	// tables made lazily: a few tens of milliseconds for any size.
	out, err := exec.CommandContext(ctx, "mkfs.ext4", "-q", "-F", "-m", "0", "-E", "lazy_itable_init=1,lazy_journal_init=1", img).CombinedOutput()
	if err != nil {
		if errors.Is(err, exec.ErrNotFound) {
			return errdefs.New(errdefs.ErrNotImplemented, api.CodeSandboxDiskLimitUnsupported,
				"this server cannot limit a sandbox's disk or a volume's size: mkfs.ext4 (e2fsprogs) is not installed")
		}
		return fmt.Errorf("mkfs.ext4: %v: %s", err, out)
	}
	return mountFS(img, mnt)
}

// remountFS mounts again, at mnt, the file system image img that was
// mounted before. An image still bound to a loop device (its file system
// still mounted elsewhere, as in a sandbox whose mount namespace is going
// away) is mounted from that device, which is the same file system:
// mounting the image a second time through another device would show
// what it held on disk, not what its live mount wrote since, and two
// writers would corrupt it.
func remountFS(img, mnt string) error {
	if dev := boundLoop(img); dev != "" {
		if err := unix.Mount(dev, mnt, "ext4", unix.MS_NOSUID|unix.MS_NODEV, ""); err == nil {
			return nil
		}
		// The device let go of the image meanwhile: bind a new one.
	}
	return mountFS(img, mnt)
}

// mountFS mounts the file system image img at mnt.
func mountFS(img, mnt string) error {
	loop, held, err := attachLoop(img)
	if err != nil {
		return err
	}
	// The device clears itself on its last close: after the mount, when
	// the mount goes; without one, as this returns.
	err = unix.Mount(loop, mnt, "ext4", unix.MS_NOSUID|unix.MS_NODEV, "")
	held.Close()
	if err != nil {
		return fmt.Errorf("mount the file system of %s: %w", filepath.Base(filepath.Dir(img)), err)
	}
	return nil
}

// boundLoop is the loop device img is bound to, or "".
func boundLoop(img string) string {
	if real, err := filepath.EvalSymlinks(img); err == nil {
		img = real // the kernel names the file by its resolved path
	}
	files, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	for _, f := range files {
		if b, err := os.ReadFile(f); err == nil && strings.TrimSpace(string(b)) == img {
			return "/dev/" + filepath.Base(filepath.Dir(filepath.Dir(f)))
		}
	}
	return ""
}

// isMountPoint reports whether dir is mounted on (its device differs from
// its parent's).
func isMountPoint(dir string) bool {
	var st, parent unix.Stat_t
	if unix.Lstat(dir, &st) != nil || unix.Lstat(filepath.Dir(dir), &parent) != nil {
		return false
	}
	return st.Dev != parent.Dev
}

// attachLoop binds a free loop device to img, with autoclear, and returns
// it with the open device that keeps it bound until closed.
func attachLoop(img string) (string, *os.File, error) {
	ctl, err := os.OpenFile("/dev/loop-control", os.O_RDWR, 0)
	if err != nil {
		return "", nil, fmt.Errorf("loop devices: %w", err)
	}
	defer ctl.Close()
	backing, err := os.OpenFile(img, os.O_RDWR, 0)
	if err != nil {
		return "", nil, err
	}
	defer backing.Close()
	for range 16 {
		n, err := unix.IoctlRetInt(int(ctl.Fd()), unix.LOOP_CTL_GET_FREE)
		if err != nil {
			return "", nil, fmt.Errorf("a free loop device: %w", err)
		}
		dev := "/dev/loop" + strconv.Itoa(n)
		lf, err := os.OpenFile(dev, os.O_RDWR, 0)
		if err != nil {
			return "", nil, err
		}
		cfg := unix.LoopConfig{Fd: uint32(backing.Fd())}
		cfg.Info.Flags = unix.LO_FLAGS_AUTOCLEAR
		err = unix.IoctlLoopConfigure(int(lf.Fd()), &cfg)
		if errors.Is(err, unix.EBUSY) {
			lf.Close()
			continue // another process took it first
		}
		if err != nil {
			lf.Close()
			return "", nil, fmt.Errorf("configure %s: %w", dev, err)
		}
		return dev, lf, nil
	}
	return "", nil, errors.New("no loop device stayed free")
}
