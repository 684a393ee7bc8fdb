package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/containerd/console"
	ucli "github.com/urfave/cli/v2"

	"github.com/foreman-sched/foreman/api"
	"github.com/foreman-sched/foreman/fsm"
)

// exitExecInterrupted is foreman exec's code when Ctrl-C (without -t)
// ended it: the command was killed, as a SIGINTed process.
const exitExecInterrupted = 130

func execCommand() *ucli.Command {
	return &ucli.Command{
		Name:      "exec",
		Usage:     "run a command inside a running job's attempt (its container, or beside a process job) and exit with its code",
		ArgsUsage: "JOB_ID [flags] -- CMD [ARGS...]",
		Description: "Runs CMD in the job's live attempt (the latest unless --attempt): in a container job's\n" +
			"container (its namespaces, cgroup, files, user and environment, working directory /task), or\n" +
			"on the host beside a process job (its user, working directory and environment; a process job\n" +
			"has no isolation to enter). -i forwards stdin, -t gives the command a terminal (raw mode and\n" +
			"window size when stdin is one; Ctrl-C then goes to the command). Exits with the command's exit\n" +
			"code. Ending foreman exec kills the command, never the job. Needs the exec permission.",
		UseShortOptionHandling: true,
		Flags: WithClientFlags(
			&ucli.BoolFlag{Name: "stdin", Aliases: []string{"i"}, Usage: "forward stdin to the command"},
			&ucli.BoolFlag{Name: "tty", Aliases: []string{"t"}, Usage: "run the command on a terminal"},
			&ucli.IntFlag{Name: "attempt", Usage: "attempt number (default: the latest; it must be running)"},
			&ucli.IntFlag{Name: "index", Usage: "of an array job: the task at this index"},
			&ucli.IntFlag{Name: "task", Usage: "of a gang: the running attempt of this task (GANG_INDEX)"},
		),
		Action: func(c *ucli.Context) error { return Error(execJob(c)) },
	}
}

func execJob(c *ucli.Context) error {
	args := c.Args().Slice()
	if len(args) < 2 {
		return Exitf(2, "exec takes a JOB_ID and a command: foreman exec JOB_ID -- CMD [ARGS...]")
	}
	id, command := args[0], args[1:]
	if c.IsSet("index") {
		id = fsm.TaskID(id, c.Int("index"))
	}
	if c.Int("attempt") < 0 {
		return Exitf(2, "--attempt must be 1 or more (got %d)", c.Int("attempt"))
	}
	cl, err := newClient(c)
	if err != nil {
		return err
	}
	attempt := c.Int("attempt")
	if c.IsSet("task") {
		if attempt, err = gangTaskAttempt(c, cl, id, c.Int("task")); err != nil {
			return err
		}
	}
	req := api.ExecRequest{Command: command, TTY: c.Bool("tty"), Stdin: c.Bool("stdin")}
	s := api.ExecStreams{Stdout: Stdout(c), Stderr: os.Stderr}
	if req.Stdin {
		s.Stdin = os.Stdin
	}
	ctx := c.Context
	// A terminal: raw mode (keys, Ctrl-C included, go to the command) and
	// its size, now and on every SIGWINCH. Without a local terminal -t
	// still gives the command one (its output then comes raw).
	var term console.Console
	if req.TTY {
		if t, err := console.ConsoleFromFile(os.Stdin); err == nil {
			term = t
		}
	}
	if term != nil {
		if ws, err := term.Size(); err == nil {
			req.Width, req.Height = int(ws.Width), int(ws.Height)
		}
		if err := term.SetRaw(); err != nil {
			return err
		}
		defer term.Reset()
		resize := make(chan api.WindowSize, 1)
		winch := make(chan os.Signal, 1)
		signal.Notify(winch, syscall.SIGWINCH)
		defer signal.Stop(winch)
		go func() {
			for range winch {
				if ws, err := term.Size(); err == nil {
					select {
					case resize <- api.WindowSize{Width: int(ws.Width), Height: int(ws.Height)}:
					default:
					}
				}
			}
		}()
		s.Resize = resize
	} else {
		var stop context.CancelFunc
		ctx, stop = signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
		defer stop()
	}
	code, err := cl.Exec(ctx, id, attempt, req, s)
	if term != nil {
		_ = term.Reset()
	}
	if err != nil {
		if errors.Is(err, context.Canceled) && c.Context.Err() == nil {
			return silentExit(exitExecInterrupted)
		}
		return err
	}
	if code != 0 {
		return silentExit(code)
	}
	return nil
}

// gangTaskAttempt is the running attempt of task i of gang job id.
func gangTaskAttempt(c *ucli.Context, cl *api.Client, id string, i int) (int, error) {
	d, err := cl.GetJob(c.Context, id)
	if err != nil {
		return 0, err
	}
	if d.Job.Spec.Gang == nil {
		return 0, Exitf(2, "--task: job %s is not a gang", id)
	}
	if i < 0 || i >= d.Job.Spec.Gang.Size {
		return 0, Exitf(2, "--task %d: gang %s has tasks 0-%d", i, id, d.Job.Spec.Gang.Size-1)
	}
	for k := len(d.Attempts) - 1; k >= 0; k-- {
		if a := d.Attempts[k]; a.Task != nil && a.Task.Index == i && a.State == api.AttemptRunning {
			return a.Attempt, nil
		}
	}
	return 0, fmt.Errorf("task %d of gang %s has no running attempt: nothing to exec into", i, id)
}
