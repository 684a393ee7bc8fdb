package container

import (
	"os"

	"github.com/opencontainers/runc/libcontainer"

	// Blank imports required by libcontainer: nsenter installs the cgo
	// constructor (nsexec) that runs before the Go runtime in `init`
	// re-execs; devices registers the cgroup device-rule manager.
	_ "github.com/opencontainers/cgroups/devices"
	_ "github.com/opencontainers/runc/libcontainer/nsenter"
)

// InitArg is the argv[1] libcontainer uses when it re-executes this binary
// inside a new container. It can never be a user-facing subcommand.
const InitArg = "init"

// InitIfRequested must be the first statement of main(). When the binary was
// re-executed by libcontainer (argv[1] == "init") it becomes the container's
// init and never returns; otherwise it returns immediately.
func InitIfRequested() {
	if len(os.Args) > 1 && os.Args[1] == InitArg {
		libcontainer.Init() // never returns
	}
}
