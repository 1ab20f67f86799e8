// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package initproc

import (
	"flag"
	"time"

	"github.com/corral-dev/corral/internal/cmdline"
	"github.com/corral-dev/corral/internal/insandbox"
)

// Options are `corral init`'s command line: what a runtime asks of a
// sandbox's PID 1. Runtimes build the argv with Argv and corral init
// parses it with Register, so the two cannot drift apart.
type Options struct {
	// NoExecd starts no execd.
	NoExecd bool
	// ExecdListen is execd's address (default insandbox.ExecdListen).
	ExecdListen string
	// ExecdStateDir is where execd keeps command output.
	ExecdStateDir string
	// ReadyFD (3 or more) is a pipe that gets a newline, and is closed,
	// once execd's port is bound.
	ReadyFD int
	// ExitFD (3 or more) is a file that receives the entrypoint's exit
	// code.
	ExitFD int
	// ExitPath, for runtimes that pass no descriptors (runsc), is a file
	// in the sandbox that receives it instead: made empty at start.
	ExitPath string
	// GateFD (3 or more) is a pipe PID 1 reads to its end before anything
	// else (WaitGate).
	GateFD int
	// ConsoleLimit bounds the console log when stdout is a file.
	ConsoleLimit int64
	// ConsoleRelay: stdout is a pipe the runtime drains, which may have
	// no reader for a while (the server restarting).
	ConsoleRelay bool
	// WaitStart holds the entrypoint back until a JSON start arrives on
	// this FIFO (warm pools).
	WaitStart string
	// WaitStartFile holds it back until a JSON start is renamed into this
	// file (gVisor sandboxes, where a host FIFO can lose it).
	WaitStartFile string
	// WaitURL holds the entrypoint back until a GET of it answers 200,
	// for at most WaitTimeout.
	WaitURL     string
	WaitTimeout time.Duration
	// ExecdTokenFile is where execd reads its token's verifier, re-read
	// when it changes; ExecdEnvFile holds KEY=VALUE lines execd adds to
	// every command's environment.
	ExecdTokenFile string
	ExecdEnvFile   string
	// User runs the entrypoint as USER[:GROUP].
	User string
	// IsolateNetwork closes the namespace to all but loopback, answers
	// and inbound TCP to these ports (comma-separated, or "any"), then
	// gives up CAP_NET_ADMIN.
	IsolateNetwork string
	// TrustCA is a PEM CA added to the system's bundles and to
	// insandbox.CABundle.
	TrustCA string
	// Entrypoint is the program and its arguments, after "--".
	Entrypoint []string
}

// DefaultOptions are the options of a bare `corral init -- PROGRAM`.
func DefaultOptions() Options {
	return Options{ExecdListen: insandbox.ExecdListen, ExecdStateDir: insandbox.ExecdStateDir, WaitTimeout: 2 * time.Minute}
}

// Register defines corral init's flags on fs, parsed into o; each flag's
// default is o's value when Register is called.
func (o *Options) Register(fs *flag.FlagSet) {
	fs.BoolVar(&o.NoExecd, "no-execd", o.NoExecd, "do not start the execd daemon")
	fs.StringVar(&o.ExecdListen, "execd-listen", o.ExecdListen, "address execd listens on")
	fs.StringVar(&o.ExecdStateDir, "execd-state-dir", o.ExecdStateDir, "where execd retains command output")
	fs.IntVar(&o.ReadyFD, "ready-fd", o.ReadyFD, "descriptor (3 or more) of a pipe that gets a newline, and is closed, once execd's port is bound (the runtime waits on it before it connects)")
	fs.IntVar(&o.GateFD, "gate-fd", o.GateFD, "descriptor (3 or more) of a pipe read to its end before anything else runs: the runtime opens it once the sandbox's network is ready")
	fs.IntVar(&o.ExitFD, "exit-fd", o.ExitFD, "descriptor (3 or more) of a file that receives the entrypoint's exit code (the runtime passes it in)")
	fs.StringVar(&o.ExitPath, "exit-path", o.ExitPath, "file that receives the entrypoint's exit code, for runtimes that pass no descriptors (emptied at start)")
	fs.Int64Var(&o.ConsoleLimit, "console-limit", o.ConsoleLimit, "when stdout is a file, keep it under this many bytes, dropping the oldest output (0: no limit)")
	fs.BoolVar(&o.ConsoleRelay, "console-relay", o.ConsoleRelay, "stdout is a pipe the runtime drains: relay what everything prints to it, dropping what cannot be written while nothing reads (nothing dies of SIGPIPE)")
	fs.StringVar(&o.WaitStart, "wait-start", o.WaitStart, "start no entrypoint until a JSON {\"args\",\"env\"} arrives on this FIFO (warm pools)")
	fs.StringVar(&o.WaitStartFile, "wait-start-file", o.WaitStartFile, "start no entrypoint until a JSON {\"args\",\"env\"} is renamed into this file (polled)")
	fs.StringVar(&o.WaitURL, "wait-url", o.WaitURL, "start no entrypoint until an HTTP GET of this URL answers 200 (execd runs meanwhile)")
	fs.DurationVar(&o.WaitTimeout, "wait-timeout", o.WaitTimeout, "with --wait-url: how long to wait before giving up (PID 1 then exits)")
	fs.StringVar(&o.ExecdTokenFile, "execd-token-file", o.ExecdTokenFile, "execd reads its access token from this file, re-read when it changes")
	fs.StringVar(&o.ExecdEnvFile, "execd-env-file", o.ExecdEnvFile, "file of KEY=VALUE lines execd adds to every command's environment")
	fs.StringVar(&o.User, "user", o.User, "run the entrypoint as USER[:GROUP] (names or numbers, as an image's config gives them)")
	fs.StringVar(&o.IsolateNetwork, "isolate-network", o.IsolateNetwork, "before anything else, close the network namespace to all but loopback, answers and inbound TCP to these ports (comma-separated; \"any\": every port), then give up CAP_NET_ADMIN for good")
	fs.StringVar(&o.TrustCA, "trust-ca", o.TrustCA, "add this PEM CA to the system's CA bundles and to "+insandbox.CABundle+" before starting anything")
}

// Argv is the command line that runs binary as `corral init` with o:
// the flags that differ from DefaultOptions, "--", then the entrypoint.
func (o Options) Argv(binary string) []string {
	base := DefaultOptions()
	args := cmdline.Argv(binary, "init", o.Register, base.Register)
	return append(append(args, "--"), o.Entrypoint...)
}

// ParseArgs parses a command line Argv built (without the binary and
// "init"), for tests and tools that check what a runtime asked for.
func ParseArgs(args []string) (Options, error) {
	o := DefaultOptions()
	fs := flag.NewFlagSet("init", flag.ContinueOnError)
	o.Register(fs)
	if err := fs.Parse(args); err != nil {
		return Options{}, err
	}
	o.Entrypoint = fs.Args()
	return o, nil
}
