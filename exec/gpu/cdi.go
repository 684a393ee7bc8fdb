package gpu

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	securejoin "github.com/cyphar/filepath-securejoin"
	"go.yaml.in/yaml/v3"
	cdi "tags.cncf.io/container-device-interface/specs-go"

	"github.com/foreman-sched/foreman/fsm"
)

// CDI (the Container Device Interface, cncf-tags/container-device-interface
// SPEC.md): a vendor's description of what a container needs for a device.
// A node whose GPU root holds a spec of kind CDIKind (nvidia-ctk cdi
// generate writes /etc/cdi/nvidia.yaml) gives containers the edits that
// spec names for each held GPU instead of foreman's built-in recipe. The
// spec's types come from the CNCF module's specs-go (no dependencies, no
// cgo); its pkg/cdi is not used: it edits OCI runtime specs (foreman builds
// libcontainer configs) and watches the directories with fsnotify, while a
// container start only needs the files read once.
const CDIKind = "nvidia.com/gpu"

// CDIDirs are the spec's standard directories; a later one's device of the
// same name wins, as in the reference implementation.
var CDIDirs = []string{"/etc/cdi", "/var/run/cdi"}

// CDISpec is one parsed spec file.
type CDISpec struct {
	File string // under the GPU root
	cdi.Spec
}

// LoadCDI reads the specs of kind below root, in directory then name
// order. None is (nil, nil). A file that does not parse is an error naming
// it: a broken spec must not silently fall back to something else.
func LoadCDI(root, kind string) ([]CDISpec, error) {
	var out []CDISpec
	for _, dir := range CDIDirs {
		files, _ := filepath.Glob(filepath.Join(root, dir, "*"))
		slices.Sort(files)
		for _, f := range files {
			ext := filepath.Ext(f)
			if ext != ".json" && ext != ".yaml" && ext != ".yml" {
				continue
			}
			b, err := os.ReadFile(f)
			if err != nil {
				return nil, fmt.Errorf("cdi: %w", err)
			}
			var s cdi.Spec
			if ext == ".json" {
				err = json.Unmarshal(b, &s)
			} else {
				err = yaml.Unmarshal(b, &s)
			}
			if err != nil {
				return nil, fmt.Errorf("cdi: %s: %w", f, err)
			}
			if s.Kind != kind {
				continue
			}
			if s.Version == "" {
				return nil, fmt.Errorf("cdi: %s: no cdiVersion", f)
			}
			out = append(out, CDISpec{File: f, Spec: s})
		}
	}
	return out, nil
}

// CDIEdits are the edits for a set of devices, resolved below the root.
type CDIEdits struct {
	Env    []string
	Nodes  []CDINode
	Mounts []cdi.Mount // HostPath below the root
	Hooks  []cdi.Hook
}

// CDINode is a device node to create in the container.
type CDINode struct {
	Node
	Host string // the host node it was stat'ed from (below the root)
}

// CDIName is the device name the spec uses for g: its UUID if the spec
// has it, else its index (nvidia-ctk names each GPU both ways).
func CDIName(specs []CDISpec, g fsm.GPU) string {
	for _, s := range specs {
		for _, d := range s.Devices {
			if d.Name == g.UUID {
				return g.UUID
			}
		}
	}
	return strconv.Itoa(g.Index)
}

// ResolveCDI returns the edits of the named devices: each spec's own
// edits once (for the specs that define one of them), then each device's.
// A name no spec defines is an error that lists the names there are.
func ResolveCDI(root string, specs []CDISpec, names []string) (*CDIEdits, error) {
	e := &CDIEdits{}
	used := map[int]bool{}
	var devs []cdi.ContainerEdits
	for _, n := range names {
		found := -1
		var dev cdi.Device
		for i, s := range specs {
			for _, d := range s.Devices {
				if d.Name == n {
					found, dev = i, d
				}
			}
		}
		if found < 0 {
			var have []string
			files := map[string]bool{}
			for _, s := range specs {
				files[s.File] = true
				for _, d := range s.Devices {
					have = append(have, d.Name)
				}
			}
			return nil, fmt.Errorf("cdi: %s=%s: no such device in %s (it has: %s)", CDIKind, n, strings.Join(slices.Sorted(maps.Keys(files)), ", "), strings.Join(have, ", "))
		}
		if !used[found] {
			used[found] = true
			devs = append(devs, specs[found].ContainerEdits)
		}
		devs = append(devs, dev.ContainerEdits)
	}
	for _, ce := range devs {
		e.Env = append(e.Env, ce.Env...)
		for _, dn := range ce.DeviceNodes {
			n, err := cdiNode(root, dn)
			if err != nil {
				return nil, err
			}
			e.Nodes = append(e.Nodes, n)
		}
		for _, m := range ce.Mounts {
			host, err := securejoin.SecureJoin(root, m.HostPath)
			if err != nil {
				return nil, fmt.Errorf("cdi: mount %s: %w", m.HostPath, err)
			}
			mm := *m
			mm.HostPath = host
			e.Mounts = append(e.Mounts, mm)
		}
		for _, h := range ce.Hooks {
			e.Hooks = append(e.Hooks, *h)
		}
	}
	return e, nil
}

// cdiNode resolves a spec's device node: its major and minor, type and
// mode come from the spec where it gives them, else from the host node
// (hostPath, or path), as the spec says a runtime does.
func cdiNode(root string, dn *cdi.DeviceNode) (CDINode, error) {
	host := dn.HostPath
	if host == "" {
		host = dn.Path
	}
	if dn.Type != "" && dn.Type != "c" && dn.Type != "u" {
		return CDINode{}, fmt.Errorf("cdi: device node %s: type %q is not supported (character devices only)", dn.Path, dn.Type)
	}
	n := Node{Path: dn.Path, Major: dn.Major, Minor: dn.Minor, Mode: 0o666}
	if st, err := statNode(root, host); err == nil {
		n.Mode, n.UID, n.GID = st.Mode, st.UID, st.GID
		if dn.Major == 0 && dn.Minor == 0 {
			n.Major, n.Minor = st.Major, st.Minor
		}
	} else if dn.Major == 0 && dn.Minor == 0 {
		return CDINode{}, fmt.Errorf("cdi: device node %s: %w", dn.Path, err)
	}
	if dn.FileMode != nil {
		n.Mode = dn.FileMode.Perm()
	}
	if dn.UID != nil {
		n.UID = *dn.UID
	}
	if dn.GID != nil {
		n.GID = *dn.GID
	}
	return CDINode{Node: n, Host: filepath.Join(root, host)}, nil
}
