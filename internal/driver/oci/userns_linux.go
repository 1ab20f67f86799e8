// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package oci

import (
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/corral-dev/corral/internal/safefile"
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
// data directory root: servers on other data directories of one host
// start elsewhere, so they seldom try the same slots.
func firstSlot(root string) int {
	h := fnv.New32a()
	h.Write([]byte(root))
	return int(h.Sum32() % usernsSlots)
}

// slotHost is the first host ID of slot.
func slotHost(slot int) uint32 { return uint32(usernsFirst + slot*usernsSize) }

// idRanges hands out the host ID ranges of sandboxes and keeps, for some
// ranges, a user namespace with its mapping: idmapped mounts need one
// while a sandbox is made, and making it costs an exec, so up to
// nsCacheSize of them are kept for the next sandbox of their range.
//
// A range is unique on the host, whatever the servers on it: a server
// takes slot N by making the file slots/N of the host-wide stage root,
// which names the bundle of the sandbox in it. The file is removed only
// when the sandbox is destroyed, and keeps its slot while the bundle it
// names exists, whatever its server does (a sandbox outlives its server:
// a restart, a crash). A file that names no bundle is stale (its sandbox
// was destroyed, or never made, while its server crashed) and its slot is
// taken over by the next server looking. Between taking a slot and
// making the bundle, the server holds the file locked (flock), so that
// no other server takes the slot as stale in that moment; once the
// bundle exists it lets go (settle), so a sandbox costs the server no
// descriptor for its range. (The bundles must be visible to every server:
// a server in a mount namespace of its own, its bundles' tmpfs unseen by
// the others, would have its slots taken.) Every look at the slot files,
// by any server, holds a lock on their directory, so no two interleave.
type idRanges struct {
	binary string
	// maker makes the namespaces (nil: this process does).
	maker *usernsMaker
	// first is where the search for a free range starts.
	first int
	// stage is the host-wide stage root: the slot files are in its
	// directory slots.
	stage string
	// bundles is the server's bundle directory (absolute): a sandbox's
	// slot file names its bundle in it.
	bundles string
	// load reads the slots of the server's sandboxes from their bundles,
	// when the ranges are first needed.
	load func() (map[int]string, error)
	log  *slog.Logger

	// mu guards the fields below.
	mu sync.Mutex
	// used is every slot of the server's sandboxes (nil until loaded);
	// held the slot files this server holds locked, of sandboxes whose
	// bundle is being made.
	used  map[int]string // slot -> sandbox ID
	held  map[int]*os.File
	slots *os.File
	// ns are the kept user namespaces, by slot: none in use by a create
	// (userns hands one out, park takes it back).
	ns map[int]*os.File
}

// nsCacheSize is how many user namespaces idRanges keeps for reuse.
const nsCacheSize = 64

// retake takes again the slots of the server's sandboxes on disk.
func (r *idRanges) retake() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	unlock, err := r.lockSlots()
	if err != nil {
		return err
	}
	defer unlock()
	return r.loadLocked()
}

// take gives sandbox id a range no live sandbox of the host has.
func (r *idRanges) take(id string) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	unlock, err := r.lockSlots()
	if err != nil {
		return 0, err
	}
	defer unlock()
	if err := r.loadLocked(); err != nil {
		return 0, err
	}
	bundle := filepath.Join(r.bundles, id)
	for i := range usernsSlots {
		slot := (r.first + i) % usernsSlots
		if _, ok := r.used[slot]; ok {
			continue
		}
		f, _, err := r.claim(slot, bundle)
		if err != nil {
			return 0, err
		}
		if f != nil {
			r.used[slot], r.held[slot] = id, f
			return slot, nil
		}
	}
	return 0, errors.New("user namespaces: every host ID range is in use")
}

// loadLocked reads the slots of the server's sandboxes and takes them
// again, once.
func (r *idRanges) loadLocked() error {
	if r.used != nil {
		return nil
	}
	used, err := r.load()
	if err != nil {
		return fmt.Errorf("user namespaces: the ranges in use: %w", err)
	}
	if used == nil {
		used = map[int]string{}
	}
	held := map[int]*os.File{}
	for slot, id := range used {
		bundle := filepath.Join(r.bundles, id)
		f, owner, err := r.claim(slot, bundle)
		switch {
		case err != nil:
			for _, f := range held {
				f.Close()
			}
			return err
		case f != nil:
			// The bundle exists: nothing to hold.
			f.Close()
		case owner != bundle:
			// Given twice before ranges were host-wide: nothing moves
			// a running sandbox; the other's server keeps the file.
			r.log.Warn("a sandbox's host ID range is another sandbox's too", "sandbox_id", id, "slot", slot, "other", owner)
		}
	}
	r.used, r.held = used, held
	return nil
}

// lockSlots opens the slot files' directory, the first time, and locks
// it until the returned function is called.
func (r *idRanges) lockSlots() (func(), error) {
	if r.slots == nil {
		f, err := openStage(r.stage, filepath.Join(r.stage, "slots"))
		if err != nil {
			return nil, fmt.Errorf("user namespaces: the slots: %w", err)
		}
		r.slots = f
	}
	fd := int(r.slots.Fd())
	if err := flock(fd, unix.LOCK_EX); err != nil {
		return nil, fmt.Errorf("user namespaces: lock the slots: %w", err)
	}
	return func() { _ = flock(fd, unix.LOCK_UN) }, nil
}

