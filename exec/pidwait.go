package exec

import (
	"os"

	"golang.org/x/sys/unix"
)

// awaitExit blocks until process pid has exited, parked in the netpoller on
// a pidfd instead of in a blocking wait. A goroutine blocked in a syscall
// holds its P until the runtime's sysmon thread takes it back, so sysmon
// polls to do that, and polls afresh when the wait returns; parked, the
// supervisor is idle between its lease renewals and sysmon sleeps.
// Reaping (os.Process.Wait) is immediate afterwards. false: the kernel
// gave no pollable pidfd (before 5.10); the caller waits the blocking way.
func awaitExit(pid int) bool {
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if err != nil {
		return false
	}
	f := os.NewFile(uintptr(fd), "pidfd")
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		return false
	}
	// A pidfd reads ready once its process has exited. An error stops the
	// wait too: the blocking wait after it is right in every case.
	exited := func(fd uintptr) bool {
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(pfd, 0)
		return err != nil || n > 0
	}
	return rc.Read(exited) == nil
}
