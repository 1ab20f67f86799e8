// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package oci

import (
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/corral-dev/corral/internal/driver"
	"github.com/corral-dev/corral/internal/safefile"
)

// exitFile is the bundle's file that holds PID 1's exit code: written by
// the server from the exit pipe (console_linux.go); sandboxes made before
// that had PID 1 write it through a descriptor.
const exitFile = "exit"

// exitCode reads the code corral init left in the bundle. Sandboxes
// made before init wrote through a descriptor left it in their status
// directory, which they could write: it is read as hostile input.
func exitCode(bundle string) (driver.Exit, bool) {
	for _, dir := range []string{bundle, filepath.Join(bundle, "status")} {
		b, fi, err := safefile.ReadFile(dir, exitFile, 32)
		if err != nil || len(b) == 0 {
			continue
		}
		n, ok := parseExitCode(b)
		if !ok {
			return driver.Exit{}, false
		}
		return driver.Exit{Code: n, At: fi.ModTime().UTC()}, true
	}
	return driver.Exit{}, false
}

// parseExitCode reads an exit code PID 1 wrote: a number from 0 to 255.
func parseExitCode(b []byte) (int, bool) {
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || n < 0 || n > 255 {
		return 0, false
	}
	return n, true
}

// exitOf is the exit of a stopped sandbox: what init recorded, or a kill.
func exitOf(bundle string) driver.Exit {
	if ex, ok := exitCode(bundle); ok {
		return ex
	}
	return driver.Exit{Code: 137, At: time.Now().UTC(), Reason: "killed"}
}

// exitOf is the exit of a stopped sandbox whose bundle is bundle; a runsc
// sandbox's PID 1 recorded it in its root.
func (d *Driver) exitOf(bundle string) driver.Exit {
	id := filepath.Base(bundle)
	d.drains.collectExit(id)
	if ex, ok := exitCode(bundle); ok {
		return ex
	}
	if d.isRunsc(id) {
		if n, at, ok := runscExitCode(filepath.Join(d.diskDir(id), "rootfs")); ok {
			return driver.Exit{Code: n, At: at}
		}
	}
	return exitOf(bundle)
}
