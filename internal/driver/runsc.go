// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package driver

// RunscHostPids is the host pids cgroup limit of a gVisor (runsc)
// sandbox allowed pids tasks of its own. The cgroup counts the Sentry's
// and the gofer's threads, not the sandbox's tasks (which RLIMIT_NPROC
// bounds inside the Sentry): an idle sandbox holds about 45 host tasks,
// and on gVisor's ptrace platform each of its tasks adds a stub process
// and Sentry threads tracing it (about 7.5 host tasks measured: 64
// sandbox processes held 526). The limit leaves room for both.
func RunscHostPids(pids int64) int64 { return 10*pids + 256 }
