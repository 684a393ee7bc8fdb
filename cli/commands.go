package cli

import (
	"errors"
	"fmt"
	"os"
	"strings"

	ucli "github.com/urfave/cli/v2"

	"github.com/foreman-sched/foreman/api"
)

// clientCommands returns every command of this package that talks to an
// agent over the API; NewApp adds them to the App's commands. Each carries
// its own --addr (and the App may carry one too: the innermost explicit one
// wins).
func clientCommands() []*ucli.Command {
	return []*ucli.Command{
		submitCommand(),
		runCommand(),
		logsCommand(),
		execCommand(),
		eventsCommand(),
		jobCommand(),
		workflowCommand(),
		artifactsCommand(),
		nodeCommand(),
		queueCommand(),
		namespaceCommand(),
		usageCommand(),
		scheduleCommand(),
		clusterCommand(),
		operatorCommand(),
		aclCommand(),
	}
}

// clientFlags are the connection flags of every client command.
func clientFlags() []ucli.Flag {
	return []ucli.Flag{
		// No EnvVars: an env-set flag would count as "set" on every
		// command and hide an explicit --addr given to the App.
		&ucli.StringFlag{
			Name:        "addr",
			Usage:       "address of any agent's API (default $" + api.EnvAddress + ", else " + api.DefaultAddress + ")",
			DefaultText: "$" + api.EnvAddress,
		},
		&ucli.StringFlag{
			Name:        "token",
			Usage:       "ACL token secret, sent as Authorization: Bearer (default $" + api.EnvToken + ")",
			DefaultText: "$" + api.EnvToken,
		},
		&ucli.StringFlag{
			Name:        "namespace",
			Usage:       "namespace to act in (default $" + api.EnvNamespace + ", else default; \"*\" lists every namespace)",
			DefaultText: "$" + api.EnvNamespace,
		},
		&ucli.StringFlag{Name: "ca-cert", Usage: "CA certificate (PEM) to verify an https agent with (default $" + api.EnvCACert + ")"},
		&ucli.StringFlag{Name: "client-cert", Usage: "client certificate (PEM) to present (default $" + api.EnvClientCert + ")"},
		&ucli.StringFlag{Name: "client-key", Usage: "key of --client-cert (default $" + api.EnvClientKey + ")"},
	}
}

// WithClientFlags adds the connection flags to a leaf command's own.
func WithClientFlags(flags ...ucli.Flag) []ucli.Flag {
	return append(flags, clientFlags()...)
}

// ClientCommand is a leaf command that talks to an agent: its own flags
// plus the connection flags, and its action's error made one line (Error).
func ClientCommand(name, usage, argsUsage string, action ucli.ActionFunc, flags ...ucli.Flag) *ucli.Command {
	return &ucli.Command{Name: name, Usage: usage, ArgsUsage: argsUsage, Flags: WithClientFlags(flags...),
		Action: func(c *ucli.Context) error { return Error(action(c)) }}
}

// commandGroup is a command that only holds subcommands.
func commandGroup(name, usage string, subcommands ...*ucli.Command) *ucli.Command {
	return &ucli.Command{Name: name, Usage: usage, Subcommands: subcommands}
}

// ConsistentFlag makes a read go through the leader (readClient).
var ConsistentFlag = &ucli.BoolFlag{Name: "consistent", Usage: "read through the leader"}

// Error turns any error into a one-line ucli.ExitCoder, so Main prints
// exactly one line on stderr and exits non-zero.
func Error(err error) error {
	if err == nil {
		return nil
	}
	var ec ucli.ExitCoder
	if errors.As(err, &ec) {
		return err
	}
	msg := err.Error()
	var ae *api.Error
	if errors.As(err, &ae) {
		msg = ae.Message
		if ae.Code == api.CodeNoLeader || ae.Code == api.CodeNodeUnreachable {
			msg += " (the cluster may be electing a leader; retry)"
		}
	}
	return Exitf(1, "%s", msg)
}

// Exitf is a one-line error with an exit code.
func Exitf(code int, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	msg = strings.Join(strings.Fields(strings.ReplaceAll(msg, "\n", " ")), " ")
	return ucli.Exit(msg, code)
}

// silentExit ends the process with code and prints nothing (the command
// already explained itself, as run does when the job fails).
type silentExit int

func (e silentExit) Error() string { return "" }
func (e silentExit) ExitCode() int { return int(e) }

// Stderrf prints one diagnostic line to stderr.
func Stderrf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "foreman: "+format+"\n", args...)
}
