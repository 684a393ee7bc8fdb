package container

import (
	"fmt"

	"github.com/opencontainers/cgroups"
	devconf "github.com/opencontainers/cgroups/devices/config"
	"github.com/opencontainers/runc/libcontainer/configs"
	"github.com/opencontainers/runc/libcontainer/specconv"
	"golang.org/x/sys/unix"
)

// minMemoryMB is the smallest limit runc's init reliably starts under
// (Docker uses the same floor).
const minMemoryMB = 6

// defaultCaps is Docker's default capability set (14 capabilities).
var defaultCaps = []string{
	"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FSETID", "CAP_FOWNER", "CAP_MKNOD",
	"CAP_NET_RAW", "CAP_SETGID", "CAP_SETUID", "CAP_SETFCAP", "CAP_SETPCAP",
	"CAP_NET_BIND_SERVICE", "CAP_SYS_CHROOT", "CAP_KILL", "CAP_AUDIT_WRITE",
}

// Docker's masked and read-only /proc and /sys paths.
var (
	maskedPaths = []string{
		"/proc/acpi", "/proc/asound", "/proc/interrupts", "/proc/kcore", "/proc/keys",
		"/proc/latency_stats", "/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug",
		"/proc/scsi", "/sys/firmware", "/sys/devices/virtual/powercap",
	}
	readonlyPaths = []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"}
)

// validIDPattern is what libcontainer accepts and is safe as a cgroup name.
// validID checks it by hand: compiling this regexp (the {0,127} repetition
// unrolls) cost 0.8 ms and 1,700 allocations in the package init of every
// process of the binary, container inits and shims included.
const validIDPattern = `^[A-Za-z0-9][A-Za-z0-9_.+-]{0,127}$`

func validID(id string) bool {
	if len(id) == 0 || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case i > 0 && (c == '_' || c == '.' || c == '+' || c == '-'):
		default:
			return false
		}
	}
	return true
}

// volumeBind is a host volume bound into the container (exec.TaskVolume).
type volumeBind struct {
	source, dest string
	readOnly     bool
}

// containerSpec is everything buildConfig needs, resolved by Start.
type containerSpec struct {
	id          string
	rootfs      string   // skeleton or image rootfs
	hostBinds   []string // host dirs bound read-only at the same path
	workDir     string
	artifacts   string
	checkpoint  string
	result      string // host file bound at ResultFile ("" = none)
	inputs      string // host dir bound read-only at InputsDir ("" = none)
	volumes     []volumeBind
	shim        string // "" = no shim
	hostNetwork bool
	uid         int
	cpuMilli    int64
	memoryMB    int64
	gpu         *containerGPU // nil: not an NVIDIA host
}

const (
	roBind = unix.MS_BIND | unix.MS_REC | unix.MS_RDONLY | unix.MS_NOSUID | unix.MS_NODEV
	rwBind = unix.MS_BIND | unix.MS_REC | unix.MS_NOSUID | unix.MS_NODEV
)

