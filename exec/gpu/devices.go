package gpu

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	devconf "github.com/opencontainers/cgroups/devices/config"
	"golang.org/x/sys/unix"

	"github.com/foreman-sched/foreman/fsm"
)

// Minors of the NVIDIA driver's fixed nodes on the GPU major.
const (
	CtlMinor     = 255 // /dev/nvidiactl
	ModesetMinor = 254 // /dev/nvidia-modeset: graphics only, never given to a job
)

// ErrBadRoot means a file under the GPU root could not be understood.
var ErrBadRoot = errors.New("gpu")

// Majors are the character-device majors the NVIDIA driver registered, read
// from /proc/devices (0 = not registered). The GPU major is 195 on every
// driver so far, but nothing here assumes it; nvidia-uvm's is dynamic.
type Majors struct {
	GPU int64 // "nvidia-frontend" or "nvidia" (+ "nvidiactl", "nvidia-modeset"): /dev/nvidiaN, nvidiactl
	UVM int64 // "nvidia-uvm": /dev/nvidia-uvm (minor 0) and nvidia-uvm-tools (1)
	// Other are the remaining majors named nvidia*: nvidia-caps (MIG),
	// nvidia-nvswitch, nvidia-nvlink, nvidia-caps-imex-channels. No job
	// gets them yet (MIG and IMEX channels are not supported).
	Other []int64
}

// Present reports whether the NVIDIA driver is loaded on the host.
func (m Majors) Present() bool { return m.GPU != 0 || m.UVM != 0 || len(m.Other) > 0 }

// ReadMajors reads <root>/proc/devices. A host without the file (not Linux)
// has no NVIDIA majors.
func ReadMajors(root string) (Majors, error) {
	b, err := os.ReadFile(filepath.Join(root, "proc/devices"))
	if errors.Is(err, os.ErrNotExist) {
		return Majors{}, nil
	}
	if err != nil {
		return Majors{}, err
	}
	m, err := ParseMajors(b)
	if err != nil {
		return Majors{}, fmt.Errorf("%s: %w", filepath.Join(root, "proc/devices"), err)
	}
	return m, nil
}

// ParseMajors parses the text of /proc/devices.
func ParseMajors(b []byte) (Majors, error) {
	var m Majors
	char := false
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "":
			continue
		case line == "Character devices:":
			char = true
			continue
		case line == "Block devices:":
			char = false
			continue
		case !char:
			continue
		}
		num, name, ok := strings.Cut(line, " ")
		major, err := strconv.ParseInt(num, 10, 64)
		name = strings.TrimSpace(name)
		if !ok || err != nil || major <= 0 || major > 4095 || name == "" {
			return Majors{}, fmt.Errorf("%w: line %d %q: want \"<major> <name>\"", ErrBadRoot, n, line)
		}
		switch {
		case name == "nvidia-frontend" || name == "nvidia" || name == "nvidiactl" || name == "nvidia-modeset":
			m.GPU = major
		case name == "nvidia-uvm":
			m.UVM = major
		case strings.HasPrefix(name, "nvidia"):
			m.Other = append(m.Other, major)
		}
	}
	if err := sc.Err(); err != nil {
		return Majors{}, err
	}
	// A name of the GPU or UVM major seen before those lines is not "other".
	m.Other = slices.DeleteFunc(m.Other, func(x int64) bool { return x == m.GPU || x == m.UVM })
	slices.Sort(m.Other)
	m.Other = slices.Compact(m.Other)
	return m, nil
}

// Node is one device node a job holding GPUs needs, as the host has it.
type Node struct {
	Path         string // in the job's view: "/dev/nvidia0"
	Major, Minor int64
	Mode         os.FileMode // permission bits
	UID, GID     uint32
}

