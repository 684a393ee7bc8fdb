package container

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	securejoin "github.com/cyphar/filepath-securejoin"
	"github.com/opencontainers/cgroups"
	devconf "github.com/opencontainers/cgroups/devices/config"
	"github.com/opencontainers/runc/libcontainer/configs"
	"golang.org/x/sys/unix"
	cdispec "tags.cncf.io/container-device-interface/specs-go"

	"github.com/foreman-sched/foreman/exec"
	"github.com/foreman-sched/foreman/exec/gpu"
	"github.com/foreman-sched/foreman/fsm"
)

// containerGPU is what a container on an NVIDIA host gets beyond the
// usual: the device nodes of the GPUs it holds (the cgroup allow-list
// follows them; everything else stays denied), the driver's files for an
// image, and masks over the other GPUs' /proc/driver/nvidia/gpus/<bus>
// (NVML would list them otherwise: runc forbids mounts under /proc, but
// masking is applied by the init after the mounts). No NVIDIA container
// toolkit is involved (shared/reference/gpu.md §2 is the recipe).
type containerGPU struct {
	nodes  []gpu.Node
	mounts []*configs.Mount
	mask   []string
	// bins maps container paths of the driver's utilities to host files,
	// so a command such as nvidia-smi is found before the container exists.
	bins  map[string]string
	hooks configs.Hooks // from a CDI spec
	// dmemMax caps a share job's device memory (cgroup v2 with the dmem
	// controller: gpu/dmem.go); "" for none.
	dmemMax string
}

// fromCDI takes the held GPUs' edits from the node's CDI specs instead of
// the built-in recipe: their device nodes (allowed in the cgroup like the
// recipe's), mounts, hooks and environment; foreman's GPU variables still
// win over the spec's (its NVIDIA_VISIBLE_DEVICES=void included).
func (g *containerGPU) fromCDI(root string, specs []gpu.CDISpec, gpus []fsm.GPU, env []string) ([]string, error) {
	var names []string
	for _, x := range gpus {
		names = append(names, gpu.CDIName(specs, x))
	}
	e, err := gpu.ResolveCDI(root, specs, names)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrStart, err)
	}
	for _, n := range e.Nodes {
		g.nodes = append(g.nodes, n.Node)
	}
	for _, m := range e.Mounts {
		g.mounts = append(g.mounts, cdiMount(m))
	}
	for _, h := range e.Hooks {
		name := configs.HookName(h.HookName)
		if !slices.Contains(configs.KnownHookNames(), h.HookName) {
			return nil, fmt.Errorf("%w: cdi: hook %s: unknown hookName %q", ErrStart, h.Path, h.HookName)
		}
		path, err := securejoin.SecureJoin(root, h.Path)
		if err != nil {
			return nil, fmt.Errorf("%w: cdi: hook %s: %v", ErrStart, h.Path, err)
		}
		cmd := &configs.Command{Path: path, Args: h.Args, Env: h.Env}
		if h.Timeout != nil {
			d := time.Duration(*h.Timeout) * time.Second
			cmd.Timeout = &d
		}
		if g.hooks == nil {
			g.hooks = configs.Hooks{}
		}
		g.hooks[name] = append(g.hooks[name], configs.NewCommandHook(cmd))
	}
	return gpu.Env(mergeEnv(env, e.Env), gpus, true, gpu.Relative), nil
}

// cdiMount turns a CDI mount into a libcontainer one: a bind unless it
// names another type; options it knows become flags, the rest mount data.
func cdiMount(m cdispec.Mount) *configs.Mount {
	out := &configs.Mount{Source: m.HostPath, Destination: m.ContainerPath, Device: m.Type}
	var data []string
	for _, o := range m.Options {
		switch o {
		case "bind":
			out.Flags |= unix.MS_BIND
		case "rbind":
			out.Flags |= unix.MS_BIND | unix.MS_REC
		case "ro":
			out.Flags |= unix.MS_RDONLY
		case "rw":
		case "nosuid":
			out.Flags |= unix.MS_NOSUID
		case "nodev":
			out.Flags |= unix.MS_NODEV
		case "noexec":
			out.Flags |= unix.MS_NOEXEC
		default:
			data = append(data, o)
		}
	}
	if out.Device == "" || out.Device == "bind" {
		out.Device, out.Flags = "bind", out.Flags|unix.MS_BIND
	}
	out.Data = strings.Join(data, ",")
	return out
}