// buildConfig turns a resolved spec into a libcontainer config: a read-only
// rootfs, writable /task and /tmp, no new privileges, Docker's default caps,
// masked /proc paths, a device whitelist and cpu/memory/pids limits.
func (d *Driver) buildConfig(s containerSpec) *configs.Config {
	caps := &configs.Capabilities{Bounding: defaultCaps}
	if s.uid == 0 {
		caps.Effective, caps.Permitted = defaultCaps, defaultCaps
	} // non-root keeps only the bounding set, as Docker does

	ns := configs.Namespaces{{Type: configs.NEWNS}, {Type: configs.NEWUTS}, {Type: configs.NEWIPC}, {Type: configs.NEWPID}}
	var networks []*configs.Network
	if !s.hostNetwork {
		ns = append(ns, configs.Namespace{Type: configs.NEWNET})
		networks = []*configs.Network{{Type: "loopback", Address: "127.0.0.1/0", Gateway: "localhost"}}
	}
	v2 := cgroups.IsCgroup2UnifiedMode()
	if v2 {
		ns = append(ns, configs.Namespace{Type: configs.NEWCGROUP})
	}

	mounts := []*configs.Mount{
		{Source: "proc", Destination: "/proc", Device: "proc", Flags: unix.MS_NOEXEC | unix.MS_NOSUID | unix.MS_NODEV},
		{Source: "tmpfs", Destination: "/dev", Device: "tmpfs", Flags: unix.MS_NOSUID | unix.MS_STRICTATIME, Data: "mode=755,size=65536k"},
		{Source: "devpts", Destination: "/dev/pts", Device: "devpts", Flags: unix.MS_NOSUID | unix.MS_NOEXEC, Data: "newinstance,ptmxmode=0666,mode=0620,gid=5"},
		{Source: "shm", Destination: "/dev/shm", Device: "tmpfs", Flags: unix.MS_NOSUID | unix.MS_NOEXEC | unix.MS_NODEV, Data: "mode=1777,size=65536k"},
		{Source: "mqueue", Destination: "/dev/mqueue", Device: "mqueue", Flags: unix.MS_NOSUID | unix.MS_NOEXEC | unix.MS_NODEV},
		{Source: "sysfs", Destination: "/sys", Device: "sysfs", Flags: unix.MS_NOSUID | unix.MS_NOEXEC | unix.MS_NODEV | unix.MS_RDONLY},
		{Source: "tmpfs", Destination: "/tmp", Device: "tmpfs", Flags: unix.MS_NOSUID | unix.MS_NODEV, Data: "mode=1777"},
	}
	// Read-only cgroupfs lets runtimes such as the JVM size themselves.
	cgPath := d.cgroupParent + "/" + s.id
	mounts = append(mounts, cgroupMounts(v2, cgPath)...)
	for _, b := range s.hostBinds {
		mounts = append(mounts, &configs.Mount{Source: b, Destination: b, Device: "bind", Flags: roBind})
	}
	mounts = append(mounts, &configs.Mount{Source: s.workDir, Destination: TaskDir, Device: "bind", Flags: rwBind})
	if s.artifacts != "" {
		mounts = append(mounts, &configs.Mount{Source: s.artifacts, Destination: ArtifactsDir, Device: "bind", Flags: rwBind})
	}
	if s.checkpoint != "" {
		mounts = append(mounts, &configs.Mount{Source: s.checkpoint, Destination: CheckpointDir, Device: "bind", Flags: rwBind})
	}
	if s.result != "" {
		mounts = append(mounts, &configs.Mount{Source: s.result, Destination: ResultFile, Device: "bind", Flags: rwBind})
	}
	if s.inputs != "" {
		mounts = append(mounts, &configs.Mount{Source: s.inputs, Destination: InputsDir, Device: "bind", Flags: roBind})
	}
	for _, v := range s.volumes {
		// libcontainer creates a missing mountpoint before the rootfs is
		// made read-only.
		flags := rwBind
		if v.readOnly {
			flags = roBind
		}
		mounts = append(mounts, &configs.Mount{Source: v.source, Destination: v.dest, Device: "bind", Flags: flags})
	}
	if s.shim != "" {
		mounts = append(mounts, &configs.Mount{Source: s.shim, Destination: ShimTarget, Device: "bind", Flags: unix.MS_BIND | unix.MS_RDONLY | unix.MS_NOSUID | unix.MS_NODEV})
	}
	if s.hostNetwork {
		for _, f := range []string{"/etc/resolv.conf", "/etc/hosts"} {
			mounts = append(mounts, &configs.Mount{Source: f, Destination: f, Device: "bind", Flags: unix.MS_BIND | unix.MS_RDONLY | unix.MS_NOSUID | unix.MS_NODEV})
		}
	}

	devRules := []*devconf.Rule{{Type: devconf.WildcardDevice, Major: -1, Minor: -1, Permissions: "rwm", Allow: false}}
	var devs []*devconf.Device
	for _, dv := range specconv.AllowedDevices {
		devRules = append(devRules, &dv.Rule)
		if dv.Path != "" {
			devs = append(devs, dv)
		}
	}

	res := &cgroups.Resources{Devices: devRules}
	if d.cfg.PidsLimit > 0 {
		limit := d.cfg.PidsLimit
		res.PidsLimit = &limit
	}
	if s.memoryMB > 0 {
		res.Memory = s.memoryMB << 20
		res.MemorySwap = res.Memory // no swap: v1 memsw == mem, v2 swap.max = 0
	}
	if s.cpuMilli > 0 {
		period := d.cfg.CPUPeriod.Microseconds()
		res.CpuPeriod = uint64(period)
		res.CpuQuota = s.cpuMilli * period / 1000
	}
	if v2 {
		// Kill the whole job on OOM, not one victim, so the job cannot
		// limp on (v1 has no equivalent; Unified is rejected there).
		res.Unified = map[string]string{"memory.oom.group": "1"}
	}

	cfg := &configs.Config{
		Rootfs:          s.rootfs,
		Readonlyfs:      true,
		Hostname:        d.cfg.Hostname,
		NoNewPrivileges: true,
		Capabilities:    caps,
		Namespaces:      ns,
		Networks:        networks,
		Cgroups:         &cgroups.Cgroup{Path: cgPath, Resources: res},
		Devices:         devs,
		Mounts:          mounts,
		MaskPaths:       maskedPaths,
		ReadonlyPaths:   readonlyPaths,
		Rlimits:         []configs.Rlimit{{Type: unix.RLIMIT_NOFILE, Hard: d.noFile, Soft: d.noFile}},
	}
	s.gpu.apply(cfg)
	return cfg
}

func checkMemory(mb int64) error {
	if mb > 0 && mb < minMemoryMB {
		return fmt.Errorf("%w: %w: %d MiB (minimum %d MiB)", ErrInvalidTask, ErrMemoryTooLow, mb, minMemoryMB)
	}
	return nil
}
