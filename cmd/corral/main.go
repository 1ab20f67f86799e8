// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

// Command corral is the single corral binary: server, in-sandbox daemon,
// egress enforcer, controller, MCP server and CLI.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/corral-dev/corral/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv)
	stop()
	os.Exit(code)
}
