// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

// Package cli is the composition root of the corral binary: the command
// table, the server (`corral serve`, the only place that picks concrete
// drivers), the runtimes' and the in-sandbox roles (init, execd, egress,
// adopt, controller). The user's commands are internal/cli/client.
// Nothing imports it but cmd/corral.
package cli

import (
	"context"
	"fmt"
	"io"

	"github.com/corral-dev/corral/internal/cli/client"
	"github.com/corral-dev/corral/internal/version"
)

// command is one entry of the one command table, which dispatch, usage
// and shell completion all read.
type command = client.Command

// env is what a subcommand may touch of the process.
type env = client.Env

// imageSummary is the image command's line in usage, in every build.
const imageSummary = "import, pull, list and remove images of the native runtime"

// commands is corral's one command table, which dispatch, usage and
// completion read: the user's commands (package client, which uses only
// the SDK), then the server's, the runtimes' and the in-sandbox roles'
// (here), in the order usage lists them.
func commands() []command {
	return append(client.Commands(),
		command{Name: "serve", Summary: "run the lifecycle API server (the control plane)", Run: runServe},
		imageCommand(),
		completionCommand(),
		command{Name: "execd", Summary: "run the in-sandbox daemon (the execd API on :44772)", Run: runExecd},
		command{Name: "egress", Summary: "enforce a sandbox's egress policy (DNS, nftables, the policy API on :18080)", Run: runEgress},
		command{Name: "userns-maker", Summary: "make the user namespaces of native sandboxes' ID ranges (started by serve, on a socket at fd 3)", Run: runUsernsMaker},
		command{Name: "controller", Summary: "run the Kubernetes controller for Sandbox resources", Run: runController},
		command{Name: "install-binary", Summary: "copy this corral binary to a path (the Kubernetes pod's init container)", Run: runInstallBinary},
		command{Name: "check-mounts", Summary: "refuse mount paths that pass through a symbolic link in this root (the Kubernetes pod's init container)", Run: runCheckMounts},
		command{Name: "adopt", Summary: "hand a warm sandbox its token, environment and entrypoint (run inside it by the Kubernetes controller)", Run: runAdopt},
		command{Name: "init", Summary: "run as PID 1 of a sandbox: the entrypoint, execd, reaping and signals", Run: runInit},
		command{Name: "version", Summary: "print the version", Run: runVersion},
	)
}

// Main runs the corral command line and returns the exit code.
func Main(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int {
	e := &env{Stdin: stdin, Stdout: stdout, Stderr: stderr, Getenv: getenv}
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(e.Stdout)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	if args[0] == "--version" {
		return runVersion(ctx, e, nil)
	}
	for _, c := range commands() {
		if c.Name == args[0] {
			return c.Dispatch(ctx, e, args[1:])
		}
	}
	fmt.Fprintf(e.Stderr, "corral: unknown command %q (run 'corral help' for the list)\n", args[0])
	return 2
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "corral — isolated, short-lived, observable computers for AI agents")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Usage: corral <command> [flags]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Commands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-11s %s\n", c.Name, c.Summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Run 'corral <command> --help' for a command's flags.")
}

func runVersion(_ context.Context, e *env, _ []string) int {
	fmt.Fprintln(e.Stdout, version.Get().String())
	return 0
}
