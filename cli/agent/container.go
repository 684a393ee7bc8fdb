package agent

import (
	"log/slog"
	"os"
	"path/filepath"

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
