package cli_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"strings"
	"testing"

	ucli "github.com/urfave/cli/v2"

	"github.com/foreman-sched/foreman/cli"
	"github.com/foreman-sched/foreman/cli/agent"
	"github.com/foreman-sched/foreman/cli/bench"
)

// newApp is main.go's App.
func newApp() *ucli.App {
	return cli.NewApp(cli.Build{Version: "test"}, agent.Command("test"), bench.Command())
}

// command is one command of the tree with the names that reach it.
type command struct {
	path []string
	cmd  *ucli.Command
}

func (c command) leaf() bool { return len(c.cmd.Subcommands) == 0 }

func walk(cmds []*ucli.Command, prefix []string, fn func(command)) {
	for _, c := range cmds {
		path := append(append([]string{}, prefix...), c.Name)
		fn(command{path: path, cmd: c})
		walk(c.Subcommands, path, fn)
	}
}

func allCommands() []command {
	var out []command
	walk(newApp().Commands, nil, func(c command) { out = append(out, c) })
	return out
}

// parsed is what a leaf command's Action saw.
type parsed struct {
	args  []string
	flags map[string]string
}

// parse runs args through a fresh App whose leaf Actions only record what
// they were given (so no agent is needed).
func parse(t *testing.T, args ...string) (*parsed, error) {
	t.Helper()
	app := newApp()
	app.Writer, app.ErrWriter = io.Discard, io.Discard
	var got *parsed
	walk(app.Commands, nil, func(c command) {
		if !c.leaf() {
			return
		}
		cmd := c.cmd
		cmd.Action = func(ctx *ucli.Context) error {
			got = &parsed{args: ctx.Args().Slice(), flags: map[string]string{}}
			for _, f := range cmd.Flags {
				n := f.Names()[0]
				var v any
				switch f.(type) {
				case *ucli.GenericFlag:
					v = ctx.Generic(n) // its values need not be flag.Getters
				case *ucli.StringSliceFlag:
					v = ctx.StringSlice(n)
				default:
					v = ctx.Value(n)
				}
				got.flags[n] = fmt.Sprintf("%v %v", ctx.IsSet(n), v)
			}
			return nil
		}
	})
	err := cli.Run(context.Background(), app, append([]string{"foreman"}, args...))
	if err == nil && got == nil {
		t.Fatalf("%v: no leaf command ran", args)
	}
	return got, err
}

// flagArgs sets every flag of cmd, each value-taking one to a valid value.
func flagArgs(cmd *ucli.Command) []string {
	var out []string
	for _, f := range cmd.Flags {
		n := "--" + f.Names()[0]
		switch f.(type) {
		case *ucli.BoolFlag:
			out = append(out, n)
		case *ucli.IntFlag, *ucli.Int64Flag, *ucli.UintFlag, *ucli.Uint64Flag:
			out = append(out, n, "7")
		case *ucli.Float64Flag:
			out = append(out, n, "1.5")
		case *ucli.DurationFlag:
			out = append(out, n, "5m")
		case *ucli.StringSliceFlag, *ucli.GenericFlag:
			out = append(out, n, "k=v")
		default:
			out = append(out, n, "v-"+f.Names()[0])
		}
	}
	return out
}

