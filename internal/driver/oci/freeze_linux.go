// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package oci

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// The cgroup freezer, driven directly for a snapshot's short freeze: what
// `runc pause` and `runc resume` write, without the two runc executions
// (tens of milliseconds each on this machine) that would dominate a small
// snapshot. runc reads the same state, so it sees a frozen sandbox as
// paused.

// frozen reports whether sandbox id's cgroup is frozen (or freezing).
func frozen(id string) (bool, error) {
	if v2 := filepath.Join("/sys/fs/cgroup", cgroupsPath(id), "cgroup.freeze"); exists(v2) {
		b, err := os.ReadFile(v2)
		return strings.TrimSpace(string(b)) == "1", err
	}
	b, err := os.ReadFile(filepath.Join("/sys/fs/cgroup/freezer", cgroupsPath(id), "freezer.state"))
	return strings.TrimSpace(string(b)) != "THAWED", err
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

// setFrozen freezes or thaws every process of sandbox id and returns once
// the kernel says it is done.
func setFrozen(ctx context.Context, id string, freeze bool) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var file, want, read string
	if v2 := filepath.Join("/sys/fs/cgroup", cgroupsPath(id)); exists(filepath.Join(v2, "cgroup.freeze")) {
		file, read = filepath.Join(v2, "cgroup.freeze"), filepath.Join(v2, "cgroup.events")
		want = map[bool]string{true: "1", false: "0"}[freeze]
	} else {
		file = filepath.Join("/sys/fs/cgroup/freezer", cgroupsPath(id), "freezer.state")
		read, want = file, map[bool]string{true: "FROZEN", false: "THAWED"}[freeze]
	}
	delay := 100 * time.Microsecond
	for {
		// Written again on every round: a v1 freezer can stay FREEZING
		// while a task is in an uninterruptible wait, and a new write
		// retries it.
		if err := os.WriteFile(file, []byte(want), 0o644); err != nil {
			return fmt.Errorf("cgroup freezer of %s: %w", id, err)
		}
		b, err := os.ReadFile(read)
		if err != nil {
			return fmt.Errorf("cgroup freezer of %s: %w", id, err)
		}
		if read == file && strings.TrimSpace(string(b)) == want || read != file && strings.Contains(string(b), "frozen "+want) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cgroup freezer of %s: %w", id, errors.Join(ctx.Err(), errors.New("the sandbox did not settle")))
		case <-time.After(delay):
		}
		delay = min(2*delay, 10*time.Millisecond)
	}
}
