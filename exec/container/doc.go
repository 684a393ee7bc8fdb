// Package container is the `container` driver (exec.Driver): each attempt
// runs in an embedded runc libcontainer container, no runc binary, no
// Docker. See DESIGN.md beside this file for the why.
//
// Wiring in main.go:
//
//	func main() {
//		container.InitIfRequested() // FIRST: libcontainer re-execs us as `init`
//		if len(os.Args) > 1 && os.Args[1] == "shim" {
//			os.Exit(exec.ShimMain(os.Args[2:])) // PID 1 inside containers
//		}
//		d, err := container.New(container.DefaultConfig(), logger)
//		... exec.RegisterDriver(d) (it reports Available() itself)
//		... at node start: d.CleanupOrphans(liveAttemptIDs)
//	}
//
// The binary must be built with CGO_ENABLED=1 (nsenter is cgo) and, to
// serve as the shim inside images without libc, statically:
// -tags 'netgo osusergo' -ldflags '-linkmode external -extldflags -static'.
//
// A job sees a read-only rootfs (host /usr, /bin, /lib*, /sbin and a
// curated /etc, or an OCI image from package image), writable /task and
// /tmp, optional /foreman/artifacts and /foreman/checkpoint, a new network
// namespace with loopback only (or the host's), no new privileges, Docker's
// default capabilities, masked /proc paths, and cgroup cpu/memory/pids
// limits under <CgroupParent>/<task id>. OOM is reported from the cgroup's
// OOM-kill counter, never guessed from the exit code.
package container
