package fsm

import (
	"fmt"
	"path"
	"regexp"
	"strings"
)

// Host volumes (issue 36; Nomad's host_volume, Kubernetes' hostPath). An
// agent declares directories of its host by name (`--host-volume
// datasets=/mnt/datasets:ro`, Node.Volumes); a job asks for a volume by
// name and says where it goes (JobSpec.Volumes, `--volume datasets:/data`).
// The leader places the job only on nodes that declare every volume it
// asks for; the node mounts the declared directory (a container: a bind
// mount, read-only unless both the node and the job allow writes) or names
// it (a process job: $FOREMAN_VOLUME_<NAME>). A job names volumes, never
// host paths, so nothing outside a declared volume can be mounted.

// HostVolume is a directory a node lends to jobs under a name.
type HostVolume struct {
	Name     string `json:"name"`
	Path     string `json:"path"` // absolute, clean, on the node
	ReadOnly bool   `json:"read_only,omitempty"`
}

// VolumeMount is a job's use of a host volume.
type VolumeMount struct {
	Name     string `json:"name"`
	Dest     string `json:"dest"` // absolute path inside the job's container
	ReadOnly bool   `json:"read_only,omitempty"`
}

// MaxVolumes bounds the volumes of a node and of a job.
const MaxVolumes = 32

var volumeName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)

// ValidVolumeName checks a volume's name.
func ValidVolumeName(name string) error {
	if !volumeName.MatchString(name) {
		if strings.HasPrefix(name, "/") {
			return fmt.Errorf("%q is a path: name a volume an agent declares (--host-volume NAME=PATH)", name)
		}
		return fmt.Errorf("%q: volume names are 1-63 lowercase letters, digits, '-' and '_', starting with a letter or digit", name)
	}
	return nil
}

// Volume is the node's volume named name, or nil.
func (n *Node) Volume(name string) *HostVolume {
	for i := range n.Volumes {
		if n.Volumes[i].Name == name {
			return &n.Volumes[i]
		}
	}
	return nil
}

// MissingVolume is the first of mounts the node does not declare ("" when
// it declares them all).
func (n *Node) MissingVolume(mounts []VolumeMount) string {
	for _, m := range mounts {
		if n.Volume(m.Name) == nil {
			return m.Name
		}
	}
	return ""
}

// CheckHostVolumes validates a node's volumes (field names the list in
// errors).
func CheckHostVolumes(field string, vols []HostVolume) error {
	if len(vols) > MaxVolumes {
		return fmt.Errorf("%s: %d volumes (at most %d)", field, len(vols), MaxVolumes)
	}
	seen := map[string]bool{}
	for i, v := range vols {
		if err := ValidVolumeName(v.Name); err != nil {
			return fmt.Errorf("%s[%d].name: %v", field, i, err)
		}
		if seen[v.Name] {
			return fmt.Errorf("%s[%d].name: %q declared twice", field, i, v.Name)
		}
		seen[v.Name] = true
		if !path.IsAbs(v.Path) || path.Clean(v.Path) != v.Path || v.Path == "/" {
			return fmt.Errorf("%s[%d].path: %q must be an absolute, clean path other than /", field, i, v.Path)
		}
	}
	return nil
}

// reservedDests are where a job's container has the runtime's own
// mounts: a volume may not cover them.
var reservedDests = []string{"/foreman", "/proc", "/sys", "/dev"}

// CheckVolumeMounts validates a job's volumes (field names the list).
func CheckVolumeMounts(field string, mounts []VolumeMount) error {
	if len(mounts) > MaxVolumes {
		return fmt.Errorf("%s: %d volumes (at most %d)", field, len(mounts), MaxVolumes)
	}
	names, dests := map[string]bool{}, map[string]bool{}
	for i, m := range mounts {
		if err := ValidVolumeName(m.Name); err != nil {
			return fmt.Errorf("%s[%d].name: %v", field, i, err)
		}
		if names[m.Name] {
			return fmt.Errorf("%s[%d].name: %q mounted twice", field, i, m.Name)
		}
		names[m.Name] = true
		switch {
		case !path.IsAbs(m.Dest):
			return fmt.Errorf("%s[%d].dest: %q must be an absolute path", field, i, m.Dest)
		case slicesContainsDotDot(m.Dest) || path.Clean(m.Dest) != m.Dest:
			return fmt.Errorf("%s[%d].dest: %q must be a clean path without ..", field, i, m.Dest)
		case m.Dest == "/":
			return fmt.Errorf("%s[%d].dest: a volume cannot be mounted over the container's root", field, i)
		}
		for _, r := range reservedDests {
			if m.Dest == r || strings.HasPrefix(m.Dest, r+"/") {
				return fmt.Errorf("%s[%d].dest: %q is under %s, which the runtime mounts", field, i, m.Dest, r)
			}
		}
		if dests[m.Dest] {
			return fmt.Errorf("%s[%d].dest: %q used twice", field, i, m.Dest)
		}
		dests[m.Dest] = true
	}
	return nil
}

func slicesContainsDotDot(p string) bool {
	for _, part := range strings.Split(p, "/") {
		if part == ".." {
			return true
		}
	}
	return false
}

// VolumeEnv is the variable a process job finds a volume's path in:
// FOREMAN_VOLUME_ and the name in upper case, '-' as '_'.
func VolumeEnv(name string) string {
	return "FOREMAN_VOLUME_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}
