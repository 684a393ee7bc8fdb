package container

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/opencontainers/cgroups"
	"github.com/opencontainers/cgroups/manager"
	"github.com/opencontainers/runc/libcontainer"
	"golang.org/x/sys/unix"

	"github.com/foreman-sched/foreman/exec"
	"github.com/foreman-sched/foreman/exec/image"
)

// Name is the JobSpec.Driver value of this driver.
const Name = "container"

// initLogLevel is the log level of runc's init (logrus numbering: 4 = info).
const initLogLevel = "4"

// Driver runs attempts in libcontainer containers. It implements exec.Driver.
type Driver struct {
	cfg          Config
	log          *slog.Logger
	shim         string // resolved ShimPath, "" with NoShim
	noFile       uint64 // cfg.NoFileLimit clamped to our own hard limit
	cgroupParent string // may differ from cfg.CgroupParent after v2 delegation

	mu     sync.Mutex
	stores map[string]*image.Store // by cache dir

	hostMu    sync.Mutex
	hostCache map[string]*hostCacheEntry // by state root
}

var _ exec.Driver = (*Driver)(nil)

// New validates cfg and resolves the shim binary. It touches nothing on
// disk; Available says whether Start can work on this host.
func New(cfg Config, log *slog.Logger) (*Driver, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	d := &Driver{cfg: cfg, log: log.With("component", "container"), cgroupParent: cfg.CgroupParent, stores: map[string]*image.Store{}}
	d.noFile = cfg.NoFileLimit
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err == nil && rl.Max < d.noFile {
		// Raising it needs CAP_SYS_RESOURCE, which a sandboxed root may lack.
		d.log.Debug("RLIMIT_NOFILE clamped to our hard limit", "want", d.noFile, "hard", rl.Max)
		d.noFile = rl.Max
	}
	if !cfg.NoShim {
		p := cfg.ShimPath
		if p == "" {
			exe, err := os.Executable()
			if err != nil {
				return nil, fmt.Errorf("%w: resolve shim (this binary): %v", ErrInvalidConfig, err)
			}
			p = exe
		}
		resolved, err := filepath.EvalSymlinks(p)
		if err != nil {
			return nil, fmt.Errorf("%w: shim %q: %v", ErrInvalidConfig, p, err)
		}
		d.shim = resolved
	}
	return d, nil
}

// Name implements exec.Driver.
func (d *Driver) Name() string { return Name }

// Available implements exec.Driver: Linux, root, and the cgroup
// controllers the driver sets (cpu, memory, pids) must be present.
func (d *Driver) Available() error {
	if runtime.GOOS != "linux" {
		return fmt.Errorf("%w: needs Linux, this is %s", ErrUnavailable, runtime.GOOS)
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("%w: needs root (euid is %d)", ErrUnavailable, os.Geteuid())
	}
	if cgroups.IsCgroup2UnifiedMode() {
		b, err := os.ReadFile("/sys/fs/cgroup/cgroup.controllers")
		if err != nil {
			return fmt.Errorf("%w: cgroup v2 controllers unreadable: %v", ErrUnavailable, err)
		}
		for _, c := range []string{"cpu", "memory", "pids"} {
			if !hasWord(string(b), c) {
				return fmt.Errorf("%w: cgroup v2 controller %q not available", ErrUnavailable, c)
			}
		}
	} else {
		for _, s := range []string{"cpu", "cpuacct", "memory", "pids", "devices"} {
			if _, err := cgroups.FindCgroupMountpoint("", s); err != nil {
				return fmt.Errorf("%w: cgroup v1 %q hierarchy not mounted: %v", ErrUnavailable, s, err)
			}
		}
	}
	if d.shim != "" {
		if _, err := os.Stat(d.shim); err != nil {
			return fmt.Errorf("%w: shim binary: %v", ErrUnavailable, err)
		}
	}
	return nil
}

