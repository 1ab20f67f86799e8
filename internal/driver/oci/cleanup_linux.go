// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package oci

import (
	"bufio"
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// mountsUnder lists the mount points under dir, deepest first.
func mountsUnder(bundle string) []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return []string{filepath.Join(bundle, "rootfs")}
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && (fields[4] == bundle || strings.HasPrefix(fields[4], bundle+"/")) {
			out = append(out, fields[4])
		}
	}
	// Deeper mounts first.
	slices.SortFunc(out, func(a, b string) int { return cmp.Compare(len(b), len(a)) })
	return out
}

// removeCgroups removes what is left of a sandbox's cgroups after runc
// (runc deletes them itself; a create interrupted midway, or processes
// still being reaped when runc tried, can leave them). A cgroup that still
// holds processes is busy: they are killed and the removal retried for a
// few seconds.
func removeCgroups(path string) error {
	entries, err := os.ReadDir("/sys/fs/cgroup")
	if err != nil {
		return nil
	}
	dirs := []string{filepath.Join("/sys/fs/cgroup", path)}
	for _, e := range entries {
		dirs = append(dirs, filepath.Join("/sys/fs/cgroup", e.Name(), path))
	}
	deadline := time.Now().Add(5 * time.Second)
	var errs []error
	for _, dir := range dirs {
		for {
			err := os.Remove(dir)
			if err == nil || errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
				break
			}
			if !errors.Is(err, syscall.EBUSY) || time.Now().After(deadline) {
				errs = append(errs, fmt.Errorf("remove cgroup %s: %w", dir, err))
				break
			}
			killCgroupProcs(dir)
			time.Sleep(10 * time.Millisecond)
		}
	}
	return errors.Join(errs...)
}

// killCgroupProcs sends SIGKILL to every process listed in a cgroup.
func killCgroupProcs(dir string) {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return
	}
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil && pid > 1 {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}
