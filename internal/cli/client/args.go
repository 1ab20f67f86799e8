// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package client

import (
	"errors"
	"flag"
	"fmt"
	"sort"
	"strings"
)

// parseArgs parses flags that may come before, between or after the
// positional arguments, like kubectl. After maxPos positionals (-1: no
// limit) parsing stops and the rest is returned verbatim in tail, as is
// everything after a "--".
func parseArgs(fs *flag.FlagSet, e *env, args []string, maxPos int) (pos, tail []string, ok bool, code int) {
	fs.SetOutput(e.Stderr)
	head := args
	if i := indexOf(args, "--"); i >= 0 {
		head, tail = args[:i], args[i+1:]
	}
	for {
		if err := fs.Parse(head); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, nil, false, 0
			}
			return nil, nil, false, 2
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, tail, true, 0
		}
		pos = append(pos, rest[0])
		head = rest[1:]
		if maxPos >= 0 && len(pos) >= maxPos {
			// Whatever follows belongs to the command, "--" or not.
			return pos, append(append([]string(nil), head...), tail...), true, 0
		}
	}
}

func indexOf(xs []string, x string) int {
	for i, v := range xs {
		if v == x {
			return i
		}
	}
	return -1
}

// kvFlag is a repeatable KEY=VALUE flag.
type kvFlag struct {
	m    map[string]string
	what string
}

func newKV(what string) *kvFlag { return &kvFlag{m: map[string]string{}, what: what} }

func (f *kvFlag) String() string {
	if f == nil {
		return ""
	}
	keys := make([]string, 0, len(f.m))
	for k := range f.m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for i, k := range keys {
		keys[i] = k + "=" + f.m[k]
	}
	return strings.Join(keys, ",")
}

func (f *kvFlag) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	if !ok || k == "" {
		return fmt.Errorf("%s %q: want KEY=VALUE", f.what, v)
	}
	f.m[k] = val
	return nil
}

// listFlag is a repeatable flag whose values may also be comma-separated.
type listFlag []string

func (f *listFlag) String() string { return strings.Join(*f, ",") }

func (f *listFlag) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*f = append(*f, s)
		}
	}
	return nil
}

// shellQuote quotes s for a POSIX shell, leaving plain words alone.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:,+@%", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// commandLine turns exec's arguments into the shell script the API runs:
// one argument is a script as written ("echo $HOME | wc -c"); several are
// a command and its arguments, quoted so each arrives as given.
func commandLine(args []string) string {
	if len(args) == 1 {
		return args[0]
	}
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = shellQuote(a)
	}
	return strings.Join(q, " ")
}
