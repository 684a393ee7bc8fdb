package agent

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/foreman-sched/foreman/exec"
	"github.com/foreman-sched/foreman/exec/container"
)

const containerDriverName = container.Name

// Supervisors are separate processes (`foreman supervise`) that build the
// container driver themselves; the agent hands them its per-node settings
// through the environment they inherit.
const (
	envStateRoot    = "FOREMAN_CONTAINER_STATE_ROOT"
	envCgroupParent = "FOREMAN_CGROUP_PARENT"
)

// containerSettings are the per-agent parts of the container driver's
// config. Each agent gets its own state root and cgroup parent so that
// several agents on one host (make cluster, the jepsen suite) never clean up
// each other's containers.
type containerSettings struct {
	stateRoot, cgroupParent string
}

func containerSettingsFor(dataDir, node string) containerSettings {
	return containerSettings{stateRoot: filepath.Join(dataDir, "run"), cgroupParent: "/foreman/" + node}
}

func (s containerSettings) export() {
	os.Setenv(envStateRoot, s.stateRoot)
	os.Setenv(envCgroupParent, s.cgroupParent)
}

// RegisterContainerDriver adds the container driver to exec's registry,
// configured from the environment (set by the agent) or the defaults. A
// driver that cannot be configured is simply absent; DetectDrivers then
// reports the process driver only.
func RegisterContainerDriver() {
	cfg := container.DefaultConfig()
	if v := os.Getenv(envStateRoot); v != "" {
		cfg.StateRoot = v
	}
	if v := os.Getenv(envCgroupParent); v != "" {
		cfg.CgroupParent = v
	}
	d, err := container.New(cfg, slog.Default())
	if err != nil {
		slog.Warn("container driver unavailable", "component", "agent", "err", err)
		return
	}
	exec.RegisterDriver(d)
}

// binaryHoldsState reports whether the binary's directory and the
// container state root overlap (one inside the other). libcontainer then
// cannot seal the binary for the container's init with an overlayfs mount
// (the kernel refuses overlapping layers: ELOOP) and copies the whole
// binary into a memfd at every container start instead: ~24 MB and ~12 ms
// per start on a 2-core VM.
func binaryHoldsState(exe, stateRoot string) bool {
	within := func(p, dir string) bool {
		rel, err := filepath.Rel(dir, p)
		return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
	}
	bin := filepath.Dir(exe)
	return within(stateRoot, bin) || within(bin, stateRoot)
}

// warnIfBinaryHoldsState logs binaryHoldsState's finding at start.
func warnIfBinaryHoldsState(stateRoot string, log *slog.Logger) {
	exe, err := os.Executable()
	if err != nil {
		return
	}
	if exe, err = filepath.EvalSymlinks(exe); err != nil {
		return
	}
	if abs, err := filepath.Abs(stateRoot); err == nil && binaryHoldsState(exe, abs) {
		log.Warn("the data dir and this binary's directory overlap: every container start copies the binary (move one of them)",
			"component", "agent", "binary", exe, "container_state", abs)
	}
}
