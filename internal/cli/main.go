// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

// Package cli is the composition root of the corral binary: the subcommand
// tree, one file per subcommand, each mapping its flags onto a component's
// Config and running it. It is the only package that picks concrete
// drivers; nothing imports it but cmd/corral.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/corral-dev/corral/internal/version"
)

// env is what a subcommand may touch of the process.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string
}

type command struct {
	name    string
	summary string
	run     func(ctx context.Context, e *env, args []string) int
}

func commands() []command {
	return []command{
		{"create", "create a sandbox and print its id", runCreate},
		{"ls", "list sandboxes", runList},
		{"get", "show a sandbox", runGet},
		{"exec", "run a command in a sandbox (output streamed, exit code kept)", runExec},
		{"mcp", "serve sandbox tools to AI agents over MCP (stdio or streamable HTTP), under a tool policy", runMCP},
		{"agent", "run a task with an LLM on one sandbox, under the tool policy (a restricted-execution agent)", runAgent},
		{"code", "run code in a sandbox's code interpreter (Python by default; state kept between runs)", runCode},
		{"shell", "open an interactive shell in a sandbox", runShell},
		{"logs", "print the output of a background command", runLogs},
		{"cp", "copy files and directories into or out of a sandbox", runCp},
		{"endpoint", "print the address of a sandbox port", runEndpoint},
		{"pause", "freeze sandboxes", runPause},
		{"resume", "thaw paused sandboxes", runResume},
		{"renew", "extend a sandbox's time to live", runRenew},
		{"kill", "delete sandboxes", runKill},
		{"snapshot", "create, list and delete snapshots", runSnapshot},
		{"serve", "run the lifecycle API server (the control plane)", runServe},
		{"keys", "create, list and revoke API keys", runKeys},
		{"config", "manage connection profiles; write a server configuration", runConfig},
		{"image", "import, pull, list and remove images of the native runtime", runImage},
		{"completion", "print a bash, zsh or fish completion script", runCompletion},
		{"execd", "run the in-sandbox daemon (the execd API on :44772)", runExecd},
		{"egress", "enforce a sandbox's egress policy (DNS, nftables, the policy API on :18080)", runEgress},
		{"controller", "run the Kubernetes controller for Sandbox resources", runController},
		{"install-binary", "copy this corral binary to a path (the Kubernetes pod's init container)", runInstallBinary},
		{"adopt", "hand a warm sandbox its token, environment and entrypoint (run inside it by the Kubernetes controller)", runAdopt},
		{"init", "run as PID 1 of a sandbox: the entrypoint, execd, reaping and signals", runInit},
		{"version", "print the version", runVersion},
	}
}

// Main runs the corral command line and returns the exit code.
func Main(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int {
	e := &env{stdin: stdin, stdout: stdout, stderr: stderr, getenv: getenv}
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(e.stdout)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	if args[0] == "--version" {
		return runVersion(ctx, e, nil)
	}
	for _, c := range commands() {
		if c.name == args[0] {
			return c.run(ctx, e, args[1:])
		}
	}
	fmt.Fprintf(e.stderr, "corral: unknown command %q (run 'corral help' for the list)\n", args[0])
	return 2
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "corral — isolated, short-lived, observable computers for AI agents")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Usage: corral <command> [flags]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Commands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-11s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Run 'corral <command> --help' for a command's flags.")
}

func runVersion(_ context.Context, e *env, _ []string) int {
	fmt.Fprintln(e.stdout, version.Get().String())
	return 0
}

// parseFlags parses args into fs and reports whether the command should go
// on, and with which exit code if not.
func parseFlags(fs *flag.FlagSet, e *env, args []string) (ok bool, code int) {
	fs.SetOutput(e.stderr)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return false, 0
		}
		return false, 2
	}
	return true, 0
}

// newFlagSet returns a flag set whose usage lists the flags with a summary.
func newFlagSet(e *env, name, synopsis string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(e.stderr, "Usage: corral %s\n\nFlags:\n", synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// fail prints a one-sentence error and returns exit code 1.
func fail(e *env, format string, args ...any) int {
	msg := fmt.Sprintf(format, args...)
	fmt.Fprintln(e.stderr, "corral: "+strings.TrimSuffix(msg, "\n"))
	return 1
}
