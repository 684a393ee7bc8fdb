package exec

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"
)

// ShimMain is `foreman shim -- CMD ARGS...` (args exclude the subcommand):
// a tiny PID 1 for containers. The kernel drops signals to a namespace's
// PID 1 that has no handler, so a bare `sleep` as PID 1 would ignore the
// kill signal; the shim runs the command as a child in its own process
// group, forwards termination signals to that group, reaps every zombie,
// and exits with the child's status (128+n when killed by signal n).
func ShimMain(args []string) int {
	if len(args) > 0 && args[0] == "--" {
		args = args[1:]
	}
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "usage: foreman shim -- CMD [ARGS...]")
		return 127
	}
	// Subscribe before starting the child so no early signal is lost.
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP,
		syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGCHLD)
	// Outside a pid namespace (tests, the process driver) orphans would go to
	// the host's init; as a subreaper they come to us and get reaped.
	unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
	path, err := lookPath(args[0], envValue(os.Environ(), "PATH", defaultPath), ".")
	if err != nil {
		fmt.Fprintf(os.Stderr, "foreman shim: %v\n", err)
		return 127
	}
	p, err := os.StartProcess(path, args, &os.ProcAttr{
		Files: []*os.File{os.Stdin, os.Stdout, os.Stderr},
		Env:   os.Environ(),
		Sys:   &syscall.SysProcAttr{Setpgid: true},
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "foreman shim: start %s: %v\n", args[0], err)
		return 126
	}
	child := p.Pid
	for sig := range sigs {
		if sig != syscall.SIGCHLD {
			syscall.Kill(-child, sig.(syscall.Signal))
			continue
		}
		// Reap everything that has exited: the child and any orphans that
		// were re-parented to us.
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
			if pid != child {
				continue
			}
			if ws.Signaled() {
				return 128 + int(ws.Signal())
			}
			return ws.ExitStatus()
		}
	}
	return 0
}
