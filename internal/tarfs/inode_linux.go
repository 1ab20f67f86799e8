// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package tarfs

import (
	"io/fs"
	"syscall"
)

// inode identifies a file's inode and says how many names it has.
func inode(info fs.FileInfo) (key [2]uint64, nlink uint64, ok bool) {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return key, 0, false
	}
	return [2]uint64{uint64(st.Dev), st.Ino}, uint64(st.Nlink), true
}
