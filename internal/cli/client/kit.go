// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package client

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// What every subcommand of corral uses, this package's and the
// composition root's: the process it may touch, flags, and errors.

// Env is what a subcommand may touch of the process.
type Env struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	Getenv         func(string) string
}

// env is Env inside this package.
type env = Env

// parseFlags parses args into fs and reports whether the command should go
// on, and with which exit code if not.
func parseFlags(fs *flag.FlagSet, e *env, args []string) (ok bool, code int) {
	fs.SetOutput(e.Stderr)
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
		fmt.Fprintf(e.Stderr, "Usage: corral %s\n\nFlags:\n", synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// fail prints a one-sentence error and returns exit code 1.
func fail(e *env, format string, args ...any) int {
	msg := fmt.Sprintf(format, args...)
	fmt.Fprintln(e.Stderr, "corral: "+strings.TrimSuffix(msg, "\n"))
	return 1
}

// ParseFlags parses a subcommand's flags as the client's own commands do.
// It, NewFlagSet, Fail, NewLogger and ApplyLayers are the helpers above
// for the composition root's subcommands.
func ParseFlags(fs *flag.FlagSet, e *Env, args []string) (bool, int) { return parseFlags(fs, e, args) }
func NewFlagSet(e *Env, name, synopsis string) *flag.FlagSet         { return newFlagSet(e, name, synopsis) }
func Fail(e *Env, format string, args ...any) int                    { return fail(e, format, args...) }
func NewLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	return newLogger(w, format, level)
}
func IsTerminal(w any) bool { return isTerminal(w) }
func ApplyLayers(fs *flag.FlagSet, e *Env, path string, skip ...string) error {
	return applyLayers(fs, e, path, skip...)
}
