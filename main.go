// Command foreman is a distributed job scheduler in one binary: the agent,
// the CLI, the per-attempt supervisor and the container shim.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/foreman-sched/foreman/exec"
	"github.com/foreman-sched/foreman/exec/container"
)

// version is set at build time (-X main.version=...).
var version = "dev"

func main() {
	// Re-exec entry points come first: libcontainer's container init
	// ("foreman init"), the per-attempt supervisor and the PID-1 shim must
	// not pay for, or be confused by, the CLI.
	container.InitIfRequested()
	registerContainerDriver()
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "supervise":
			os.Exit(exec.SuperviseMain(os.Args[2:]))
		case "shim":
			os.Exit(exec.ShimMain(os.Args[2:]))
		}
	}

	app := &cli.App{
		Name:                 "foreman",
		Usage:                "a distributed job scheduler in one binary",
		Version:              version,
		EnableBashCompletion: true,
		HideVersion:          true,
		Commands:             append([]*cli.Command{agentCommand(), versionCommand()}, clientCommands()...),
		ExitErrHandler:       func(*cli.Context, error) {}, // main prints errors itself, once
	}
	if err := app.Run(os.Args); err != nil {
		// An empty message means the command already said everything (foreman
		// run passing on a job's exit code); only the code remains.
		if msg := err.Error(); msg != "" {
			fmt.Fprintln(os.Stderr, "foreman:", msg)
		}
		var ec cli.ExitCoder
		if errors.As(err, &ec) && ec.ExitCode() != 0 {
			os.Exit(ec.ExitCode())
		}
		os.Exit(1)
	}
}

func versionCommand() *cli.Command {
	return &cli.Command{
		Name:  "version",
		Usage: "print the version of this binary",
		Action: func(c *cli.Context) error {
			fmt.Fprintf(c.App.Writer, "foreman %s\n", version)
			return nil
		},
	}
}