// placeholder is what a back-quoted span in a flag's usage may hold.
var placeholder = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]*$`)

// TestEveryCommandHelp: `--help` on every command and subcommand exits 0
// with its usage, one default per flag and value names that are names,
// and on a leaf it means the same after an argument.
func TestEveryCommandHelp(t *testing.T) {
	help := func(args ...string) string {
		t.Helper()
		app := newApp()
		var out bytes.Buffer
		app.Writer, app.ErrWriter = &out, io.Discard
		if err := cli.Run(context.Background(), app, append([]string{"foreman"}, args...)); err != nil {
			t.Fatalf("foreman %s: %v", strings.Join(args, " "), err)
		}
		return out.String()
	}
	n := 0
	for _, c := range allCommands() {
		args := append(c.path, "--help")
		out := help(args...)
		if !strings.Contains(out, "USAGE:") || !strings.Contains(out, c.cmd.Usage) {
			t.Errorf("foreman %s: no usage in %q", strings.Join(args, " "), out)
		}
		for _, f := range c.cmd.Flags {
			d, ok := f.(ucli.DocGenerationFlag)
			if !ok {
				continue
			}
			if v, ok := f.(ucli.VisibleFlag); ok && !v.IsVisible() {
				continue // hidden on purpose (agent --gpu-root, for tests)
			}
			// Each flag's usage is printed whole.
			if !strings.Contains(out, d.GetUsage()) {
				t.Errorf("foreman %s: the help lacks --%s's usage %q", strings.Join(args, " "), f.Names()[0], d.GetUsage())
			}
			// urfave/cli prints the first back-quoted span of a usage as
			// the value's name: only a one-word placeholder belongs there
			// (`foreman tls gossip-key` read as --gossip-key's value).
			if _, rest, ok := strings.Cut(d.GetUsage(), "`"); ok {
				if ph, _, _ := strings.Cut(rest, "`"); !placeholder.MatchString(ph) {
					t.Errorf("foreman %s: --%s's usage back-quotes %q, which help prints as the value's name", strings.Join(args, " "), f.Names()[0], ph)
				}
			}
		}
		for _, line := range strings.Split(out, "\n") {
			// One default per flag (a usage that names its default gets
			// none appended), and no command taken for a value's name.
			l := strings.TrimSpace(line)
			name, _, _ := strings.Cut(l, "  ") // "--flag value-name" before the usage
			if strings.Count(l, "(default") > 1 || strings.HasPrefix(l, "--") && strings.Contains(name, " foreman ") {
				t.Errorf("foreman %s: help line %q", strings.Join(args, " "), l)
			}
		}
		if c.leaf() && c.cmd.ArgsUsage != "" && !strings.Contains(c.cmd.ArgsUsage, "-- CMD") {
			if after := help(append(append([]string{}, c.path...), "ARG", "--help")...); after != out {
				t.Errorf("foreman %s ARG --help differs from --help", strings.Join(c.path, " "))
			}
		}
		n++
	}
	if n < 20 {
		t.Fatalf("walked only %d commands", n)
	}
}

// TestFlagsAfterArgs: on every leaf command that takes positional
// arguments, its flags parse to the same values whether they come before,
// after or between the arguments. Commands whose arguments are a command
// line (submit, run) keep everything after it for the job (TestDoubleDash).
func TestFlagsAfterArgs(t *testing.T) {
	checked := 0
	for _, c := range allCommands() {
		if !c.leaf() || c.cmd.ArgsUsage == "" || len(c.cmd.Flags) == 0 || strings.Contains(c.cmd.ArgsUsage, "-- CMD") {
			continue
		}
		name := strings.Join(c.path, " ")
		flags := flagArgs(c.cmd)
		pos := []string{"a1", "a2"}
		cat := func(parts ...[]string) []string {
			var out []string
			for _, p := range parts {
				out = append(out, p...)
			}
			return out
		}
		first, err := parse(t, cat(c.path, flags, pos)...)
		if err != nil {
			t.Fatalf("%s, flags first: %v", name, err)
		}
		if !reflect.DeepEqual(first.args, pos) {
			t.Fatalf("%s, flags first: args %q, want %q", name, first.args, pos)
		}
		for form, args := range map[string][]string{
			"after":   cat(c.path, pos, flags),
			"between": cat(c.path, pos[:1], flags, pos[1:]),
		} {
			got, err := parse(t, args...)
			if err != nil {
				t.Fatalf("%s, flags %s: %v", name, form, err)
			}
			if !reflect.DeepEqual(got, first) {
				t.Errorf("%s, flags %s: %+v, want %+v (flags first)", name, form, got, first)
			}
		}
		checked++
	}
	if checked < 6 {
		t.Fatalf("only %d commands with arguments and flags checked", checked)
	}
}

