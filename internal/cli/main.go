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

// command is one entry of the one command table, which dispatch, usage
// and shell completion all read.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, e *env, args []string) int
	// takesID: its arguments are sandbox ids (completion offers them).
	takesID bool
	// sub are its subcommands, for completion (the command dispatches
	// them itself).
	sub []string
}

func commands() []command {
	return []command{
		{name: "create", summary: "create a sandbox and print its id", run: runCreate},
		{name: "ls", summary: "list sandboxes", run: runList},
		{name: "get", summary: "show a sandbox", run: runGet, takesID: true},
		{name: "exec", summary: "run a command in a sandbox (output streamed, exit code kept)", run: runExec, takesID: true},
		{name: "mcp", summary: "serve sandbox tools to AI agents over MCP (stdio or streamable HTTP), under a tool policy", run: runMCP},
		{name: "agent", summary: "run a task with an LLM on one sandbox, under the tool policy (a restricted-execution agent)", run: runAgent},
		{name: "code", summary: "run code in a sandbox's code interpreter (Python by default; state kept between runs)", run: runCode, takesID: true},
		{name: "shell", summary: "open an interactive shell in a sandbox", run: runShell, takesID: true},
		{name: "logs", summary: "print the output of a background command", run: runLogs, takesID: true},
		{name: "cp", summary: "copy files and directories into or out of a sandbox", run: runCp, takesID: true},
		{name: "endpoint", summary: "print the address of a sandbox port", run: runEndpoint, takesID: true},
		{name: "pause", summary: "freeze sandboxes", run: runPause, takesID: true},
		{name: "resume", summary: "thaw paused sandboxes", run: runResume, takesID: true},
		{name: "renew", summary: "extend a sandbox's time to live", run: runRenew, takesID: true},
		{name: "kill", summary: "delete sandboxes", run: runKill, takesID: true},
		{name: "snapshot", summary: "create, list and delete snapshots", run: runSnapshot, sub: []string{"create", "ls", "rm"}},
		{name: "serve", summary: "run the lifecycle API server (the control plane)", run: runServe},
		{name: "keys", summary: "create, list and revoke API keys", run: runKeys, sub: []string{"create", "ls", "revoke"}},
		{name: "config", summary: "manage connection profiles; write a server configuration", run: runConfig, sub: []string{"set", "use", "ls", "rm", "init"}},
		{name: "image", summary: "import, pull, list and remove images of the native runtime", run: runImage, sub: []string{"import", "pull", "ls", "rm", "gc"}},
		{name: "completion", summary: "print a bash, zsh or fish completion script", run: runCompletion, sub: []string{"bash", "zsh", "fish"}},
		{name: "execd", summary: "run the in-sandbox daemon (the execd API on :44772)", run: runExecd},
		{name: "egress", summary: "enforce a sandbox's egress policy (DNS, nftables, the policy API on :18080)", run: runEgress},
		{name: "controller", summary: "run the Kubernetes controller for Sandbox resources", run: runController},
		{name: "install-binary", summary: "copy this corral binary to a path (the Kubernetes pod's init container)", run: runInstallBinary},
		{name: "adopt", summary: "hand a warm sandbox its token, environment and entrypoint (run inside it by the Kubernetes controller)", run: runAdopt},
		{name: "init", summary: "run as PID 1 of a sandbox: the entrypoint, execd, reaping and signals", run: runInit},
		{name: "version", summary: "print the version", run: runVersion},
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
