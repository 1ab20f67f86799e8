// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"time"

	"golang.org/x/term"

	"github.com/corral-dev/corral/sdk"
)

// exitCLIError is exec's exit code when corral itself fails (not the
// command), as docker run uses 125.
const exitCLIError = 125

func runExec(ctx context.Context, e *env, args []string) int {
	fs := newFlagSet(e, "exec", "exec [flags] ID [--] COMMAND [ARG...]")
	var cf clientFlags
	cf.register(fs, "text", "json", "yaml")
	detach := fs.Bool("d", false, "run in the background and print the command id (see 'corral logs')")
	workdir := fs.String("w", "", "working directory in the sandbox")
	envs := newKV("-e")
	fs.Var(envs, "e", "environment variable KEY=VALUE (repeatable)")
	timeout := fs.Duration("timeout", 0, "kill the command after this long (0: never)")
	interactive := fs.Bool("i", false, "send this terminal's stdin to the command")
	tty := fs.Bool("t", false, "run the command on a terminal (use with -i)")
	user := fs.String("u", "", "run as UID or UID:GID")
	var opts sdk.CommandOptions
	inv, ok, code := cf.setup(ctx, e, fs, args, 1, false, exitCLIError, func(pos, rest []string) string {
		if len(pos) != 1 || len(rest) == 0 {
			return "exec: give a sandbox id and a command, such as: corral exec ID -- ls -l /"
		}
		opts = sdk.CommandOptions{Cwd: *workdir, Env: envs.m, Timeout: *timeout}
		if *user != "" {
			uid, gid, err := parseUser(*user)
			if err != nil {
				return "exec: " + err.Error()
			}
			opts.UID, opts.GID = uid, gid
		}
		return ""
	})
	if !ok {
		return code
	}
	sb, err := sandbox(ctx, inv.c, inv.pos[0])
	if err != nil {
		return cf.fail(e, err, exitCLIError)
	}
	rest := inv.tail
	script := commandLine(rest)
	switch {
	case *detach:
		id, err := sb.StartBackground(ctx, script, opts)
		if err != nil {
			return cf.fail(e, err, exitCLIError)
		}
		fmt.Fprintln(e.Stdout, id)
		return 0
	case *interactive || *tty:
		if opts.UID != nil || *timeout > 0 {
			return fail(e, "exec: -u and --timeout are not available with -i or -t")
		}
		code, err := terminalSession(ctx, e, sb, withEnv(script, envs.m), *workdir, *tty)
		if err != nil {
			return cf.fail(e, err, exitCLIError)
		}
		return code
	}
	code, err = sb.Exec(ctx, script, opts, e.Stdout, e.Stderr)
	if err != nil {
		if ctx.Err() != nil {
			fmt.Fprintln(e.Stderr, "corral: interrupted; the command was stopped")
			return 130
		}
		return cf.fail(e, err, exitCLIError)
	}
	return code
}

// parseUser reads UID or UID:GID.
func parseUser(s string) (uid, gid *int, err error) {
	u, g, hasGroup := strings.Cut(s, ":")
	n, err := strconv.Atoi(u)
	if err != nil || n < 0 {
		return nil, nil, fmt.Errorf("-u %q: want a numeric UID or UID:GID", s)
	}
	uid = &n
	if hasGroup {
		m, err := strconv.Atoi(g)
		if err != nil || m < 0 {
			return nil, nil, fmt.Errorf("-u %q: want a numeric UID or UID:GID", s)
		}
		gid = &m
	}
	return uid, gid, nil
}

// withEnv prefixes a script with exports, for terminals (whose API takes
// no environment).
func withEnv(script string, env map[string]string) string {
	if len(env) == 0 {
		return script
	}
	var b strings.Builder
	for k, v := range env {
		b.WriteString("export " + k + "=" + shellQuote(v) + "; ")
	}
	return b.String() + script
}

func runShell(ctx context.Context, e *env, args []string) int {
	fs := newFlagSet(e, "shell", "shell ID [-w DIR]")
	var cf clientFlags
	cf.register(fs, "text", "json")
	workdir := fs.String("w", "", "working directory in the sandbox")
	inv, ok, code := cf.setup(ctx, e, fs, args, -1, false, exitCLIError, nArgs(1, "shell: give one sandbox id"))
	if !ok {
		return code
	}
	sb, err := sandbox(ctx, inv.c, inv.pos[0])
	if err != nil {
		return cf.fail(e, err, exitCLIError)
	}
	code, err = terminalSession(ctx, e, sb, "", *workdir, true)
	if err != nil {
		return cf.fail(e, err, exitCLIError)
	}
	return code
}