// TestReadmeForms: the examples the issue and README give.
func TestReadmeForms(t *testing.T) {
	for _, tc := range []struct {
		args []string
		flag string
		want string
	}{
		{[]string{"job", "status", "ID", "--json"}, "json", "true true"},
		{[]string{"logs", "ID", "-f"}, "follow", "true true"},
		{[]string{"node", "drain", "NAME", "--deadline", "5m"}, "deadline", "true 5m0s"},
		{[]string{"node", "drain", "NAME", "--deadline=5m"}, "deadline", "true 5m0s"},
		{[]string{"acl", "token", "revoke", "ACCESSOR_ID", "--token", "fmn_x"}, "token", "true fmn_x"},
	} {
		got, err := parse(t, tc.args...)
		if err != nil {
			t.Fatalf("%q: %v", tc.args, err)
		}
		if got.flags[tc.flag] != tc.want || len(got.args) != 1 {
			t.Errorf("%q: --%s %q, args %q; want %q and one argument", tc.args, tc.flag, got.flags[tc.flag], got.args, tc.want)
		}
	}
}

// TestDoubleDash: "--" ends flag parsing; a command line's first word
// starts the job's own arguments, flags included.
func TestDoubleDash(t *testing.T) {
	for _, tc := range []struct {
		args     []string
		wantArgs []string
		cpu      string
	}{
		{[]string{"submit", "--cpu", "1", "--", "sh", "-c", "echo hi", "--not-a-flag"}, []string{"sh", "-c", "echo hi", "--not-a-flag"}, "true 1"},
		{[]string{"submit", "--cpu", "1", "sh", "-c", "echo hi", "--cpu", "2"}, []string{"sh", "-c", "echo hi", "--cpu", "2"}, "true 1"},
		{[]string{"run", "--", "--cpu", "3"}, []string{"--cpu", "3"}, "false "},
		// schedule create names the schedule first; its flags may follow the name.
		{[]string{"schedule", "create", "nightly", "--cpu", "1", "--", "sh", "-c", "echo hi"}, []string{"nightly", "sh", "-c", "echo hi"}, "true 1"},
		{[]string{"schedule", "create", "nightly", "--cpu", "1", "sh", "--cpu", "2"}, []string{"nightly", "sh", "--cpu", "2"}, "true 1"},
	} {
		got, err := parse(t, tc.args...)
		if err != nil {
			t.Fatalf("%q: %v", tc.args, err)
		}
		if !reflect.DeepEqual(got.args, tc.wantArgs) || got.flags["cpu"] != tc.cpu {
			t.Errorf("%q: args %q cpu %q; want %q and %q", tc.args, got.args, got.flags["cpu"], tc.wantArgs, tc.cpu)
		}
	}
	got, err := parse(t, "job", "status", "--json", "--", "--not-a-flag")
	if err != nil || !reflect.DeepEqual(got.args, []string{"--not-a-flag"}) || got.flags["json"] != "true true" {
		t.Fatalf("job status --json -- --not-a-flag: %+v, %v", got, err)
	}
}

// TestDuplicateFlag: a non-repeatable flag given twice, in either place, is
// a one-line usage error; repeatable ones accumulate.
func TestDuplicateFlag(t *testing.T) {
	for _, args := range [][]string{
		{"job", "status", "--json", "ID", "--json"},
		{"job", "status", "ID", "--json", "--json=false"},
		{"node", "drain", "--deadline", "5m", "NAME", "--deadline", "1m"},
		{"submit", "--cpu", "1", "--cpu", "2", "--", "true"},
		{"logs", "-f", "ID", "--follow"}, // an alias is the same flag
		{"agent", "--dev", "--dev"},
	} {
		_, err := parse(t, args...)
		var ec ucli.ExitCoder
		if !errors.As(err, &ec) || ec.ExitCode() != 2 || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "more than once") {
			t.Errorf("%q: err %v, want a one-line exit 2 naming the repeated flag", args, err)
		}
	}
	got, err := parse(t, "submit", "--label", "a=1", "--label", "b=2", "--", "true")
	if err != nil || got.flags["label"] != "true a=1 b=2" {
		t.Fatalf("repeated --label: %+v, %v", got, err)
	}
	got, err = parse(t, "job", "ls", "--label", "a=1", "--label", "b=2")
	if err != nil || got.flags["label"] != "true [a=1 b=2]" {
		t.Fatalf("repeated job ls --label: %+v, %v", got, err)
	}
}
