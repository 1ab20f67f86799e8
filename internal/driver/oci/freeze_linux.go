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

// freezer is sandbox id's cgroup freezer: the file that is written, the
// file that says what the kernel has done, and the two states in each.
type freezer struct {
	file, read     string
	frozen, thawed string
}

func freezerOf(id string) freezer {
	v2 := filepath.Join("/sys/fs/cgroup", cgroupsPath(id))
	if _, err := os.Lstat(filepath.Join(v2, "cgroup.freeze")); err == nil {
		return freezer{file: filepath.Join(v2, "cgroup.freeze"), read: filepath.Join(v2, "cgroup.events"), frozen: "1", thawed: "0"}
	}
	v1 := filepath.Join("/sys/fs/cgroup/freezer", cgroupsPath(id), "freezer.state")
	return freezer{file: v1, read: v1, frozen: "FROZEN", thawed: "THAWED"}
}

// frozen reports whether sandbox id's cgroup is frozen (or freezing).
func frozen(id string) (bool, error) {
	f := freezerOf(id)
	b, err := os.ReadFile(f.file)
	return strings.TrimSpace(string(b)) != f.thawed, err
}

// setFrozen freezes or thaws every process of sandbox id and returns once
// the kernel says it is done.
func setFrozen(ctx context.Context, id string, freeze bool) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	f := freezerOf(id)
	file, read, want := f.file, f.read, f.thawed
	if freeze {
		want = f.frozen
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