// terminalSession runs command ("" for a login shell) over the PTY
// WebSocket: with tty, on a terminal whose size follows this one (in raw
// mode when stdin is a terminal, always restored on the way out);
// without, with pipes so stdout and stderr stay apart. Stdin is sent as
// typed; its end is passed on. It returns the exit code.
func terminalSession(ctx context.Context, e *env, sb *sdk.Sandbox, command, workdir string, tty bool) (int, error) {
	id, err := sb.CreatePTY(ctx, sdk.PTYOptions{Command: command, Cwd: workdir})
	if err != nil {
		return 0, err
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		_ = sb.DeletePTY(dctx, id)
		cancel()
	}()
	p, err := sb.AttachPTY(ctx, id, sdk.AttachOptions{Pipe: !tty, SplitStderr: !tty, Since: -1})
	if err != nil {
		return 0, err
	}
	defer p.Close()

	inFD, inTTY := terminalFD(e.Stdin)
	outFD, outTTY := terminalFD(e.Stdout)
	if tty && inTTY {
		old, err := term.MakeRaw(inFD)
		if err != nil {
			return 0, fmt.Errorf("put the terminal in raw mode: %w", err)
		}
		defer term.Restore(inFD, old)
	}
	if tty && outTTY {
		resize := func() {
			if w, h, err := term.GetSize(outFD); err == nil {
				_ = p.Resize(w, h)
			}
		}
		resize()
		winch := make(chan os.Signal, 1)
		notifyResize(winch)
		defer signal.Stop(winch)
		go func() {
			for range winch {
				resize()
			}
		}()
	}
	go func() {
		if e.Stdin != nil {
			_, _ = io.Copy(p, e.Stdin)
		}
		_ = p.CloseStdin()
	}()
	errDone := make(chan struct{})
	go func() {
		defer close(errDone)
		if !tty {
			_, _ = io.Copy(e.Stderr, p.Stderr())
		}
	}()
	copyDone := make(chan error, 1)
	go func() {
		_, err := io.Copy(e.Stdout, p)
		copyDone <- err
	}()
	select {
	case err = <-copyDone:
	case <-ctx.Done():
		// Interrupted (Ctrl-C without a terminal, SIGTERM): the deferred
		// restore runs, and deleting the session stops the command.
		return 130, nil
	}
	<-errDone
	code, exited := p.Wait()
	if !exited {
		if err == nil || errors.Is(err, io.EOF) {
			err = errors.New("the terminal connection closed before the command exited")
		}
		return 0, err
	}
	return code, nil
}

func runLogs(ctx context.Context, e *env, args []string) int {
	fs := newFlagSet(e, "logs", "logs [-f] ID COMMAND_ID")
	var cf clientFlags
	cf.register(fs, "text", "json")
	follow := fs.Bool("f", false, "keep printing output until the command ends")
	inv, ok, code := cf.setup(ctx, e, fs, args, -1, false, 1, nArgs(2, "logs: give a sandbox id and the command id 'corral exec -d' printed"))
	if !ok {
		return code
	}
	pos := inv.pos
	sb, err := sandbox(ctx, inv.c, pos[0])
	if err != nil {
		return cf.apiFail(e, err)
	}
	var cursor int64
	delay := 50 * time.Millisecond
	for {
		// Status first: output read after the command ended is complete.
		var running bool
		if *follow {
			st, err := sb.CommandStatus(ctx, pos[1])
			if err != nil {
				return cf.apiFail(e, err)
			}
			running = st.Running
		}
		chunk, next, err := sb.CommandLogs(ctx, pos[1], cursor)
		if err != nil {
			if ctx.Err() != nil {
				return 130
			}
			return cf.apiFail(e, err)
		}
		if _, err := e.Stdout.Write(chunk); err != nil {
			return 1
		}
		cursor = next
		if !*follow || !running {
			return 0
		}
		if len(chunk) > 0 {
			delay = 50 * time.Millisecond
		} else {
			delay = min(delay*2, time.Second)
		}
		select {
		case <-ctx.Done():
			return 130
		case <-time.After(delay):
		}
	}
}
