package cli

import (
	"strings"

	ucli "github.com/urfave/cli/v2"
)

// Flags anywhere. urfave/cli v2 parses a command's flags with Go's flag
// package, which stops at the first positional argument, so
// `foreman job status ID --json` would see "--json" as a second argument
// (v2 has no option for this; v3 does). normalizeArgs rewrites the
// arguments before the App parses them: it walks the command names down to
// the leaf command and moves the leaf's flags (with their values) in front
// of its positional arguments, followed by "--" so that a positional
// argument is never read as a flag. Knowing each flag of the leaf, it also
// refuses a non-repeatable flag given twice (the flag package would keep
// the last value silently).
//
// Rules for the leaf's arguments:
//   - "--" ends the flags: everything after it is positional, as before.
//   - A command whose arguments are a command line (ArgsUsage "-- CMD ...":
//     submit, run) treats its first positional argument as the start of that
//     command line, so `foreman submit sh -c 'echo hi'` still passes -c to
//     the job; flags go before the command (or before "--"). One whose
//     ArgsUsage starts "NAME " (schedule create) or "JOB_ID " (exec)
//     takes one argument first.
//   - An unknown flag is kept among the flags, so the App reports it
//     ("flag provided but not defined") rather than taking it as an argument.
//   - A flag that takes a value consumes the next argument unless written
//     --flag=value; bool flags never consume one.
//   - --help (-h) anywhere shows the command's help; the arguments are
//     dropped (the App would read the first as a help topic).
//
// Anything the walk does not recognise (help topics, unknown commands, shell
// completion) is passed through unchanged for the App to handle as before.
func normalizeArgs(app *ucli.App, args []string) ([]string, error) {
	if len(args) < 2 || args[len(args)-1] == "--generate-bash-completion" {
		return args, nil
	}
	out := []string{args[0]}
	var path []string // the command names, for messages
	rest := args[1:]
	flags, cmds := app.Flags, app.Commands
	for {
		// Skip this level's own flags up to the next command name.
		specs := flagSpecs(flags)
		i := 0
		for i < len(rest) && isFlag(rest[i]) {
			name, _, hasValue := splitFlag(rest[i])
			if s := specs[name]; s != nil && s.takesValue && !hasValue {
				i++
			}
			i++
		}
		if i >= len(rest) {
			return args, nil
		}
		cmd := findCommand(cmds, rest[i])
		if cmd == nil || cmd.SkipFlagParsing {
			return args, nil
		}
		out = append(out, rest[:i+1]...)
		path = append(path, cmd.Name)
		rest = rest[i+1:]
		if len(cmd.Subcommands) > 0 {
			flags, cmds = cmd.Flags, cmd.Subcommands
			continue
		}
		leaf, err := reorderLeaf(cmd, strings.Join(path, " "), rest)
		if err != nil {
			return nil, err
		}
		return append(out, leaf...), nil
	}
}

// reorderLeaf returns the leaf command's arguments as flags, then "--" and
// the positional arguments (if any).
func reorderLeaf(cmd *ucli.Command, name string, args []string) ([]string, error) {
	specs := flagSpecs(cmd.Flags)
	commandLine := takesCommandLine(cmd)
	lead := namesBeforeCommandLine(cmd)
	var flags, pos []string
	seen := map[string]bool{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			pos = append(pos, args[i+1:]...)
			break
		}
		if !isFlag(a) {
			if commandLine && len(pos) >= lead {
				pos = append(pos, args[i:]...)
				break
			}
			pos = append(pos, a)
			continue
		}
		flags = append(flags, a)
		fname, _, hasValue := splitFlag(a)
		s := specs[fname]
		if s == nil {
			continue // unknown: the App reports it
		}
		if seen[s.name] && !s.repeatable && s.name != "help" {
			return nil, Exitf(2, "%s: flag --%s given more than once (it is not repeatable)", name, s.name)
		}
		seen[s.name] = true
		if s.takesValue && !hasValue && i+1 < len(args) {
			i++
			flags = append(flags, args[i])
		}
	}
	if seen["help"] {
		// Help ignores arguments (the App would take the first as a help
		// topic and fail): `foreman job status ID --help` shows the help.
		return []string{"--help"}, nil
	}
	if len(pos) > 0 {
		flags = append(append(flags, "--"), pos...)
	}
	return flags, nil
}

// flagSpec is what reordering needs to know about one flag.
type flagSpec struct {
	name       string // the canonical (first) name
	takesValue bool
	repeatable bool
}

// flagSpecs indexes flags by every name and alias, plus the help flag that
// the App adds to every command.
func flagSpecs(flags []ucli.Flag) map[string]*flagSpec {
	m := map[string]*flagSpec{}
	help := &flagSpec{name: "help"}
	m["help"], m["h"] = help, help
	for _, f := range flags {
		names := f.Names()
		if len(names) == 0 {
			continue
		}
		s := &flagSpec{name: names[0], takesValue: true}
		if v, ok := f.(ucli.DocGenerationFlag); ok {
			s.takesValue = v.TakesValue()
		}
		if v, ok := f.(ucli.DocGenerationSliceFlag); ok && v.IsSliceFlag() {
			s.repeatable = true
		}
		if g, ok := f.(*ucli.GenericFlag); ok {
			if _, ok := g.Value.(*multi); ok {
				s.repeatable = true
			}
		}
		for _, n := range names {
			m[n] = s
		}
	}
	return m
}

// takesCommandLine reports whether cmd's positional arguments are a command
// line to run (its usage says "-- CMD"), which keeps its own flags.
func takesCommandLine(cmd *ucli.Command) bool {
	return strings.Contains(cmd.ArgsUsage, "-- CMD")
}

// namesBeforeCommandLine is how many positional arguments come before a
// command line: `schedule create NAME [flags] -- CMD` names its schedule
// first, `exec JOB_ID [flags] -- CMD` its job, and flags may follow the
// name.
func namesBeforeCommandLine(cmd *ucli.Command) int {
	if strings.HasPrefix(cmd.ArgsUsage, "NAME ") || strings.HasPrefix(cmd.ArgsUsage, "JOB_ID ") {
		return 1
	}
	return 0
}

// isFlag: "-x", "--x", "--x=v"; not "-" (stdin, by convention) nor "--".
func isFlag(a string) bool {
	return len(a) > 1 && a[0] == '-' && a != "--"
}

// splitFlag returns a flag argument's name and, for --name=value, its value.
func splitFlag(a string) (name, value string, hasValue bool) {
	name = strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-")
	name, value, hasValue = strings.Cut(name, "=")
	return name, value, hasValue
}

func findCommand(cmds []*ucli.Command, name string) *ucli.Command {
	for _, c := range cmds {
		if c.HasName(name) {
			return c
		}
	}
	return nil
}
