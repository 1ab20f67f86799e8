// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

// Package client is corral's user commands: sandboxes, commands, files,
// code, snapshots, keys, profiles, `corral mcp` and `corral agent`. They
// reach a server through the SDK only, link no server, runtime or
// in-sandbox code (internal/archtest checks), and build on every system.
// The shared subcommand helpers (Env, flags, errors, logging, layered
// configuration) are here too, for the composition root's commands.
package client

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
)

// Command is one entry of corral's command table, which dispatch, usage
// and shell completion all read.
type Command struct {
	Name    string
	Summary string
	// Run runs a command without subcommands.
	Run func(ctx context.Context, e *Env, args []string) int
	// TakesID: its arguments are sandbox ids (completion offers them).
	TakesID bool
	// Subs are the subcommands of a command that has them (Run is then
	// nil): Dispatch picks one, and its help and completion list them.
	Subs []Subcommand
	// Noun is what a subcommand is called in messages ("subcommand").
	Noun string
	// Note ends its help, after the subcommands.
	Note string
}

// Subcommand is one verb of a command that has several.
type Subcommand struct {
	Name    string
	Aliases []string
	// Usage is what follows "corral NAME " in its help line.
	Usage   string
	Summary string
	Run     func(ctx context.Context, e *Env, args []string) int
}

// Dispatch runs c with args: for a command with subcommands, the one
// args[0] names (its help without one: exit 2, or 0 when asked for).
func (c Command) Dispatch(ctx context.Context, e *Env, args []string) int {
	if len(c.Subs) == 0 {
		return c.Run(ctx, e, args)
	}
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		c.help(e.Stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	for _, s := range c.Subs {
		if s.Name == args[0] || slices.Contains(s.Aliases, args[0]) {
			return s.Run(ctx, e, args[1:])
		}
	}
	noun := c.Noun
	if noun == "" {
		noun = "subcommand"
	}
	return fail(e, "%s: unknown %s %q (%s)", c.Name, noun, args[0], strings.Join(c.SubNames(), ", "))
}

// SubNames are the names of c's subcommands, in the table's order.
func (c Command) SubNames() []string {
	names := make([]string, len(c.Subs))
	for i, s := range c.Subs {
		names[i] = s.Name
	}
	return names
}

func (c Command) help(w io.Writer) {
	fmt.Fprintf(w, "Usage: corral %s <%s> [flags]\n\n", c.Name, strings.Join(c.SubNames(), "|"))
	width := 0
	for _, s := range c.Subs {
		width = max(width, len(s.Usage))
	}
	for _, s := range c.Subs {
		fmt.Fprintf(w, "  corral %s %-*s   %s\n", c.Name, width, s.Usage, s.Summary)
	}
	if c.Note != "" {
		fmt.Fprintf(w, "\n%s\n", c.Note)
	}
}

// Commands are the user's commands, in the order usage lists them: the
// head of the one command table (internal/cli), which adds the server's
// and the runtimes' own. Every one of them must be there; a test checks.
func Commands() []Command {
	return []Command{
		{Name: "create", Summary: "create a sandbox and print its id", Run: runCreate},
		{Name: "ls", Summary: "list sandboxes", Run: runList},
		{Name: "get", Summary: "show a sandbox", Run: runGet, TakesID: true},
		{Name: "exec", Summary: "run a command in a sandbox (output streamed, exit code kept)", Run: runExec, TakesID: true},
		{Name: "mcp", Summary: "serve sandbox tools to AI agents over MCP (stdio or streamable HTTP), under a tool policy", Run: runMCP},
		{Name: "agent", Summary: "run a task with an LLM on one sandbox, under the tool policy (a restricted-execution agent)", Run: runAgent},
		{Name: "code", Summary: "run code in a sandbox's code interpreter (Python by default; state kept between runs)", Run: runCode, TakesID: true},
		{Name: "shell", Summary: "open an interactive shell in a sandbox", Run: runShell, TakesID: true},
		{Name: "logs", Summary: "print the output of a background command", Run: runLogs, TakesID: true},
		{Name: "cp", Summary: "copy files and directories into or out of a sandbox", Run: runCp, TakesID: true},
		{Name: "endpoint", Summary: "print the address of a sandbox port", Run: runEndpoint, TakesID: true},
		{Name: "pause", Summary: "freeze sandboxes", Run: runPause, TakesID: true},
		{Name: "resume", Summary: "thaw paused sandboxes", Run: runResume, TakesID: true},
		{Name: "renew", Summary: "extend a sandbox's time to live", Run: runRenew, TakesID: true},
		{Name: "fork", Summary: "make sandboxes from a running sandbox's file system (prints their ids)", Run: runFork, TakesID: true},
		{Name: "kill", Summary: "delete sandboxes", Run: runKill, TakesID: true},
		{Name: "events", Summary: "print your sandboxes' events (-f follows them as they happen)", Run: runEvents},
		diagnosticsCommand,
		snapshotCommand,
		volumeCommand,
		webhookCommand,
		quotaCommand,
		templateCommand,
		keysCommand,
		configCommand,
	}
}
