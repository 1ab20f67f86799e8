// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package oci

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// User namespaces (Config.UserNamespaces). Each sandbox gets a user
// namespace of its own whose 65536 IDs are a range of the host's no other
// live sandbox has (a slot): root in it is an unprivileged host user that
// owns nothing on the host, and a process that escaped one sandbox's
// namespaces is still a stranger to every other sandbox's processes.
//
// Files keep their in-sandbox owners on disk. The image layers, the
// sandbox's writable layer and its volumes are idmapped mounts for the
// sandbox's range (Linux 6.15+), so nothing is copied or chowned per
// range, a snapshot's layer is the same bytes with or without user
// namespaces, and a layer is shared by every sandbox whatever its range.
// The root overlay is mounted here, over those idmapped layers, by a
// thread whose file system IDs are the range's root (so the overlay's own
// work files map back to on-disk root through the idmapped upper layer),
// then moved into the bundle; runc takes it as the root and the server's
// copy is unmounted once runc has run.
//
// runc makes the user namespace from the range and, in it, the network
// namespace: sysfs can be mounted only by the namespace that owns the
// network namespace. PID 1 then waits at a gate (corral init --gate-fd)
// while the server brings loopback up and starts the egress enforcer in
// that namespace from outside.
const (
	// usernsFirst is the first host ID of slot 0: systemd's range for
	// containers (0x80000 to 0x6FFFFFFF), which no user of the host has.
	usernsFirst = 0x80000
	// usernsSize is the IDs of one sandbox: 0 to 65535 inside.
	usernsSize = 65536
	// usernsSlots is how many ranges fit in systemd's container range.
	usernsSlots = (0x70000000 - usernsFirst) / usernsSize
)

// firstSlot is where the search for a free range starts on the server of
// data directory root.
func firstSlot(root string) int {
	h := fnv.New32a()
	h.Write([]byte(root))
	return int(h.Sum32() % usernsSlots)
}

// slotHost is the first host ID of slot.
func slotHost(slot int) uint32 { return uint32(usernsFirst + slot*usernsSize) }

// idRanges hands out the host ID ranges of sandboxes and keeps, per
// range, a user namespace with its mapping: idmapped mounts need one, and
// making it costs an exec, so it is made once per range and kept.
type idRanges struct {
	binary string
	// first is where the search for a free range starts: servers on
	// other data directories of one host start elsewhere, so their
	// sandboxes rarely share a range.
	first int
	// used is read from the bundles the first time a range is taken.
	load func() (map[int]string, error)

	mu   sync.Mutex
	used map[int]string // slot -> sandbox ID
	ns   map[int]*os.File
}

// take gives sandbox id a range no live sandbox has.
func (r *idRanges) take(id string) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.used == nil {
		used, err := r.load()
		if err != nil {
			return 0, fmt.Errorf("user namespaces: the ranges in use: %w", err)
		}
		r.used = used
	}
	for i := range usernsSlots {
		slot := (r.first + i) % usernsSlots
		if _, ok := r.used[slot]; !ok {
			r.used[slot] = id
			return slot, nil
		}
	}
	return 0, errors.New("user namespaces: every host ID range is in use")
}

// release frees the range of sandbox id.
func (r *idRanges) release(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for slot, owner := range r.used {
		if owner == id {
			delete(r.used, slot)
		}
	}
}

// userns returns a user namespace mapping slot's range (held open by the
// driver for its lifetime).
func (r *idRanges) userns(slot int) (*os.File, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if f := r.ns[slot]; f != nil {
		return f, nil
	}
	f, err := newUserns(r.binary, slotHost(slot))
	if err != nil {
		return nil, err
	}
	if r.ns == nil {
		r.ns = map[int]*os.File{}
	}
	r.ns[slot] = f
	return f, nil
}

// close releases the namespaces held.
func (r *idRanges) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for slot, f := range r.ns {
		f.Close()
		delete(r.ns, slot)
	}
}

// newUserns makes a user namespace mapping 0-65535 to host IDs from
// first. A process is needed to make one: binary is started in it under
// ptrace, which stops it at its exec before any of its code runs; the
// namespace is opened from it and it is killed.
func newUserns(binary string, first uint32) (*os.File, error) {
	// ptrace requests and the wait come from the thread that started the
	// tracee.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	m := []syscall.SysProcIDMap{{ContainerID: 0, HostID: int(first), Size: usernsSize}}
	cmd := exec.Command(binary)
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUSER, Ptrace: true, UidMappings: m, GidMappings: m,
		Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("user namespace: %w", err)
	}
	f, err := os.Open("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/ns/user")
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if err != nil {
		return nil, fmt.Errorf("user namespace: %w", err)
	}
	return f, nil
}

