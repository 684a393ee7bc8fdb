package cli

import (
	"fmt"

	ucli "github.com/urfave/cli/v2"
)

// Shell completion. The App has EnableBashCompletion: run with
// --generate-bash-completion as its last argument, any command prints its
// subcommands or (after a "-") its flags instead of running. These scripts
// ask the binary that way at each <TAB>, so they never go stale as commands
// are added. Adapted from urfave/cli v2's autocomplete/ scripts, without
// their dependency on the bash-completion package.

const bashCompletion = `# bash completion for foreman: source <(foreman completion bash)
_foreman_complete() {
  local cur="${COMP_WORDS[COMP_CWORD]}"
  local words=("${COMP_WORDS[@]:0:COMP_CWORD}")
  local opts
  if [[ "$cur" == -* ]]; then
    opts=$("${words[@]}" "$cur" --generate-bash-completion 2>/dev/null)
  else
    opts=$("${words[@]}" --generate-bash-completion 2>/dev/null)
  fi
  COMPREPLY=($(compgen -W "${opts}" -- "${cur}"))
  return 0
}
complete -o bashdefault -o default -F _foreman_complete foreman
`

const zshCompletion = `#compdef foreman
# zsh completion for foreman: source <(foreman completion zsh) after compinit,
# or save as _foreman in a directory of $fpath.
_foreman() {
  local -a opts
  local cur=${words[CURRENT]}
  if [[ "$cur" == -* ]]; then
    opts=("${(@f)$(${words[1,CURRENT-1]} ${cur} --generate-bash-completion 2>/dev/null)}")
  else
    opts=("${(@f)$(${words[1,CURRENT-1]} --generate-bash-completion 2>/dev/null)}")
  fi
  if [[ -n "${opts[1]}" ]]; then
    _describe 'values' opts
  else
    _files
  fi
}
if [[ "${funcstack[1]}" == "_foreman" ]]; then
  _foreman "$@"
else
  compdef _foreman foreman
fi
`

func completionCommand() *ucli.Command {
	script := func(s string) ucli.ActionFunc {
		return func(c *ucli.Context) error {
			_, err := fmt.Fprint(Stdout(c), s)
			return err
		}
	}
	return &ucli.Command{
		Name:  "completion",
		Usage: "print a shell completion script (bash or zsh)",
		Description: `bash: source <(foreman completion bash)   (or save it in /etc/bash_completion.d/foreman)
zsh:  source <(foreman completion zsh)    (after compinit; or save it as _foreman in $fpath)`,
		Subcommands: []*ucli.Command{
			{Name: "bash", Usage: "print the bash completion script", Action: script(bashCompletion)},
			{Name: "zsh", Usage: "print the zsh completion script", Action: script(zshCompletion)},
		},
	}
}
