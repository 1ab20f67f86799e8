// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package cli

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/corral-dev/corral/internal/cli/client"
)

const bashCompletion = `# bash completion for corral; load with: source <(corral completion bash)
_corral() {
  local cur=${COMP_WORDS[COMP_CWORD]}
  if [ "$COMP_CWORD" -eq 1 ]; then
    COMPREPLY=($(compgen -W "%[1]s" -- "$cur")); return
  fi
  case "${COMP_WORDS[1]}" in
    %[2]s)
      case "$cur" in
        -*) ;;
        *) COMPREPLY=($(compgen -W "$(corral ls -q 2>/dev/null)" -- "$cur")); return ;;
      esac ;;
    %[3]s)
      if [ "$COMP_CWORD" -eq 2 ]; then COMPREPLY=($(compgen -W "$(_corral_sub ${COMP_WORDS[1]})" -- "$cur")); return; fi ;;
  esac
  COMPREPLY=($(compgen -f -- "$cur"))
}
_corral_sub() {
  case "$1" in
%[4]s
  esac
}
complete -F _corral corral
`

const zshCompletion = `#compdef corral
# zsh completion for corral; load with: source <(corral completion zsh)
_corral() {
  if (( CURRENT == 2 )); then
    compadd -- %[1]s; return
  fi
  case "${words[2]}" in
    %[2]s)
      if [[ "${words[CURRENT]}" != -* ]]; then compadd -- ${(f)"$(corral ls -q 2>/dev/null)"}; fi ;;
%[3]s
    *) _files ;;
  esac
}
compdef _corral corral
`

const fishCompletion = `# fish completion for corral; load with: corral completion fish | source
complete -c corral -f
complete -c corral -n "__fish_use_subcommand" -a "%[1]s"
complete -c corral -n "__fish_seen_subcommand_from %[2]s" -a "(corral ls -q 2>/dev/null)"
%[3]s`

func completionCommand() command {
	return command{
		Name: "completion", Summary: "print a bash, zsh or fish completion script", Noun: "shell",
		Subs: []client.Subcommand{
			{Name: "bash", Usage: "bash", Summary: "load with: source <(corral completion bash)", Run: completionScript("bash")},
			{Name: "zsh", Usage: "zsh", Summary: "load with: source <(corral completion zsh)", Run: completionScript("zsh")},
			{Name: "fish", Usage: "fish", Summary: "load with: corral completion fish | source", Run: completionScript("fish")},
		},
	}
}

// completionScript prints shell's completion script, made from the
// command table: the ids are fetched with 'corral ls -q'.
func completionScript(shell string) func(context.Context, *env, []string) int {
	return func(_ context.Context, e *env, args []string) int {
		if len(args) != 0 {
			return client.Fail(e, "completion %s takes no arguments (got %q)", shell, args)
		}
		var names, idCommands, withSubs []string
		subcommands := map[string][]string{}
		for _, c := range commands() {
			names = append(names, c.Name)
			if c.TakesID {
				idCommands = append(idCommands, c.Name)
			}
			if len(c.Subs) > 0 {
				withSubs = append(withSubs, c.Name)
				subcommands[c.Name] = c.SubNames()
			}
		}
		sort.Strings(names)
		sort.Strings(withSubs)
		switch shell {
		case "bash":
			var cases strings.Builder
			for _, k := range withSubs {
				fmt.Fprintf(&cases, "    %s) echo %q ;;\n", k, strings.Join(subcommands[k], " "))
			}
			fmt.Fprintf(e.Stdout, bashCompletion, strings.Join(names, " "), strings.Join(idCommands, "|"), strings.Join(withSubs, "|"), strings.TrimRight(cases.String(), "\n"))
		case "zsh":
			var cases strings.Builder
			for _, k := range withSubs {
				fmt.Fprintf(&cases, "    %s) (( CURRENT == 3 )) && compadd -- %s ;;\n", k, strings.Join(subcommands[k], " "))
			}
			fmt.Fprintf(e.Stdout, zshCompletion, strings.Join(names, " "), strings.Join(idCommands, "|"), strings.TrimRight(cases.String(), "\n"))
		case "fish":
			var subs strings.Builder
			for _, k := range withSubs {
				fmt.Fprintf(&subs, "complete -c corral -n \"__fish_seen_subcommand_from %s\" -a %q\n", k, strings.Join(subcommands[k], " "))
			}
			fmt.Fprintf(e.Stdout, fishCompletion, strings.Join(names, " "), strings.Join(idCommands, " "), subs.String())
		}
		return 0
	}
}
