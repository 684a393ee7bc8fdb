package api_test

import (
	"os/exec"
	"syscall"
)

// dieWithTest ends the agent when the test process does, even when an
// example's log.Fatal skips TestMain's cleanup.
func dieWithTest(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}