// idmapped returns a copy of the mount tree at dir (an open directory),
// attached nowhere, whose IDs are mapped through userns: on-disk 0 is the
// namespace's root. Closing it unmounts it.
func idmapped(dir *os.File, userns *os.File) (*os.File, error) {
	fd, err := unix.OpenTree(int(dir.Fd()), "", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_EMPTY_PATH|unix.AT_RECURSIVE)
	if err != nil {
		return nil, fmt.Errorf("clone mount of %s: %w", dir.Name(), err)
	}
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_IDMAP, Userns_fd: uint64(userns.Fd())}
	if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, &attr); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("idmap %s (the file system must support idmapped mounts): %w", dir.Name(), err)
	}
	return os.NewFile(uintptr(fd), dir.Name()), nil
}

// idmappedPath is idmapped of the directory at path.
func idmappedPath(path string, userns *os.File) (*os.File, error) {
	dir, err := os.OpenFile(path, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer dir.Close()
	return idmapped(dir, userns)
}

// attach moves the detached mount mnt onto target and makes it private,
// so that unmounting it later reaches no copy of it.
func attach(mnt *os.File, target string) error {
	if err := unix.MoveMount(int(mnt.Fd()), "", unix.AT_FDCWD, target, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("attach %s: %w", target, err)
	}
	if err := unix.Mount("", target, "", unix.MS_PRIVATE|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("make %s private: %w", target, err)
	}
	return nil
}

// idmappedOverlay mounts, at target, the overlay of lowers (top first)
// under upper (work beside it), every layer idmapped through userns and
// the overlay made by a thread whose file system IDs are root's in the
// namespace (host ID first).
func idmappedOverlay(lowers []string, upper, work, target string, userns *os.File, first uint32) error {
	var held []*os.File
	defer func() {
		for _, f := range held {
			f.Close()
		}
	}()
	layer := func(path string) (*os.File, error) {
		f, err := idmappedPath(path, userns)
		if err == nil {
			held = append(held, f)
		}
		return f, err
	}
	var lowerFDs []*os.File
	for _, l := range lowers {
		f, err := layer(l)
		if err != nil {
			return err
		}
		lowerFDs = append(lowerFDs, f)
	}
	// upper and work are on one mount, as overlay requires: one idmapped
	// copy of their parent, and the two opened in it.
	if filepath.Dir(upper) != filepath.Dir(work) {
		return fmt.Errorf("overlay: %s and %s are not in one directory", upper, work)
	}
	rw, err := layer(filepath.Dir(upper))
	if err != nil {
		return err
	}
	var upperFD, workFD int
	for _, p := range []struct {
		name string
		fd   *int
	}{{filepath.Base(upper), &upperFD}, {filepath.Base(work), &workFD}} {
		fd, err := unix.Openat(int(rw.Fd()), p.name, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("overlay: open %s: %w", p.name, err)
		}
		held = append(held, os.NewFile(uintptr(fd), p.name))
		*p.fd = fd
	}
	type result struct {
		mnt *os.File
		err error
	}
	c := make(chan result, 1)
	// A thread of its own, thrown away after: its file system IDs are
	// changed for the mount, which the overlay keeps as its creator's.
	go func() {
		runtime.LockOSThread()
		mnt, err := func() (*os.File, error) {
			unix.Setfsgid(int(first))
			unix.Setfsuid(int(first))
			// A file system ID other than 0 drops the file capabilities
			// from the effective set; the overlay's copy-ups need them.
			hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
			var data [2]unix.CapUserData
			if err := unix.Capget(&hdr, &data[0]); err != nil {
				return nil, err
			}
			data[0].Effective, data[1].Effective = data[0].Permitted, data[1].Permitted
			if err := unix.Capset(&hdr, &data[0]); err != nil {
				return nil, err
			}
			fsfd, err := unix.Fsopen("overlay", unix.FSOPEN_CLOEXEC)
			if err != nil {
				return nil, err
			}
			defer unix.Close(fsfd)
			for _, f := range lowerFDs {
				if err := unix.FsconfigSetFd(fsfd, "lowerdir+", int(f.Fd())); err != nil {
					return nil, fmt.Errorf("lower layer %s: %w%s", f.Name(), err, fsLog(fsfd))
				}
			}
			if err := unix.FsconfigSetFd(fsfd, "upperdir", upperFD); err != nil {
				return nil, fmt.Errorf("upper layer: %w%s", err, fsLog(fsfd))
			}
			if err := unix.FsconfigSetFd(fsfd, "workdir", workFD); err != nil {
				return nil, fmt.Errorf("work directory: %w%s", err, fsLog(fsfd))
			}
			if err := unix.FsconfigCreate(fsfd); err != nil {
				return nil, fmt.Errorf("%w%s", err, fsLog(fsfd))
			}
			mfd, err := unix.Fsmount(fsfd, unix.FSMOUNT_CLOEXEC, 0)
			if err != nil {
				return nil, err
			}
			return os.NewFile(uintptr(mfd), "overlay"), nil
		}()
		c <- result{mnt, err}
		// The thread ends with the goroutine, locked: nothing else runs
		// with its IDs.
	}()
	res := <-c
	if res.err != nil {
		return fmt.Errorf("mount the idmapped overlay of %d layers: %w", len(lowers), res.err)
	}
	defer res.mnt.Close()
	return attach(res.mnt, target)
}

// probeUserns mounts, once, what a sandbox in a user namespace needs: an
// overlay of idmapped layers of the data disk, made with the range's root
// as its creator; it fails with the kernel's reason where that cannot be
// (a kernel before 6.15, which takes no layer given by an O_PATH descriptor; a file system without idmapped mounts).
func (d *Driver) probeUserns() error {
	dir, err := os.MkdirTemp(filepath.Join(d.cfg.Root, "sandboxes"), ".userns-probe-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	for _, sub := range []string{"lower", "rw/upper", "rw/work", "mnt"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			return err
		}
	}
	ns, err := d.ids.userns(d.ids.first)
	if err != nil {
		return err
	}
	mnt := filepath.Join(dir, "mnt")
	if err := idmappedOverlay([]string{filepath.Join(dir, "lower")}, filepath.Join(dir, "rw/upper"), filepath.Join(dir, "rw/work"), mnt, ns, slotHost(d.ids.first)); err != nil {
		return err
	}
	return unmount(mnt)
}

