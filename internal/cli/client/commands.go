// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

// Package client is corral's user commands: sandboxes, commands, files,
// code, snapshots, keys, profiles, `corral mcp` and `corral agent`. They
// reach a server through the SDK only, link no server, runtime or
// in-sandbox code (internal/archtest checks), and build on every system.
// The shared subcommand helpers (Env, flags, errors, logging, layered
// configuration) are here too, for the composition root's commands.
package client

import "context"

// Command is one entry of corral's command table, which dispatch, usage
// and shell completion all read.
type Command struct {
	Name    string
	Summary string
	Run     func(ctx context.Context, e *Env, args []string) int
	// TakesID: its arguments are sandbox ids (completion offers them).
	TakesID bool
	// Sub are its subcommands, for completion (the command dispatches
	// them itself).
	Sub []string
}

// Commands are the user's commands, by name.
func Commands() map[string]Command {
	m := map[string]Command{}
	for _, c := range []Command{
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
		{Name: "kill", Summary: "delete sandboxes", Run: runKill, TakesID: true},
		{Name: "snapshot", Summary: "create, list and delete snapshots", Run: runSnapshot, Sub: []string{"create", "ls", "rm"}},
		{Name: "keys", Summary: "create, list and revoke API keys", Run: runKeys, Sub: []string{"create", "ls", "revoke"}},
		{Name: "config", Summary: "manage connection profiles; write a server configuration", Run: runConfig, Sub: []string{"set", "use", "ls", "rm", "init"}},
	} {
		m[c.Name] = c
	}
	return m
}
