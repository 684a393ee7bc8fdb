// Command foreman is a distributed job scheduler in one binary: the agent,
// the CLI, the per-attempt supervisor and the container shim. This file is
// only the entry point; the command line lives in cli/ (see
// docs/architecture.md).
package main

import (
	"os"
	"runtime"

	"github.com/foreman-sched/foreman/cli"
	"github.com/foreman-sched/foreman/cli/agent"
	"github.com/foreman-sched/foreman/cli/bench"
	"github.com/foreman-sched/foreman/exec"
	"github.com/foreman-sched/foreman/exec/container"
)

// version and commit are set at build time (-X main.version=...
// -X main.commit=...); an empty commit is read from the Go build info.
var (
	version = "dev"
	commit  = ""
)

// A supervisor's main goroutine keeps the main thread to itself. Each
// container start runs a libcontainer goroutine that locks its thread and
// joins the container's mount namespace; the thread ends with the goroutine,
// except the main thread, which cannot exit and would stay in that
// namespace (pinning it, and the old attempt's mounts) for the life of the
// process. A recycled supervisor serves many attempts, so it must never
// lend the main thread out (exec's cleanliness check also compares the main
// thread's mount namespace). LockOSThread in init makes main run locked.
func init() {
	if len(os.Args) > 1 && os.Args[1] == "supervise" {
		runtime.LockOSThread()
	}
}

func main() {
	// Re-exec entry points come first: libcontainer's container init
	// ("foreman init"), the per-attempt supervisor and the PID-1 shim must
	// not pay for, or be confused by, the CLI.
	container.InitIfRequested()
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "supervise":
			// Only supervisors run drivers; the agent registers its own
			// (with its state root), and the CLI needs none.
			agent.RegisterContainerDriver()
			os.Exit(exec.SuperviseMain(os.Args[2:]))
		case "shim":
			os.Exit(exec.ShimMain(os.Args[2:]))
		}
	}
	app := cli.NewApp(cli.Build{Version: version, Commit: commit}, agent.Command(version), bench.Command())
	os.Exit(cli.Main(app, os.Args, os.Stderr))
}
