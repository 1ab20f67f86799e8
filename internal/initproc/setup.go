// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package initproc

// What PID 1 prepares from its command line before Run: the entrypoint's
// environment, its user, the runtime's descriptors and a warm sandbox's
// hand-over files. Here, not in the flag layer, so that tests reach it.

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/corral-dev/corral/internal/safefile"
)

// OwnGOMAXPROCS is the variable that, set to 1 in PID 1's environment by
// the runtime, says that the GOMAXPROCS there is the runtime's, for PID 1
// alone: Go sizes its per-P caches as it starts, before PID 1 could lower
// the count itself, and a second P costs an idle sandbox about 0.7 MiB
// (docs/benchmarks.md). DropOwnEnv removes both before PID 1 starts
// anything; a sandbox whose image or request sets GOMAXPROCS gets neither.
const OwnGOMAXPROCS = "CORRAL_EXECD_OWN_GOMAXPROCS"

// DropOwnEnv removes from this process's environment what the runtime
// set for PID 1 alone (see OwnGOMAXPROCS).
func DropOwnEnv() {
	if os.Getenv(OwnGOMAXPROCS) == "1" {
		_ = os.Unsetenv("GOMAXPROCS")
	}
	_ = os.Unsetenv(OwnGOMAXPROCS)
}

// SignalReady writes a newline to descriptor fd and closes it, so that
// nothing PID 1 starts inherits it.
func SignalReady(fd int) error {
	if fd < 3 {
		return errors.New("want a descriptor of 3 or more")
	}
	f := os.NewFile(uintptr(fd), "ready")
	if f == nil {
		return errors.New("not an open descriptor")
	}
	_, err := f.Write([]byte("\n"))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// GateOpen is what a runtime writes to the gate descriptor (WaitGate)
// before closing it.
const GateOpen = "open\n"

// WaitGate reads descriptor fd to its end and closes it: the runtime
// holds PID 1 there until the sandbox's namespaces are ready (its network
// configured from outside). It fails closed: an end without GateOpen (a
// runtime that died first) is an error, and nothing starts.
func WaitGate(fd int) error {
	if fd < 3 {
		return errors.New("want a descriptor of 3 or more")
	}
	f := os.NewFile(uintptr(fd), "gate")
	if f == nil {
		return errors.New("not an open descriptor")
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 64))
	if err != nil {
		return err
	}
	if string(b) != GateOpen {
		return errors.New("the runtime closed the gate without opening it")
	}
	return nil
}

// ExitFile checks that fd is an inherited descriptor of a regular file or
// a pipe, open for writing, and returns it (Config.ExitFile).
func ExitFile(fd int) (*os.File, error) {
	if fd < 3 {
		return nil, errors.New("want a descriptor of 3 or more")
	}
	fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
	if err != nil {
		return nil, errors.New("not an open descriptor")
	}
	if fl&unix.O_ACCMODE == unix.O_RDONLY {
		return nil, errors.New("not open for writing")
	}
	f := os.NewFile(uintptr(fd), "exit")
	if fi, err := f.Stat(); err != nil || (!fi.Mode().IsRegular() && fi.Mode()&os.ModeNamedPipe == 0) {
		return nil, errors.New("not a regular file or a pipe")
	}
	return f, nil
}

// LookupCredential resolves USER[:GROUP] the way an image's User field
// means it: numbers are taken as they are, names are looked up in the
// sandbox's /etc/passwd and /etc/group, and a user without a group gets
// its primary group (or, if it has no passwd entry, its UID).
func LookupCredential(spec string) (*syscall.Credential, error) {
	u, g, hasGroup := strings.Cut(spec, ":")
	var uid, gid uint64
	var err error
	if uid, err = strconv.ParseUint(u, 10, 32); err != nil {
		pw, lerr := user.Lookup(u)
		if lerr != nil {
			return nil, fmt.Errorf("no user %q in /etc/passwd", u)
		}
		uid, _ = strconv.ParseUint(pw.Uid, 10, 32)
		gid, _ = strconv.ParseUint(pw.Gid, 10, 32)
	} else if pw, lerr := user.LookupId(u); lerr == nil {
		gid, _ = strconv.ParseUint(pw.Gid, 10, 32)
	} else {
		gid = uid
	}
	if hasGroup {
		if gid, err = strconv.ParseUint(g, 10, 32); err != nil {
			gr, lerr := user.LookupGroup(g)
			if lerr != nil {
				return nil, fmt.Errorf("no group %q in /etc/group", g)
			}
			gid, _ = strconv.ParseUint(gr.Gid, 10, 32)
		}
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// PrepareWarm creates what a warm sandbox that nobody prepared from
// outside needs (a Kubernetes pool pod): the start FIFO, and the token
// file holding the token it was started with until an adoption replaces
// it. Either that exists already is left alone.
func PrepareWarm(fifo, tokenFile, token string) error {
	if fifo != "" {
		if _, err := os.Lstat(fifo); errors.Is(err, fs.ErrNotExist) {
			if err := os.MkdirAll(filepath.Dir(fifo), 0o700); err != nil {
				return err
			}
			if err := syscall.Mkfifo(fifo, 0o600); err != nil {
				return fmt.Errorf("--wait-start: %w", err)
			}
		}
	}
	if tokenFile != "" && token != "" {
		if _, err := os.Lstat(tokenFile); errors.Is(err, fs.ErrNotExist) {
			if err := os.MkdirAll(filepath.Dir(tokenFile), 0o700); err != nil {
				return err
			}
			if err := safefile.WriteFileAtomic(filepath.Dir(tokenFile), filepath.Base(tokenFile), []byte(token), 0o600); err != nil {
				return fmt.Errorf("--execd-token-file: %w", err)
			}
		}
	}
	return nil
}

// ExecdEnvs makes the EXECD_ENVS file of OpenSandbox's execd contract: the
// file named by env's EXECD_ENVS when the image or the request set one,
// else path, made (or, in a restored snapshot, found) as a regular file
// the entrypoint's user (cred; nil: root) owns and may write, and added to
// env. It returns the environment and the file's path; on an error the
// environment is env unchanged and execd reads no such file.
func ExecdEnvs(env []string, path string, cred *syscall.Credential) ([]string, string, error) {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "EXECD_ENVS="); ok && v != "" {
			return env, v, nil
		}
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0o600)
	if err != nil {
		return env, "", fmt.Errorf("EXECD_ENVS: %w", err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return env, "", fmt.Errorf("EXECD_ENVS: %s is not a regular file", path)
	}
	uid, gid := 0, 0
	if cred != nil {
		uid, gid = int(cred.Uid), int(cred.Gid)
	}
	if err := f.Chown(uid, gid); err != nil {
		return env, "", fmt.Errorf("EXECD_ENVS: %w", err)
	}
	if err := f.Chmod(0o600); err != nil {
		return env, "", fmt.Errorf("EXECD_ENVS: %w", err)
	}
	return append(env, "EXECD_ENVS="+path), path, nil
}
