// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

// Package version reports build information of the corral binary. Any
// package may import it.
package version

import (
	"runtime/debug"
)

// Info describes the running binary.
type Info struct {
	Version   string `json:"version"`
	GoVersion string `json:"goVersion"`
	Revision  string `json:"revision,omitempty"`
}

// Get reads the build information embedded by the Go toolchain.
func Get() Info {
	info := Info{Version: "devel"}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return info
	}
	info.GoVersion = bi.GoVersion
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		info.Version = v
	}
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" {
			info.Revision = s.Value
		}
	}
	return info
}

// String is a one-line summary for --version.
func (i Info) String() string {
	s := "corral " + i.Version + " (" + i.GoVersion
	if i.Revision != "" {
		s += ", " + i.Revision
	}
	return s + ")"
}
