package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	ucli "github.com/urfave/cli/v2"
)

// A flag whose usage already says its default ("(default $FOREMAN_ADDR,
// else …)", "(default: the latest)") would get urfave/cli's own
// "(default: 0)" appended as well: help prints the usage's only.
var flagStringer = ucli.FlagStringer

func init() {
	ucli.FlagStringer = func(f ucli.Flag) string {
		s := flagStringer(f)
		if d, ok := f.(ucli.DocGenerationFlag); ok && strings.Contains(d.GetUsage(), "(default") && d.GetDefaultText() != "" {
			s = strings.TrimSuffix(s, " (default: "+d.GetDefaultText()+")")
		}
		return s
	}
}

// NewApp is the whole command line: agent first, then version, the client
// commands of this package, and the commands in more (bench).
func NewApp(b Build, agent *ucli.Command, more ...*ucli.Command) *ucli.App {
	version := b.Version
	cmds := append([]*ucli.Command{agent, versionCommand(b), completionCommand(), tlsCommand()}, clientCommands()...)
	return &ucli.App{
		Name:                 "foreman",
		Usage:                "a distributed job scheduler in one binary",
		Version:              version,
		EnableBashCompletion: true,
		HideVersion:          true,
		Commands:             append(cmds, more...),
		ExitErrHandler:       func(*ucli.Context, error) {}, // Main prints errors itself, once
	}
}

// Run runs app with args (args[0] is the program name) after moving each
// leaf command's flags in front of its positional arguments (flags.go).
func Run(ctx context.Context, app *ucli.App, args []string) error {
	args, err := normalizeArgs(app, args)
	if err != nil {
		return err
	}
	return app.RunContext(ctx, args)
}

// Main runs app and returns the process's exit code, having printed any
// error as one line on stderr.
func Main(app *ucli.App, args []string, stderr io.Writer) int {
	err := Run(context.Background(), app, args)
	if err == nil {
		return 0
	}
	// An empty message means the command already said everything (foreman
	// run passing on a job's exit code); only the code remains.
	if msg := err.Error(); msg != "" {
		fmt.Fprintln(stderr, "foreman:", msg)
	}
	var ec ucli.ExitCoder
	if errors.As(err, &ec) && ec.ExitCode() != 0 {
		return ec.ExitCode()
	}
	return 1
}
