// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package corraltest

// Unmount detaches every mount left below dataDir, the data directory of
// a `corral serve` that has exited, deepest first, so that the directory
// can be removed (dataDir itself, which the server does not mount, is
// left alone). The native runtime keeps its bundles on a tmpfs there
// (DATA/oci/run) that outlives the server on purpose: sandboxes survive a
// restart. Unmount reads the mount table instead of naming that path, so
// it needs no runtime's layout (and the SDK's tests, which call it
// through Served.Stop, link no runtime). Off Linux nothing is mounted.
func Unmount(dataDir string) error { return unmountUnder(dataDir) }