// Nodes lists the device nodes of an attempt holding gpus: each GPU's
// /dev/nvidia<minor>, then nvidiactl, nvidia-uvm and nvidia-uvm-tools, each
// stat'ed under root so the job gets the host's numbers and modes. A GPU
// node that is missing or is not the GPU major's is an error (the device
// vanished since it was placed); a missing uvm node is synthesised from its
// major (the driver creates it on first use, nvidia-modprobe -u).
func Nodes(root string, m Majors, gpus []fsm.GPU) ([]Node, error) {
	if len(gpus) == 0 {
		return nil, nil
	}
	if m.GPU == 0 {
		return nil, fmt.Errorf("%w: the attempt holds %s but /proc/devices names no nvidia major (driver not loaded?)", ErrBadRoot, gpus[0].UUID)
	}
	var nodes []Node
	for _, g := range sorted(gpus) {
		n, err := statNode(root, "/dev/nvidia"+strconv.Itoa(g.Minor))
		if err != nil {
			return nil, fmt.Errorf("%w: %s (index %d): %v", ErrBadRoot, g.UUID, g.Index, err)
		}
		if n.Major != m.GPU || n.Minor != int64(g.Minor) {
			return nil, fmt.Errorf("%w: %s: %s is %d:%d, want %d:%d", ErrBadRoot, g.UUID, n.Path, n.Major, n.Minor, m.GPU, g.Minor)
		}
		nodes = append(nodes, n)
	}
	ctl, err := statNode(root, "/dev/nvidiactl")
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadRoot, err)
	}
	nodes = append(nodes, ctl)
	if m.UVM != 0 {
		for i, name := range []string{"/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"} {
			n, err := statNode(root, name)
			if errors.Is(err, os.ErrNotExist) {
				n, err = Node{Path: name, Major: m.UVM, Minor: int64(i), Mode: 0o666}, nil
			}
			if err != nil {
				return nil, fmt.Errorf("%w: %v", ErrBadRoot, err)
			}
			nodes = append(nodes, n)
		}
	}
	return nodes, nil
}

func statNode(root, path string) (Node, error) {
	var st unix.Stat_t
	if err := unix.Stat(filepath.Join(root, path), &st); err != nil {
		return Node{}, &os.PathError{Op: "stat", Path: path, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFCHR {
		return Node{}, fmt.Errorf("%s is not a character device", path)
	}
	return Node{
		Path: path, Major: int64(unix.Major(st.Rdev)), Minor: int64(unix.Minor(st.Rdev)),
		Mode: os.FileMode(st.Mode & 0o777), UID: st.Uid, GID: st.Gid,
	}, nil
}

// AllowRules are the device-cgroup rules a container holding nodes adds to
// its allow-list (everything else stays denied).
func AllowRules(nodes []Node) []*devconf.Rule {
	rules := make([]*devconf.Rule, 0, len(nodes))
	for _, n := range nodes {
		rules = append(rules, &devconf.Rule{Type: devconf.CharDevice, Major: n.Major, Minor: n.Minor, Permissions: "rwm", Allow: true})
	}
	return rules
}

// DenyRules are the device-cgroup rules of a process job holding gpus: all
// devices allowed (the job runs on the host) but the NVIDIA ones it does not
// hold. With no GPUs every NVIDIA major is denied whole. With GPUs, every
// minor of the GPU major from 0 to 254 but its own (so a device that
// appears later is denied too; 254 is nvidia-modeset) and the other majors;
// nvidiactl and nvidia-uvm stay open. A deny-list cannot punch a hole in a
// wildcard (the kernel's v1 semantics, which libcontainer's emulator keeps
// for v2), hence one rule per minor.
func DenyRules(m Majors, gpus []fsm.GPU) []*devconf.Rule {
	rules := []*devconf.Rule{{Type: devconf.WildcardDevice, Major: devconf.Wildcard, Minor: devconf.Wildcard, Permissions: "rwm", Allow: true}}
	deny := func(major, minor int64) {
		rules = append(rules, &devconf.Rule{Type: devconf.CharDevice, Major: major, Minor: minor, Permissions: "rwm", Allow: false})
	}
	if len(gpus) == 0 {
		for _, major := range append([]int64{m.GPU, m.UVM}, m.Other...) {
			if major != 0 {
				deny(major, devconf.Wildcard)
			}
		}
		return rules
	}
	held := map[int64]bool{}
	for _, g := range gpus {
		held[int64(g.Minor)] = true
	}
	if m.GPU != 0 {
		for minor := int64(0); minor < CtlMinor; minor++ {
			if !held[minor] {
				deny(m.GPU, minor)
			}
		}
	}
	for _, major := range m.Other {
		deny(major, devconf.Wildcard)
	}
	return rules
}

// sorted returns gpus in the host's index order (nvidia-smi's, which is
// PCI bus order and so CUDA's under CUDA_DEVICE_ORDER=PCI_BUS_ID).
func sorted(gpus []fsm.GPU) []fsm.GPU {
	s := slices.Clone(gpus)
	slices.SortFunc(s, func(a, b fsm.GPU) int { return a.Index - b.Index })
	return s
}