// imageStore returns the store for a cache dir, creating it once.
func (d *Driver) imageStore(cacheDir string) (*image.Store, error) {
	if cacheDir == "" {
		cacheDir = d.cfg.ImageCache
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if s, ok := d.stores[cacheDir]; ok {
		return s, nil
	}
	icfg := image.DefaultConfig()
	icfg.CacheDir = cacheDir
	icfg.MountDirs, icfg.MountFiles = MountDirs, MountFiles
	s, err := image.NewStore(icfg, d.log)
	if err != nil {
		return nil, err
	}
	d.stores[cacheDir] = s
	return s, nil
}

// Start implements exec.Driver. Every failure before the job runs leaves
// nothing behind (no container state, no cgroup).
func (d *Driver) Start(ctx context.Context, t *exec.Task) (exec.Handle, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := validateTask(t); err != nil {
		return nil, err
	}
	if err := checkMemory(t.Spec.Resources.MemoryMB); err != nil {
		return nil, err
	}
	primeAttachLock() // the init's cgroup migration waits for an RCU grace period: start it now
	if err := os.MkdirAll(d.cfg.containersDir(), 0o700); err != nil {
		return nil, fmt.Errorf("%w: state root: %v", ErrStart, err)
	}
	spec := containerSpec{
		id: t.ID, workDir: t.WorkDir, artifacts: t.ArtifactsDir, checkpoint: t.CheckpointDir,
		shim: d.shim, hostNetwork: t.Spec.Network == "host",
		cpuMilli: t.Spec.Resources.CPU, memoryMB: t.Spec.Resources.MemoryMB,
	}
	for _, v := range t.Volumes {
		spec.volumes = append(spec.volumes, volumeBind{source: v.Path, dest: v.Dest, readOnly: v.ReadOnly})
	}
	view := rootView{workDir: t.WorkDir}
	// An image extracted by an older binary lacks the result and inputs
	// mountpoints: the job then runs without them (it writes no result).
	withIO := func(rootfs string) {
		if t.ResultFile != "" && exists(filepath.Join(rootfs, ResultFile)) {
			spec.result = t.ResultFile
		}
		if t.InputsDir != "" && exists(filepath.Join(rootfs, InputsDir)) {
			spec.inputs = t.InputsDir
		}
	}
	argv, env, userSpec := t.Spec.Command, t.Env, t.Spec.User
	if t.Spec.Image != "" {
		store, err := d.imageStore(t.ImageCache)
		if err != nil {
			return nil, err
		}
		img, err := store.Get(ctx, t.Spec.Image)
		if err != nil {
			return nil, err
		}
		spec.rootfs, view.image = img.Rootfs, img.Rootfs
		withIO(img.Rootfs)
		if len(argv) == 0 {
			argv = append(append([]string(nil), img.Config.Entrypoint...), img.Config.Cmd...)
		}
		env = mergeEnv(img.Config.Env, env)
		if userSpec == "" {
			userSpec = img.Config.User
		}
	} else {
		hr, err := d.hostRootfsFor(d.cfg.StateRoot)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrStart, err)
		}
		spec.rootfs, spec.hostBinds, view.host = hr.dir, hr.binds, hr
		withIO(hr.dir)
	}
	if len(argv) == 0 {
		return nil, fmt.Errorf("%w: %w", ErrInvalidTask, ErrNoCommand)
	}
	eu, err := view.resolveUser(userSpec)
	if err != nil {
		return nil, err
	}
	spec.uid = eu.Uid
	env = mergeEnv([]string{"PATH=" + defaultPath, "HOME=" + eu.Home}, env)
	if spec.gpu, env, err = gpuSetup(t, view.image, env); err != nil {
		return nil, err
	}
	if spec.gpu != nil {
		view.extra = spec.gpu.bins
	}
	if err := view.lookPath(argv[0], env); err != nil {
		return nil, err
	}
	if err := d.prepareCgroups(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrStart, err)
	}

	cfg := d.buildConfig(spec)
	c, err := libcontainer.Create(d.cfg.containersDir(), t.ID, cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: create %s: %v", ErrStart, t.ID, err)
	}
	args := argv
	if d.shim != "" {
		args = append([]string{ShimTarget, "shim", "--"}, argv...)
	}
	p := &libcontainer.Process{
		Args: args, Env: env, Cwd: TaskDir,
		UID: eu.Uid, GID: eu.Gid, AdditionalGroups: eu.Sgids,
		Stdout: t.Stdout, Stderr: t.Stderr, Init: true,
		// Without a level, runc's nsexec (C, before the init's Go runtime)
		// logs at debug: ~40 JSON lines per start through the log pipe, each
		// decoded by libcontainer's log forwarder here and then dropped.
		// Info (logrus level 4) keeps warnings and errors.
		LogLevel: initLogLevel,
	}
	started := time.Now()
	if err := exec.WithHostSlack(func() error { return c.Run(p) }); err != nil {
		return nil, d.startFailed(c, cfg.Cgroups, err)
	}
	st, err := c.State()
	if err != nil {
		c.Signal(killSignal)
		p.Wait()
		c.Destroy()
		return nil, fmt.Errorf("%w: state %s: %v", ErrStart, t.ID, err)
	}
	h := newHandle(d, c, p, cfg.Cgroups, maps.Clone(st.CgroupPaths), started)
	d.log.Debug("container started", "id", t.ID, "pid", st.InitProcessPid, "image", t.Spec.Image, "took", time.Since(started))
	return h, nil
}

// startFailed cleans up after Run failed and says why in user terms: an
// init killed by the OOM killer means the memory limit is too low.
func (d *Driver) startFailed(c *libcontainer.Container, cg *cgroups.Cgroup, runErr error) error {
	ooms := uint64(0)
	if st, err := c.State(); err == nil {
		if m, err := manager.NewWithPaths(cg, maps.Clone(st.CgroupPaths)); err == nil {
			ooms, _ = m.OOMKillCount()
		}
	}
	c.Signal(killSignal)
	if err := c.Destroy(); err != nil {
		d.log.Warn("destroy after failed start", "id", c.ID(), "err", err)
	}
	if ooms > 0 {
		return fmt.Errorf("%w: %w (the container's init was OOM-killed: %v)", ErrStart, ErrMemoryTooLow, runErr)
	}
	return fmt.Errorf("%w: %s: %v", ErrStart, c.ID(), runErr)
}

func validateTask(t *exec.Task) error {
	switch {
	case t == nil:
		return fmt.Errorf("%w: nil task", ErrInvalidTask)
	case !validID(t.ID):
		return fmt.Errorf("%w: ID %q must match %s", ErrInvalidTask, t.ID, validIDPattern)
	case !filepath.IsAbs(t.WorkDir):
		return fmt.Errorf("%w: WorkDir %q must be an absolute path", ErrInvalidTask, t.WorkDir)
	case t.Stdout == nil || t.Stderr == nil:
		return fmt.Errorf("%w: Stdout and Stderr are required", ErrInvalidTask)
	case t.Spec.Network != "" && t.Spec.Network != "none" && t.Spec.Network != "host":
		return fmt.Errorf("%w: network %q must be none or host", ErrInvalidTask, t.Spec.Network)
	}
	for _, dir := range []string{t.WorkDir, t.ArtifactsDir, t.CheckpointDir} {
		if dir == "" {
			continue
		}
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			return fmt.Errorf("%w: %q is not a directory", ErrInvalidTask, dir)
		}
	}
	return nil
}

func hasWord(s, w string) bool {
	for _, f := range strings.Fields(s) {
		if f == w {
			return true
		}
	}
	return false
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}
