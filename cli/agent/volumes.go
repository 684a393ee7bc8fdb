package agent

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/foreman-sched/foreman/fsm"
)

// parseHostVolumes reads --host-volume NAME=PATH[:ro|:rw] (fsm/volume.go).
// The directory must exist; its symbolic links are resolved here, once,
// so the path advertised and mounted is the directory itself and cannot
// be moved elsewhere later by changing a link.
func parseHostVolumes(list []string) ([]fsm.HostVolume, error) {
	var out []fsm.HostVolume
	for _, s := range list {
		name, p, ok := strings.Cut(s, "=")
		if !ok {
			return nil, fmt.Errorf("--host-volume %q: want NAME=PATH[:ro]", s)
		}
		v := fsm.HostVolume{Name: name, Path: p}
		if rest, mode, ok := strings.Cut(p, ":"); ok {
			switch mode {
			case "ro":
				v.Path, v.ReadOnly = rest, true
			case "rw":
				v.Path = rest
			default:
				return nil, fmt.Errorf("--host-volume %q: %q is not a mode (ro or rw)", s, mode)
			}
		}
		if err := fsm.ValidVolumeName(name); err != nil {
			return nil, fmt.Errorf("--host-volume %q: %v", s, err)
		}
		if !filepath.IsAbs(v.Path) {
			return nil, fmt.Errorf("--host-volume %q: the path must be absolute", s)
		}
		real, err := filepath.EvalSymlinks(v.Path)
		if err != nil {
			return nil, fmt.Errorf("--host-volume %q: %w", s, err)
		}
		if st, err := os.Stat(real); err != nil || !st.IsDir() {
			return nil, fmt.Errorf("--host-volume %q: %s is not a directory", s, real)
		}
		v.Path = real
		out = append(out, v)
	}
	if err := fsm.CheckHostVolumes("--host-volume", out); err != nil {
		return nil, err
	}
	return out, nil
}
