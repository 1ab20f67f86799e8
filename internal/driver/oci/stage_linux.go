// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package oci

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/corral-dev/corral/internal/safefile"
)

// The stage. runc reaches what it mounts in a user namespace (the root,
// the binds, the volumes) by path, as the range's root, so the server
// stages it where every user may pass: hostStage/DIGEST/SANDBOX, each
// directory mode 0711 (names pass, listings do not). /run must let
// others pass and only root write; if it does not, user namespaces are
// refused at start, never staged in a place others can write (a
// temporary directory), where a local user could put links in the way
// of what the server, as root, makes and mounts.
//
// Nothing is reached through a path that could lead elsewhere: each
// directory is made and opened from its parent's descriptor without
// following a link, and must be root's (only then is its mode set); /run
// above it must be root's and writable by root only. Files and mount
// points are made new (O_EXCL) in the directory held, and mounts are
// moved onto their descriptors. Every directory on the way being root's
// and writable by root only, the paths runc is given lead where they led
// when checked.
const hostStage = "/run/corral"

// stageMode is the mode of the stage's directories.
const stageMode = 0o711

// checkStageParent says why the directory holding the stage root (/run)
// cannot hold a stage, if it cannot.
func checkStageParent(root string) error {
	parent := filepath.Dir(root)
	d, err := safefile.OpenDir(parent)
	if err != nil {
		return fmt.Errorf("%s must be a directory, not a link: %w", parent, err)
	}
	defer d.Close()
	if err := checkStageDir(d, true); err != nil {
		return err
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(d.Fd()), &st); err != nil {
		return err
	}
	if st.Mode&0o001 == 0 {
		return fmt.Errorf("%s has mode %#o: a sandbox's root could not pass through it to reach %s (chmod o+x %s)",
			parent, st.Mode&0o7777, root, parent)
	}
	return nil
}

// checkStageDir checks that the directory d is this process's (root's)
// and, if strict, that no one else may write it.
func checkStageDir(d *os.File, strict bool) error {
	var st unix.Stat_t
	if err := unix.Fstat(int(d.Fd()), &st); err != nil {
		return &fs.PathError{Op: "stat", Path: d.Name(), Err: err}
	}
	if int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("stage: %s belongs to uid %d, not to the server's (%d)", d.Name(), st.Uid, os.Geteuid())
	}
	if strict && st.Mode&0o022 != 0 {
		return fmt.Errorf("stage: %s has mode %#o: others than its owner may write it", d.Name(), st.Mode&0o7777)
	}
	return nil
}

// openStage opens the directory dir of the stage whose root is root (dir
// is root or beneath it), making what is missing from root down: each
// directory is made and opened from its parent's descriptor without
// following a link, checked to be root's, and only then given mode 0711.
// root's parent must be root's and writable by root only.
func openStage(root, dir string) (*os.File, error) {
	rel, err := filepath.Rel(root, dir)
	if err != nil || !filepath.IsLocal(rel) {
		return nil, fmt.Errorf("stage: %s is not in %s: %w", dir, root, fs.ErrInvalid)
	}
	cur, err := safefile.OpenDir(filepath.Dir(root))
	if err != nil {
		return nil, fmt.Errorf("stage: %w", err)
	}
	if err := checkStageDir(cur, true); err != nil {
		cur.Close()
		return nil, err
	}
	names := []string{filepath.Base(root)}
	if rel != "." {
		names = append(names, strings.Split(rel, "/")...)
	}
	for _, name := range names {
		next, err := stageSubdir(cur, name)
		cur.Close()
		if err != nil {
			return nil, err
		}
		cur = next
	}
	return cur, nil
}

