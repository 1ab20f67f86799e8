// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

//go:build !linux

package cli

import (
	"context"
	"errors"

	"github.com/corral-dev/corral/internal/cli/client"
)

// Off Linux, corral is the client: the server, the native runtime's
// images and the in-sandbox and host roles need Linux's namespaces,
// cgroups and netlink.
func runServe(_ context.Context, e *env, _ []string) int       { return linuxOnly(e, "serve") }
func runExecd(_ context.Context, e *env, _ []string) int       { return linuxOnly(e, "execd") }
func runEgress(_ context.Context, e *env, _ []string) int      { return linuxOnly(e, "egress") }
func runController(_ context.Context, e *env, _ []string) int  { return linuxOnly(e, "controller") }
func runAdopt(_ context.Context, e *env, _ []string) int       { return linuxOnly(e, "adopt") }
func runInit(_ context.Context, e *env, _ []string) int        { return linuxOnly(e, "init") }
func runCheckMounts(_ context.Context, e *env, _ []string) int { return linuxOnly(e, "check-mounts") }
func runUsernsMaker(_ context.Context, e *env, _ []string) int { return linuxOnly(e, "userns-maker") }

func isolateOutbound() error { return errors.New("network isolation runs on Linux only") }

func imageCommand() command {
	return command{Name: "image", Summary: imageSummary, Run: func(_ context.Context, e *env, _ []string) int { return linuxOnly(e, "image") }}
}

func linuxOnly(e *env, name string) int {
	return client.Fail(e, "%s runs on Linux only; this build of corral is the client (create, exec, cp, mcp, agent, ...)", name)
}