func flock(fd, how int) error {
	for {
		err := unix.Flock(fd, how)
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

// claim takes slot for the sandbox of bundle, the slots locked: it
// returns the slot's file, locked and naming bundle, if the slot is free,
// stale or bundle's already; else the bundle that has it ("" if
// unknown).
func (r *idRanges) claim(slot int, bundle string) (*os.File, string, error) {
	name := strconv.Itoa(slot)
	path := filepath.Join(r.slots.Name(), name)
	dirfd := int(r.slots.Fd())
	fd, err := unix.Openat(dirfd, name, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if errors.Is(err, unix.EEXIST) {
		fd, err = unix.Openat(dirfd, name, unix.O_RDWR|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	}
	if err != nil {
		return nil, "", &fs.PathError{Op: "open", Path: path, Err: err}
	}
	f := os.NewFile(uintptr(fd), path)
	owner, err := slotOwner(f)
	if err != nil {
		f.Close()
		return nil, "", err
	}
	if err := flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, owner, nil // a running server's
		}
		return nil, "", &fs.PathError{Op: "lock", Path: path, Err: err}
	}
	if owner != bundle && filepath.IsAbs(owner) {
		if _, err := os.Lstat(owner); !errors.Is(err, fs.ErrNotExist) {
			f.Close()
			return nil, owner, nil // a sandbox's whose server is not running
		}
	}
	if err := f.Truncate(0); err != nil {
		f.Close()
		return nil, "", err
	}
	if _, err := f.WriteAt([]byte(bundle+"\n"), 0); err != nil {
		f.Close()
		return nil, "", err
	}
	return f, "", nil
}

// slotOwner reads the bundle a slot file names ("" for none).
func slotOwner(f *os.File) (string, error) {
	fi, err := f.Stat()
	if err != nil {
		return "", err
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("%s: %w", f.Name(), safefile.ErrNotRegular)
	}
	b := make([]byte, 4096)
	n, err := f.ReadAt(b, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return "", err
	}
	return strings.TrimSpace(string(b[:n])), nil
}

// settle lets go of the lock of slot's file once its sandbox's bundle
// exists: the bundle keeps the slot from then on.
func (r *idRanges) settle(slot int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if f := r.held[slot]; f != nil {
		f.Close()
		delete(r.held, slot)
	}
}

// release frees the range of sandbox id: its slot file goes.
func (r *idRanges) release(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for slot, owner := range r.used {
		if owner != id {
			continue
		}
		delete(r.used, slot)
		f := r.held[slot]
		delete(r.held, slot)
		if err := r.drop(slot, filepath.Join(r.bundles, id), f); err != nil {
			r.log.Warn("a host ID range's slot file stays (the next server to look takes it over)", "sandbox_id", id, "slot", slot, "err", err)
		}
	}
}

// drop removes slot's file if it names bundle, f its file if held.
func (r *idRanges) drop(slot int, bundle string, f *os.File) error {
	if f != nil {
		defer f.Close() // the lock goes last, with the file gone
	}
	unlock, err := r.lockSlots()
	if err != nil {
		return err
	}
	defer unlock()
	name := strconv.Itoa(slot)
	fd, err := unix.Openat(int(r.slots.Fd()), name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return nil // released by another instance of the server
	}
	if err != nil {
		return &fs.PathError{Op: "open", Path: filepath.Join(r.slots.Name(), name), Err: err}
	}
	cur := os.NewFile(uintptr(fd), filepath.Join(r.slots.Name(), name))
	defer cur.Close()
	owner, err := slotOwner(cur)
	if err != nil {
		return err
	}
	if owner != bundle {
		// Another sandbox's: it was given twice before ranges were
		// host-wide.
		return nil
	}
	return unix.Unlinkat(int(r.slots.Fd()), name, 0)
}

// userns returns a user namespace mapping slot's range, the one kept for
// it if there is one; the caller gives it back with park.
func (r *idRanges) userns(slot int) (*os.File, error) {
	r.mu.Lock()
	if f := r.ns[slot]; f != nil {
		delete(r.ns, slot)
		r.mu.Unlock()
		return f, nil
	}
	r.mu.Unlock()
	if r.maker == nil {
		return newUserns(r.binary, slotHost(slot))
	}
	return r.maker.make(slotHost(slot))
}

// park gives back slot's user namespace f: kept for the next sandbox of
// the range while fewer than nsCacheSize are, else closed.
func (r *idRanges) park(slot int, f *os.File) {
	if f == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.ns[slot]; ok || len(r.ns) >= nsCacheSize {
		f.Close()
		return
	}
	if r.ns == nil {
		r.ns = map[int]*os.File{}
	}
	r.ns[slot] = f
}

// close releases the namespaces held and ends their maker.
func (r *idRanges) close() {
	if r.maker != nil {
		r.maker.close()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for slot, f := range r.ns {
		f.Close()
		delete(r.ns, slot)
	}
	// The slot files stay, unlocked, for the sandboxes that outlive the
	// server: their bundles keep them.
	for _, f := range r.held {
		f.Close()
	}
	r.used, r.held = nil, nil
	if r.slots != nil {
		r.slots.Close()
		r.slots = nil
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
	defer d.ids.park(d.ids.first, ns)
	mnt := filepath.Join(dir, "mnt")
	if err := idmappedOverlay([]string{filepath.Join(dir, "lower")}, filepath.Join(dir, "rw/upper"), filepath.Join(dir, "rw/work"), mnt, ns, slotHost(d.ids.first)); err != nil {
		return err
	}
	return unmount(mnt)
}
