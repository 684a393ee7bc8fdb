package container

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"
)

// Config configures the container driver. Start from DefaultConfig.
type Config struct {
	// StateRoot holds libcontainer state (<StateRoot>/containers/<id>) and the
	// shared host-rootfs skeletons (<StateRoot>/hostroot-<hash>).
	StateRoot string
	// CgroupParent is the absolute cgroup under which each attempt gets a
	// leaf <CgroupParent>/<task id>. Absolute, so v1 and v2 mean the same
	// thing and jobs escape any limit on foreman's own cgroup.
	CgroupParent string
	// ShimPath is the static binary bind-mounted read-only at /.foreman/init
	// and run as `/.foreman/init shim -- argv` (PID 1 that forwards signals
	// and reaps). Empty means this binary (/proc/self/exe, resolved at New).
	ShimPath string
	// NoShim runs argv directly as the container's PID 1. Then SIGTERM is
	// ignored unless the job installs a handler (pid-namespace init rule).
	NoShim bool
	// ImageCache is where images are cached when Task.ImageCache is empty.
	ImageCache string
	// PidsLimit caps the number of tasks in an attempt's cgroup (fork bombs).
	PidsLimit int64
	// NoFileLimit is the RLIMIT_NOFILE (soft and hard) of the job.
	NoFileLimit uint64
	// CPUPeriod is the CFS period; quota = millicores * period / 1000.
	CPUPeriod time.Duration
	// Hostname is the UTS hostname inside every container.
	Hostname string
	// DestroyTimeout bounds how long Destroy waits for a killed init to be reaped.
	DestroyTimeout time.Duration
}

// DefaultConfig returns the production defaults.
func DefaultConfig() Config {
	return Config{
		StateRoot:      "/run/foreman",
		CgroupParent:   "/foreman",
		ImageCache:     "/var/lib/foreman/images",
		PidsLimit:      1024,
		NoFileLimit:    65536,
		CPUPeriod:      100 * time.Millisecond,
		Hostname:       "foreman",
		DestroyTimeout: 10 * time.Second,
	}
}

// Validate reports the first invalid field.
func (c Config) Validate() error {
	switch {
	case c.StateRoot == "" || !filepath.IsAbs(c.StateRoot):
		return fmt.Errorf("%w: StateRoot %q must be an absolute path", ErrInvalidConfig, c.StateRoot)
	case !filepath.IsAbs(c.CgroupParent) || c.CgroupParent == "/" || filepath.Clean(c.CgroupParent) != c.CgroupParent:
		return fmt.Errorf("%w: CgroupParent %q must be a clean absolute cgroup path other than /", ErrInvalidConfig, c.CgroupParent)
	case c.ShimPath != "" && !filepath.IsAbs(c.ShimPath):
		return fmt.Errorf("%w: ShimPath %q must be absolute", ErrInvalidConfig, c.ShimPath)
	case c.ImageCache != "" && !filepath.IsAbs(c.ImageCache):
		return fmt.Errorf("%w: ImageCache %q must be absolute", ErrInvalidConfig, c.ImageCache)
	case c.PidsLimit < 0:
		return fmt.Errorf("%w: PidsLimit %d must be >= 0 (0 = unlimited)", ErrInvalidConfig, c.PidsLimit)
	case c.NoFileLimit == 0:
		return fmt.Errorf("%w: NoFileLimit must be > 0", ErrInvalidConfig)
	case c.CPUPeriod < time.Millisecond || c.CPUPeriod > time.Second:
		return fmt.Errorf("%w: CPUPeriod %s must be between 1ms and 1s", ErrInvalidConfig, c.CPUPeriod)
	case c.Hostname == "" || len(c.Hostname) > 63 || strings.ContainsAny(c.Hostname, "/ \t\n"):
		return fmt.Errorf("%w: Hostname %q must be 1-63 characters without spaces or slashes", ErrInvalidConfig, c.Hostname)
	case c.DestroyTimeout <= 0:
		return fmt.Errorf("%w: DestroyTimeout must be > 0", ErrInvalidConfig)
	}
	return nil
}

func (c Config) containersDir() string { return filepath.Join(c.StateRoot, "containers") }