// idmappedBind mounts at target an idmapped copy of the directory src.
func idmappedBind(src, target string, userns *os.File) error {
	mnt, err := idmappedPath(src, userns)
	if err != nil {
		return err
	}
	defer mnt.Close()
	if err := makeStage(filepath.Dir(target)); err != nil {
		return err
	}
	if err := os.Mkdir(target, 0o700); err != nil {
		return err
	}
	return attach(mnt, target)
}

// stageFile bind-mounts the file src at target (made empty).
func stageFile(src, target string) error {
	if err := makeStage(filepath.Dir(target)); err != nil {
		return err
	}
	if err := os.WriteFile(target, nil, 0o644); err != nil {
		return err
	}
	if err := unix.Mount(src, target, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("stage %s: %w", src, err)
	}
	return unix.Mount("", target, "", unix.MS_PRIVATE, "")
}

// stageRoot is where the servers of this host stage what runc mounts in
// a user namespace: runc reaches it by path as the range's root, so every
// directory on the way must let others pass, as /run does; the data
// directory need not.
func stageRoot() string {
	if fi, err := os.Stat("/run"); err == nil && fi.IsDir() && fi.Mode().Perm()&0o001 != 0 {
		return "/run/corral"
	}
	return filepath.Join(os.TempDir(), "corral-stage")
}

// stageName is the stage directory's name of the server of data
// directory root.
func stageName(root string) string {
	sum := sha256.Sum256([]byte(root))
	return hex.EncodeToString(sum[:8])
}

// stageDir is where sandbox id's mount points are staged.
func (d *Driver) stageDir(id string) string { return filepath.Join(d.stage, id) }

// makeStage makes dir and the stage directories above it that others may
// pass through and not list (mode 0711).
func makeStage(dir string) error {
	if err := os.MkdirAll(dir, 0o711); err != nil {
		return err
	}
	root := stageRoot()
	for p := dir; p != "/" && p != "."; p = filepath.Dir(p) {
		if err := os.Chmod(p, 0o711); err != nil {
			return err
		}
		if p == root {
			break
		}
	}
	return nil
}