// gpuSetup prepares t's GPUs (t.GPUs, read under t.GPURoot) for a container
// whose rootfs is image ("" = the host rootfs) and returns the job's
// environment with the GPU variables. nil on a host without NVIDIA devices.
func gpuSetup(t *exec.Task, image string, env []string) (*containerGPU, []string, error) {
	root := t.GPURoot
	if root == "" {
		root = "/"
	}
	m, err := gpu.ReadMajors(root)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrStart, err)
	}
	if !m.Present() {
		if len(t.GPUs) > 0 {
			return nil, nil, fmt.Errorf("%w: the attempt holds %s but this host has no NVIDIA devices (no nvidia major in %s)", ErrStart, t.GPUs[0].UUID, filepath.Join(root, "proc/devices"))
		}
		return nil, env, nil
	}
	// Ordinals from 0: the container's /dev has only its devices.
	env = gpu.Env(env, t.GPUs, true, gpu.Relative)
	g := &containerGPU{mask: otherGPUs(root, t.GPUs), bins: map[string]string{}}
	if len(t.GPUs) == 0 {
		return g, env, nil
	}
	if g.dmemMax, err = shareDmemMax(root, t.GPUShare); err != nil {
		return nil, nil, err
	}
	specs, err := gpu.LoadCDI(root, gpu.CDIKind)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrStart, err)
	}
	if len(specs) > 0 {
		env, err = g.fromCDI(root, specs, t.GPUs, env)
		if err != nil {
			return nil, nil, err
		}
		return g, appendPath(env, "PATH", gpu.ContainerBinDir), nil
	}
	if g.nodes, err = gpu.Nodes(root, m, t.GPUs); err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrStart, err)
	}
	env = appendPath(env, "PATH", gpu.ContainerBinDir)
	if image == "" {
		// The host rootfs binds the host's /usr and /lib* and copies its
		// ldcache: the driver's own files are already there.
		return g, env, nil
	}
	df, err := gpu.FindDriverFiles(root)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: the driver's files for the container: %v", ErrStart, err)
	}
	if err := ensureDir(image, "/usr/local/nvidia"); err != nil {
		return nil, nil, fmt.Errorf("%w: image mountpoint /usr/local/nvidia: %v", ErrStart, err)
	}
	const ro = roBind &^ unix.MS_REC
	g.mounts = append(g.mounts, &configs.Mount{Source: "tmpfs", Destination: "/usr/local/nvidia", Device: "tmpfs",
		Flags: unix.MS_NOSUID | unix.MS_NODEV, Data: "mode=755,size=1m"})
	for _, l := range df.Libs {
		for _, n := range l.Names {
			g.mounts = append(g.mounts, &configs.Mount{Source: l.File, Destination: gpu.ContainerLibDir + "/" + n, Device: "bind", Flags: ro})
		}
	}
	for _, b := range df.Bins {
		dst := gpu.ContainerBinDir + "/" + filepath.Base(b)
		g.mounts = append(g.mounts, &configs.Mount{Source: b, Destination: dst, Device: "bind", Flags: ro})
		g.bins[dst] = b
	}
	// The loader must find them: in the image's own ldcache where it has
	// one (glibc images), else through LD_LIBRARY_PATH (CUDA images set it
	// to this directory already).
	imageCache, err := os.ReadFile(filepath.Join(image, "etc/ld.so.cache"))
	if fi, lerr := os.Lstat(filepath.Join(image, "etc/ld.so.cache")); err == nil && lerr == nil && fi.Mode().IsRegular() && t.Dir != "" {
		merged, err := df.MergeLDCache(imageCache)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: %v", ErrStart, err)
		}
		file := filepath.Join(t.Dir, "ld.so.cache")
		if err := os.WriteFile(file, merged, 0o644); err != nil {
			return nil, nil, fmt.Errorf("%w: %v", ErrStart, err)
		}
		g.mounts = append(g.mounts, &configs.Mount{Source: file, Destination: "/etc/ld.so.cache", Device: "bind", Flags: ro})
	} else {
		env = appendPath(env, "LD_LIBRARY_PATH", gpu.ContainerLibDir)
	}
	return g, env, nil
}

