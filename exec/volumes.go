package exec

import (
	"fmt"

	"github.com/foreman-sched/foreman/fsm"
)

// TaskVolume is a job's host volume resolved on this node (fsm/volume.go):
// the declared directory, where it goes, and whether the job may write.
type TaskVolume struct {
	Name     string `json:"name"`
	Path     string `json:"path"` // on the host: the node's --host-volume directory
	Dest     string `json:"dest"` // in a container
	ReadOnly bool   `json:"read_only,omitempty"`
}

// resolveVolumes maps the spec's volumes onto the node's declared ones. A
// volume the node does not declare fails the start: the leader places a
// job only where its volumes are, so this is a node whose --host-volume
// changed since, and nothing that is not declared is ever mounted. A
// volume is read-only unless both the node and the job allow writes.
func resolveVolumes(node string, declared []fsm.HostVolume, mounts []fsm.VolumeMount) ([]TaskVolume, error) {
	if len(mounts) == 0 {
		return nil, nil
	}
	if err := fsm.CheckVolumeMounts("volumes", mounts); err != nil {
		return nil, err
	}
	out := make([]TaskVolume, 0, len(mounts))
	for _, m := range mounts {
		var hv *fsm.HostVolume
		for i := range declared {
			if declared[i].Name == m.Name {
				hv = &declared[i]
			}
		}
		if hv == nil {
			return nil, fmt.Errorf("volume %q is not declared on node %s (agent --host-volume)", m.Name, node)
		}
		out = append(out, TaskVolume{Name: m.Name, Path: hv.Path, Dest: m.Dest, ReadOnly: hv.ReadOnly || m.ReadOnly})
	}
	return out, nil
}

// volumeEnv is FOREMAN_VOLUME_<NAME> for each volume: where the job finds
// it (the host directory for a process job, the mount point in a
// container).
func volumeEnv(vols []TaskVolume, driver string) []string {
	var env []string
	for _, v := range vols {
		p := v.Dest
		if driver == ProcessDriverName {
			p = v.Path
		}
		env = append(env, fsm.VolumeEnv(v.Name)+"="+p)
	}
	return env
}
