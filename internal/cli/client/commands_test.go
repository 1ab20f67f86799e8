// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package client

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// The table is the only place a command's subcommands are listed:
// each command either runs itself or has subcommands, names are unique,
// and help, dispatch and aliases all come from it.
func TestCommandTable(t *testing.T) {
	t.Parallel()
	names := map[string]bool{}
	for _, c := range Commands() {
		name := c.Name
		if names[name] || (c.Run == nil) == (len(c.Subs) == 0) {
			t.Errorf("command %q: named twice, or Run and Subs are not one or the other", name)
		}
		names[name] = true
		seen := map[string]bool{}
		for _, s := range c.Subs {
			for _, n := range append([]string{s.Name}, s.Aliases...) {
				if seen[n] || s.Run == nil || !strings.HasPrefix(s.Usage, s.Name) {
					t.Errorf("%s %s: a name used twice, no Run, or a usage not starting with its name", name, n)
				}
				seen[n] = true
			}
		}
	}
}

func TestDispatchSubcommands(t *testing.T) {
	t.Parallel()
	var got []string
	rec := func(name string) func(context.Context, *Env, []string) int {
		return func(_ context.Context, _ *Env, args []string) int {
			got = append(got, name+":"+strings.Join(args, ","))
			return 7
		}
	}
	c := Command{Name: "thing", Noun: "verb", Note: "A note.", Subs: []Subcommand{
		{Name: "make", Usage: "make ID", Summary: "make one", Run: rec("make")},
		{Name: "ls", Aliases: []string{"list"}, Usage: "ls", Summary: "list them", Run: rec("ls")},
	}}
	for _, tc := range []struct {
		args   []string
		code   int
		stderr string
	}{
		{nil, 2, "Usage: corral thing <make|ls> [flags]"},
		{[]string{"--help"}, 0, "corral thing make ID   make one"},
		{[]string{"help"}, 0, "A note."},
		{[]string{"make", "a", "--x"}, 7, ""},
		{[]string{"list"}, 7, ""},
		{[]string{"frob"}, 1, `thing: unknown verb "frob" (make, ls)`},
	} {
		var out, errb bytes.Buffer
		e := &Env{Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }}
		if code := c.Dispatch(context.Background(), e, tc.args); code != tc.code || !strings.Contains(errb.String(), tc.stderr) {
			t.Errorf("thing %v = %d %q, want %d and %q", tc.args, code, errb.String(), tc.code, tc.stderr)
		}
	}
	if strings.Join(got, " ") != "make:a,--x ls:" {
		t.Errorf("the subcommands ran with %q", got)
	}
}
