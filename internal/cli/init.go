// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package cli

import (
	"context"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/corral-dev/corral/internal/initproc"
)

// runInit is PID 1 of a sandbox: `corral init [flags] -- ENTRYPOINT...`.
// The execd access token comes in $EXECD_ACCESS_TOKEN and is handed to
// execd only, never to the entrypoint.
func runInit(_ context.Context, e *env, args []string) int {
	fs := newFlagSet(e, "init", "init [flags] -- PROGRAM [ARGS...]")
	noExecd := fs.Bool("no-execd", false, "do not start the execd daemon")
	listen := fs.String("execd-listen", ":44772", "address execd listens on")
	stateDir := fs.String("execd-state-dir", "/var/lib/corral-execd", "where execd retains command output")
	statusDir := fs.String("status-dir", "", "directory that receives the entrypoint's exit code in a file named exit")
	userSpec := fs.String("user", "", "run the entrypoint as UID:GID")
	if ok, code := parseFlags(fs, e, args); !ok {
		return code
	}
	var entryEnv, daemonEnv []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		daemonEnv = append(daemonEnv, kv)
		if name == "EXECD_ACCESS_TOKEN" || strings.HasPrefix(name, "CORRAL_EXECD_") {
			continue
		}
		entryEnv = append(entryEnv, kv)
	}
	cfg := initproc.Config{Entrypoint: fs.Args(), Env: entryEnv, DaemonEnv: daemonEnv, Stderr: e.stderr, StatusDir: *statusDir}
	if *userSpec != "" {
		u, g, ok := strings.Cut(*userSpec, ":")
		uid, err1 := strconv.ParseUint(u, 10, 32)
		gid, err2 := strconv.ParseUint(g, 10, 32)
		if !ok || err1 != nil || err2 != nil {
			return fail(e, "init: --user %q: want UID:GID", *userSpec)
		}
		cfg.Credential = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	if !*noExecd {
		cfg.Daemon = []string{"corral", "execd", "--listen", *listen, "--state-dir", *stateDir}
	}
	return initproc.Run(cfg)
}