// stageSubdir makes, if it is missing, and opens the stage directory
// name of dir.
func stageSubdir(dir *os.File, name string) (*os.File, error) {
	path := filepath.Join(dir.Name(), name)
	if err := unix.Mkdirat(int(dir.Fd()), name, stageMode); err != nil && !errors.Is(err, unix.EEXIST) {
		return nil, &fs.PathError{Op: "mkdir", Path: path, Err: err}
	}
	fd, err := unix.Openat(int(dir.Fd()), name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	switch {
	case errors.Is(err, unix.ELOOP), errors.Is(err, unix.ENOTDIR):
		return nil, fmt.Errorf("stage: %s is a link or not a directory: %w", path, safefile.ErrLink)
	case err != nil:
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	f := os.NewFile(uintptr(fd), path)
	if err := checkStageDir(f, false); err != nil {
		f.Close()
		return nil, err
	}
	if err := unix.Fchmod(fd, stageMode); err != nil {
		f.Close()
		return nil, &fs.PathError{Op: "chmod", Path: path, Err: err}
	}
	return f, nil
}

// stageName is the stage directory's name of the server of data
// directory root.
func stageName(root string) string {
	sum := sha256.Sum256([]byte(root))
	return hex.EncodeToString(sum[:8])
}

// stageDir is where sandbox id's mount points are staged.
func (d *Driver) stageDir(id string) string { return filepath.Join(d.stage, id) }

// makeStage makes the stage directory dir and those above it.
func makeStage(dir string) error {
	f, err := openStage(hostStage, dir)
	if err != nil {
		return err
	}
	return f.Close()
}

// idmappedBind mounts at target, a new directory of the stage, an
// idmapped copy of the directory src.
func idmappedBind(src, target string, userns *os.File) error {
	dir, err := os.OpenFile(src, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer dir.Close()
	return stageIdmapped(dir, target, userns)
}

// stageIdmapped mounts at target, a new directory of the stage, an
// idmapped copy of the open directory dir.
func stageIdmapped(dir *os.File, target string, userns *os.File) error {
	return stageIdmappedIn(hostStage, dir, target, userns)
}

func stageIdmappedIn(root string, dir *os.File, target string, userns *os.File) error {
	parent, err := openStage(root, filepath.Dir(target))
	if err != nil {
		return err
	}
	defer parent.Close()
	name := filepath.Base(target)
	if err := unix.Mkdirat(int(parent.Fd()), name, 0o700); err != nil {
		return &fs.PathError{Op: "mkdir", Path: target, Err: err}
	}
	mnt, err := idmapped(dir, userns)
	if err != nil {
		return err
	}
	defer mnt.Close()
	return attachAt(mnt, parent, name)
}

// stageFile bind-mounts the file src at target, a new empty file of the
// stage.
func stageFile(src, target string) error { return stageFileIn(hostStage, src, target) }

func stageFileIn(root, src, target string) error {
	parent, err := openStage(root, filepath.Dir(target))
	if err != nil {
		return err
	}
	defer parent.Close()
	name := filepath.Base(target)
	fd, err := unix.Openat(int(parent.Fd()), name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return &fs.PathError{Op: "create", Path: target, Err: err}
	}
	unix.Close(fd)
	mfd, err := unix.OpenTree(unix.AT_FDCWD, src, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		return fmt.Errorf("stage %s: %w", src, err)
	}
	mnt := os.NewFile(uintptr(mfd), src)
	defer mnt.Close()
	return attachAt(mnt, parent, name)
}

// attach moves the detached mount mnt onto the directory target. In the
// stage, the sandbox's directory (DIGEST/SANDBOX) is reached through the
// stage's checked directories, and what is below it (the directories of
// the sandbox's root, which are not root's) beneath it without following
// a link; elsewhere (the data directory, root's), target's last element
// is not followed if it is a link.
func attach(mnt *os.File, target string) error {
	parent, err := openAttachDir(hostStage, filepath.Dir(target))
	if err != nil {
		return fmt.Errorf("attach %s: %w", target, err)
	}
	defer parent.Close()
	return attachAt(mnt, parent, filepath.Base(target))
}

// openAttachDir opens dir for attach, root the stage's.
func openAttachDir(root, dir string) (*os.File, error) {
	rel, err := filepath.Rel(root, dir)
	if err != nil || !filepath.IsLocal(rel) {
		return safefile.OpenDir(dir)
	}
	parts := strings.SplitN(rel, "/", 3)
	if len(parts) < 2 {
		return nil, fmt.Errorf("stage: %s is no sandbox's: %w", dir, fs.ErrInvalid)
	}
	sandbox, err := openStage(root, filepath.Join(root, parts[0], parts[1]))
	if err != nil || len(parts) == 2 {
		return sandbox, err
	}
	defer sandbox.Close()
	how := unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS}
	for {
		fd, err := unix.Openat2(int(sandbox.Fd()), parts[2], &how)
		switch {
		case errors.Is(err, unix.EINTR), errors.Is(err, unix.EAGAIN):
			continue
		case errors.Is(err, unix.ELOOP), errors.Is(err, unix.EXDEV):
			return nil, fmt.Errorf("stage: %s: %w", dir, safefile.ErrLink)
		case err != nil:
			return nil, &fs.PathError{Op: "open", Path: dir, Err: err}
		}
		return os.NewFile(uintptr(fd), dir), nil
	}
}

// attachAt moves the detached mount mnt onto name, a directory or file
// of the open directory parent that is not a link, and makes it private,
// so that unmounting it later reaches no copy of it.
func attachAt(mnt, parent *os.File, name string) error {
	path := filepath.Join(parent.Name(), name)
	fd, err := unix.Openat(int(parent.Fd()), name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return &fs.PathError{Op: "attach", Path: path, Err: err}
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return &fs.PathError{Op: "attach", Path: path, Err: err}
	}
	if t := st.Mode & unix.S_IFMT; t != unix.S_IFDIR && t != unix.S_IFREG {
		return fmt.Errorf("attach %s: %w", path, safefile.ErrLink)
	}
	if err := unix.MoveMount(int(mnt.Fd()), "", fd, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH); err != nil {
		return fmt.Errorf("attach %s: %w", path, err)
	}
	// The mount just attached, as the directory held now shows it.
	top, err := unix.Openat(int(parent.Fd()), name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return &fs.PathError{Op: "attach", Path: path, Err: err}
	}
	defer unix.Close(top)
	attr := unix.MountAttr{Propagation: unix.MS_PRIVATE}
	if err := unix.MountSetattr(top, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, &attr); err != nil {
		return fmt.Errorf("make %s private: %w", path, err)
	}
	return nil
}
