// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package corraltest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// mountPath undoes the octal escapes of a path in /proc/self/mountinfo.
var mountPath = strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`)

func unmountUnder(dir string) error {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	var points []string
	for line := range strings.Lines(string(b)) {
		if f := strings.Fields(line); len(f) > 4 {
			if p := mountPath.Replace(f[4]); strings.HasPrefix(p, dir+"/") {
				points = append(points, p)
			}
		}
	}
	// Deeper mounts first; one mounted twice is detached twice.
	slices.SortFunc(points, func(a, b string) int { return len(b) - len(a) })
	var errs []error
	for _, p := range points {
		if err := unix.Unmount(p, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("unmount %s: %w", p, err))
		}
	}
	return errors.Join(errs...)
}
