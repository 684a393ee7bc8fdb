package image

import (
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
)

// Config configures a Store. Start from DefaultConfig.
type Config struct {
	// CacheDir holds one directory per manifest digest.
	CacheDir string
	// MountDirs and MountFiles are absolute container paths created (empty)
	// in every extracted rootfs, so a runtime can mount over them without
	// writing to the shared tree.
	MountDirs  []string
	MountFiles []string
	// OS and Arch select the platform from multi-arch indexes.
	OS, Arch string
	// MaxBytes bounds the total size of an image's files once extracted
	// and MaxEntries the number of its tar entries; a bigger image is
	// refused (ErrUnsafe) before it fills the host's disk.
	MaxBytes   int64
	MaxEntries int
}

// Default extraction limits: well above real images (the largest CUDA and
// ML images are ~20 GiB and ~200,000 files).
const (
	DefaultMaxBytes   = 64 << 30
	DefaultMaxEntries = 4 << 20
)

// DefaultConfig returns a config for this host's platform.
func DefaultConfig() Config {
	return Config{CacheDir: "/var/lib/foreman/images", OS: "linux", Arch: runtime.GOARCH,
		MaxBytes: DefaultMaxBytes, MaxEntries: DefaultMaxEntries}
}

// Validate reports the first invalid field.
func (c Config) Validate() error {
	if c.CacheDir == "" || !filepath.IsAbs(c.CacheDir) {
		return fmt.Errorf("%w: CacheDir %q must be an absolute path", ErrInvalidConfig, c.CacheDir)
	}
	for _, p := range append(append([]string(nil), c.MountDirs...), c.MountFiles...) {
		if !filepath.IsAbs(p) || filepath.Clean(p) != p || p == "/" {
			return fmt.Errorf("%w: mountpoint %q must be a clean absolute path other than /", ErrInvalidConfig, p)
		}
	}
	if c.OS == "" || c.Arch == "" || strings.Contains(c.OS+c.Arch, "/") {
		return fmt.Errorf("%w: OS %q and Arch %q must be set (e.g. linux, amd64)", ErrInvalidConfig, c.OS, c.Arch)
	}
	if c.MaxBytes <= 0 || c.MaxEntries <= 0 {
		return fmt.Errorf("%w: MaxBytes %d and MaxEntries %d must be positive", ErrInvalidConfig, c.MaxBytes, c.MaxEntries)
	}
	return nil
}