// otherGPUs are the /proc/driver/nvidia/gpus/<bus> directories of the
// host's GPUs that gpus does not hold.
func otherGPUs(root string, gpus []fsm.GPU) []string {
	es, err := os.ReadDir(filepath.Join(root, "proc/driver/nvidia/gpus"))
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range es {
		held := slices.ContainsFunc(gpus, func(g fsm.GPU) bool { return strings.EqualFold(g.BusID, e.Name()) })
		if !held {
			out = append(out, "/proc/driver/nvidia/gpus/"+e.Name())
		}
	}
	return out
}

// apply adds g to a container config being built.
func (g *containerGPU) apply(cfg *configs.Config) {
	if g == nil {
		return
	}
	for _, n := range g.nodes {
		cfg.Devices = append(cfg.Devices, &devconf.Device{
			Rule: devconf.Rule{Type: devconf.CharDevice, Major: n.Major, Minor: n.Minor, Permissions: "rwm", Allow: true},
			Path: n.Path, FileMode: n.Mode, Uid: n.UID, Gid: n.GID,
		})
	}
	cfg.Cgroups.Resources.Devices = append(cfg.Cgroups.Resources.Devices, gpu.AllowRules(g.nodes)...)
	if g.dmemMax != "" {
		// libcontainer writes unified keys when it makes the cgroup, before
		// the job runs, and enables dmem in the ancestors' subtree_control.
		if cfg.Cgroups.Resources.Unified == nil {
			cfg.Cgroups.Resources.Unified = map[string]string{}
		}
		cfg.Cgroups.Resources.Unified["dmem.max"] = g.dmemMax
	}
	cfg.Mounts = append(cfg.Mounts, g.mounts...)
	cfg.MaskPaths = append(slices.Clone(cfg.MaskPaths), g.mask...)
	if g.hooks != nil {
		cfg.Hooks = g.hooks
	}
}

// appendPath appends dir to the colon list in env's key unless it is there.
func appendPath(env []string, key, dir string) []string {
	cur := envValue(env, key, "")
	if slices.Contains(strings.Split(cur, ":"), dir) {
		return env
	}
	if cur != "" {
		dir = cur + ":" + dir
	}
	return mergeEnv(env, []string{key + "=" + dir})
}

// ensureDir creates the mountpoint dir in an image rootfs (foreman's own
// extraction: an empty directory, like the mountpoints the image store
// pre-creates, so libcontainer never has to), through os.Root so a symlink
// in the image cannot point it outside.
func ensureDir(rootfs, dir string) error {
	r, err := os.OpenRoot(rootfs)
	if err != nil {
		return err
	}
	defer r.Close()
	err = r.MkdirAll(strings.TrimPrefix(path.Clean(dir), "/"), 0o755)
	if errors.Is(err, os.ErrExist) {
		return nil
	}
	return err
}

// shareDmemMax is the dmem.max line of a share job on a cgroup v2 host
// whose kernel lists its device in dmem.capacity ("" elsewhere: the
// node's watchdog holds it to its share).
func shareDmemMax(root string, s *fsm.GPUShare) (string, error) {
	if s == nil || !cgroups.IsCgroup2UnifiedMode() {
		return "", nil
	}
	regions, err := gpu.DmemRegions(root)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrStart, err)
	}
	line, _ := gpu.DmemMax(s, regions)
	return line, nil
}
