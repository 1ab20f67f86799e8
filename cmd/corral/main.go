// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

// Command corral is the single corral binary: server, in-sandbox daemon,
// egress enforcer, controller, MCP server and CLI.
package main

import (
	"context"
	"os"
	"os/signal"
	"runtime"
	"syscall"

	"github.com/corral-dev/corral/internal/cli"
)

// `corral init` reaps zombies on the process's main thread (see
// internal/initproc): the main goroutine is held on it from the start.
func init() {
	if len(os.Args) > 1 && os.Args[1] == "init" {
		runtime.LockOSThread()
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv)
	stop()
	os.Exit(code)
}
