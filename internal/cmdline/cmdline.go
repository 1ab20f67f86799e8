// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

// Package cmdline builds the command line of one of corral's roles
// (`corral init`, `corral egress`) from the same flag registration the
// role parses with, so that what a runtime asks for and what the role
// understands cannot drift apart. A leaf: the standard library only.
package cmdline

import "flag"

// Argv is binary, then role, then every flag whose value in want differs
// from its value in defaults, each followed by its value (booleans as
// --name=value). want and defaults register the same flags on a set.
func Argv(binary, role string, want, defaults func(*flag.FlagSet)) []string {
	w := flag.NewFlagSet(role, flag.ContinueOnError)
	want(w)
	d := flag.NewFlagSet(role, flag.ContinueOnError)
	defaults(d)
	args := []string{binary, role}
	w.VisitAll(func(f *flag.Flag) {
		switch b, ok := f.Value.(interface{ IsBoolFlag() bool }); {
		case f.DefValue == d.Lookup(f.Name).DefValue:
		case ok && b.IsBoolFlag():
			args = append(args, "--"+f.Name+"="+f.DefValue)
		default:
			args = append(args, "--"+f.Name, f.DefValue)
		}
	})
	return args
}
