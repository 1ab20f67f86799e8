// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package cli

import (
	"context"
	"errors"
	"net"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/corral-dev/corral/internal/cli/client"
	"github.com/corral-dev/corral/internal/execd"
	"github.com/corral-dev/corral/internal/execd/process"
	"github.com/corral-dev/corral/internal/memtrim"
)

// defaultRetention is how much finished commands' state execd keeps.
var defaultRetention = process.Retention{MaxCommands: 1000, MaxBytes: 1 << 30, MaxAge: 24 * time.Hour}

// runExecd is `corral execd`: the daemon on its own, outside a sandbox's
// PID 1 (which runs it in-process; see runInit).
func runExecd(ctx context.Context, e *env, args []string) int {
	fs := client.NewFlagSet(e, "execd", "execd [flags]")
	listen := fs.String("listen", execd.DefaultListen, "address to serve the execd API on")
	listenFD := fs.Int("listen-fd", 0, "serve on this inherited listening socket (3 or more) instead of --listen")
	token := fs.String("access-token", e.Getenv("EXECD_ACCESS_TOKEN"), "token required in X-EXECD-ACCESS-TOKEN, or its verifier sha256:HEX (default $EXECD_ACCESS_TOKEN; empty: no auth)")
	tokenFile := fs.String("access-token-file", "", "read the access token (or its verifier) from this file instead, re-read when it changes (empty file: nothing passes)")
	stateDir := fs.String("state-dir", "", "where command output is retained (default: a directory under $TMPDIR)")
	envFile := fs.String("env-file", "", "file of KEY=VALUE lines added to every command's environment")
	userEnvFile := fs.String("user-env-file", e.Getenv("EXECD_ENVS"), "file of KEY=VALUE lines the sandbox's programs may write, added after --env-file for the commands of root or of the file's owner (default $EXECD_ENVS)")
	retainN := fs.Int("retain-commands", defaultRetention.MaxCommands, "finished commands kept for status and logs")
	retainBytes := fs.Int64("retain-bytes", defaultRetention.MaxBytes, "output bytes kept for finished commands")
	retainAge := fs.Duration("retain-age", defaultRetention.MaxAge, "finished commands older than this are removed")
	grace := fs.Duration("interrupt-grace", 3*time.Second, "time between SIGTERM and SIGKILL when a command is interrupted")
	ping := fs.Duration("ping-interval", 3*time.Second, "how often an idle event stream gets a ping event")
	codeIdle := fs.Duration("code-idle-timeout", 0, "shut down code contexts unused for this long (0: never)")
	codeWait := fs.Duration("code-spec-wait", 60*time.Second, "how long after start a code context waits for a known language's kernelspec to appear")
	codeQueue := fs.Int("code-queue-limit", 16, "executions that may wait behind the running one in a code context")
	codeMax := fs.Int("code-max-contexts", 32, "code contexts (kernels) alive at once")
	codeInterrupt := fs.Duration("code-interrupt-timeout", 10*time.Second, "how long an interrupted execution may go on before its kernel is stopped")
	logFormat := fs.String("log-format", "json", "log format: json or text")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn, error")
	if ok, code := client.ParseFlags(fs, e, args); !ok {
		return code
	}
	log, err := client.NewLogger(e.Stderr, *logFormat, *logLevel)
	if err != nil {
		return client.Fail(e, "%v", err)
	}
	srv, err := execd.New(execd.Config{
		Listen: *listen, AccessToken: *token, AccessTokenFile: *tokenFile, StateDir: *stateDir, EnvFile: *envFile, UserEnvFile: *userEnvFile, Logger: log,
		InterruptGrace: *grace, PingInterval: *ping, CodeIdleTimeout: *codeIdle, CodeSpecWait: *codeWait, CodeQueueLimit: *codeQueue, CodeInterruptTimeout: *codeInterrupt, CodeMaxContexts: *codeMax,
		Retention: process.Retention{MaxCommands: *retainN, MaxBytes: *retainBytes, MaxAge: *retainAge},
	})
	if err != nil {
		return client.Fail(e, "%v", err)
	}
	// Code in the sandbox runs as the same user: it must not be able to
	// read the tokens that requests carry out of this process's memory.
	_ = unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	defer trimMemory(ctx)()
	if *listenFD != 0 {
		ln, err := inheritedListener(*listenFD)
		if err != nil {
			return client.Fail(e, "execd: --listen-fd %d: %v", *listenFD, err)
		}
		err = srv.Serve(ctx, ln)
		if err != nil {
			return client.Fail(e, "%v", err)
		}
		return 0
	}
	if err := srv.Run(ctx); err != nil {
		return client.Fail(e, "%v", err)
	}
	return 0
}

// trimInterval is how often execd checks for spare heap to give back.
const trimInterval = 10 * time.Second

// trimMemory gives this process's spare heap back to the system now and
// then, for as long as it lives (a sandbox's execd mostly waits); the
// function it returns stops that and waits.
func trimMemory(ctx context.Context) func() {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { memtrim.Run(ctx, trimInterval) })
	return func() {
		cancel()
		wg.Wait()
	}
}

// inheritedListener is the listening socket at descriptor fd.
func inheritedListener(fd int) (net.Listener, error) {
	if fd < 3 {
		return nil, errors.New("want a descriptor of 3 or more")
	}
	if v, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ACCEPTCONN); err != nil || v != 1 {
		return nil, errors.New("not a listening socket")
	}
	f := os.NewFile(uintptr(fd), "listener")
	defer f.Close()
	return net.FileListener(f)
}
