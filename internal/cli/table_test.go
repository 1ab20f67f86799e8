// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/corral-dev/corral/internal/cli/client"
)

// TestEveryCommandIsReachable: every command package client defines is in
// the one table, in the order it gives, and reaches its own code through
// dispatch (its --help names it, where an unknown command would say so),
// `corral help` and each completion script. Two documented commands
// (fork, volume) were once defined but left out of the table.
func TestEveryCommandIsReachable(t *testing.T) {
	run := func(args ...string) (string, string, int) {
		var out, errb bytes.Buffer
		code := Main(context.Background(), args, strings.NewReader(""), &out, &errb, func(string) string { return "" })
		return out.String(), errb.String(), code
	}
	help, _, _ := run("help")
	scripts := map[string]string{}
	for _, sh := range []string{"bash", "zsh", "fish"} {
		out, errOut, code := run("completion", sh)
		if code != 0 {
			t.Fatalf("completion %s: %d %s", sh, code, errOut)
		}
		scripts[sh] = out
	}
	table := commands()
	for i, c := range client.Commands() {
		if i >= len(table) || table[i].Name != c.Name {
			t.Errorf("command %q is not at %d in the table", c.Name, i)
		}
		out, errOut, code := run(c.Name, "--help")
		if strings.Contains(errOut, "unknown command") || code != 0 || !strings.Contains(out+errOut, "corral "+c.Name) {
			t.Errorf("corral %s --help = %d %q %q", c.Name, code, out, errOut)
		}
		if !strings.Contains(help, "  "+c.Name+" ") {
			t.Errorf("corral help does not list %s", c.Name)
		}
		for sh, script := range scripts {
			if !containsWord(script, c.Name) {
				t.Errorf("the %s completion does not offer %s", sh, c.Name)
			}
		}
	}
	for _, name := range []string{"fork", "volume"} {
		if _, errOut, _ := run(name, "--help"); strings.Contains(errOut, "unknown command") {
			t.Errorf("corral %s is not a command", name)
		}
	}
}

// containsWord reports whether s has w between non-word characters.
func containsWord(s, w string) bool {
	for i := 0; ; {
		j := strings.Index(s[i:], w)
		if j < 0 {
			return false
		}
		j += i
		before := j == 0 || !isWordByte(s[j-1])
		after := j+len(w) == len(s) || !isWordByte(s[j+len(w)])
		if before && after {
			return true
		}
		i = j + 1
	}
}

func isWordByte(b byte) bool {
	return b == '_' || b == '-' || b >= '0' && b <= '9' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z'
}
