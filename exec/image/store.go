package image

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/google/go-containerregistry/pkg/authn"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// RunConfig is the part of the image config a driver uses when the job
// does not say otherwise.
type RunConfig struct {
	Entrypoint []string `json:"entrypoint,omitempty"`
	Cmd        []string `json:"cmd,omitempty"`
	Env        []string `json:"env,omitempty"`
	WorkingDir string   `json:"working_dir,omitempty"`
	User       string   `json:"user,omitempty"`
}

// Image is an extracted, cached image.
type Image struct {
	Ref    string // as given
	Digest string // manifest digest, "sha256:..."
	Rootfs string // host path of the read-only root filesystem
	Config RunConfig
}

// Store pulls images and caches their root filesystems by digest. It is
// safe for concurrent use, also across processes sharing CacheDir.
type Store struct {
	cfg Config
	log *slog.Logger
}

// NewStore creates the cache directory if needed.
func NewStore(cfg Config, log *slog.Logger) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	if err := os.MkdirAll(filepath.Join(cfg.CacheDir, "refs"), 0o700); err != nil {
		return nil, fmt.Errorf("image cache %s: %w", cfg.CacheDir, err)
	}
	return &Store{cfg: cfg, log: log.With("component", "image")}, nil
}

// Get resolves ref to an extracted rootfs, pulling and extracting it the
// first time its digest is seen. A registry image already in the cache is
// used when the registry cannot be reached.
func (s *Store) Get(ctx context.Context, ref string) (*Image, error) {
	r, err := ParseReference(ref)
	if err != nil {
		return nil, err
	}
	img, err := s.open(ctx, r)
	if err != nil {
		if r.Kind == KindRegistry && !errors.Is(err, ErrNotFound) {
			if cached, cerr := s.cachedRef(ref); cerr == nil {
				s.log.Warn("registry unreachable; using cached image", "ref", ref, "digest", cached.Digest, "err", err)
				return cached, nil
			}
		}
		return nil, err
	}
	d, err := img.Digest()
	if err != nil {
		return nil, fmt.Errorf("%w: %s: digest: %v", ErrPull, ref, err)
	}
	out, err := s.ensure(d, img, ref)
	if err != nil {
		return nil, err
	}
	if r.Kind == KindRegistry {
		s.rememberRef(ref, d)
	}
	return out, nil
}

func (s *Store) dir(d v1.Hash) string {
	return filepath.Join(s.cfg.CacheDir, d.Algorithm+"-"+d.Hex)
}

// ensure extracts img under its digest once: fast path without the lock,
// then an exclusive flock, a re-check, a temp dir and an atomic rename.
func (s *Store) ensure(d v1.Hash, img v1.Image, ref string) (*Image, error) {
	final := s.dir(d)
	if out, err := s.load(final, d, ref); err == nil {
		return out, nil
	}
	unlock, err := s.lock(d)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if out, err := s.load(final, d, ref); err == nil {
		return out, nil
	}
	start := time.Now()
	tmp, err := os.MkdirTemp(s.cfg.CacheDir, ".tmp-"+d.Hex[:12]+"-")
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			os.RemoveAll(tmp)
		}
	}()
	rootfs := filepath.Join(tmp, "rootfs")
	if err := os.Mkdir(rootfs, 0o755); err != nil {
		return nil, err
	}
	rc := mutate.Extract(img)
	st, err := untar(rc, rootfs, extractLimits{maxBytes: s.cfg.MaxBytes, maxEntries: s.cfg.MaxEntries})
	rc.Close()
	if err != nil {
		return nil, fmt.Errorf("image %q: %w", ref, err)
	}
	if err := prepareMountpoints(rootfs, s.cfg.MountDirs, s.cfg.MountFiles); err != nil {
		return nil, fmt.Errorf("image %q: %w", ref, err)
	}
	rcfg, err := runConfig(img)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: config: %v", ErrPull, ref, err)
	}
	b, _ := json.Marshal(cacheEntry{Digest: d.String(), Config: rcfg})
	if err := os.WriteFile(filepath.Join(tmp, "config.json"), b, 0o644); err != nil {
		return nil, err
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp, final); err != nil {
		return nil, fmt.Errorf("image %q: install %s: %w", ref, final, err)
	}
	ok = true
	s.log.Info("image extracted", "ref", ref, "digest", d.String(), "files", st.files, "bytes", st.bytes,
		"skipped_devices", st.skippedDevices, "dropped_setid", st.droppedSetid, "took", time.Since(start))
	return &Image{Ref: ref, Digest: d.String(), Rootfs: filepath.Join(final, "rootfs"), Config: rcfg}, nil
}

type cacheEntry struct {
	Digest string    `json:"digest"`
	Config RunConfig `json:"config"`
}

func (s *Store) load(dir string, d v1.Hash, ref string) (*Image, error) {
	b, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		return nil, err
	}
	var e cacheEntry
	if err := json.Unmarshal(b, &e); err != nil {
		return nil, err
	}
	return &Image{Ref: ref, Digest: d.String(), Rootfs: filepath.Join(dir, "rootfs"), Config: e.Config}, nil
}

func (s *Store) lock(d v1.Hash) (func(), error) {
	f, err := os.OpenFile(filepath.Join(s.cfg.CacheDir, "."+d.Algorithm+"-"+d.Hex+".lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() { f.Close() }, nil // closing releases the flock
}

func refKey(ref string) string {
	h := sha256.Sum256([]byte(ref))
	return hex.EncodeToString(h[:])
}

func (s *Store) rememberRef(ref string, d v1.Hash) {
	p := filepath.Join(s.cfg.CacheDir, "refs", refKey(ref))
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, []byte(d.String()), 0o600); err == nil {
		os.Rename(tmp, p)
	}
}

func (s *Store) cachedRef(ref string) (*Image, error) {
	b, err := os.ReadFile(filepath.Join(s.cfg.CacheDir, "refs", refKey(ref)))
	if err != nil {
		return nil, err
	}
	d, err := v1.NewHash(strings.TrimSpace(string(b)))
	if err != nil {
		return nil, err
	}
	return s.load(s.dir(d), d, ref)
}

func runConfig(img v1.Image) (RunConfig, error) {
	cf, err := img.ConfigFile()
	if err != nil {
		return RunConfig{}, err
	}
	c := cf.Config
	return RunConfig{Entrypoint: c.Entrypoint, Cmd: c.Cmd, Env: c.Env, WorkingDir: c.WorkingDir, User: c.User}, nil
}

// remoteOptions are shared by every registry call.
func (s *Store) remoteOptions(ctx context.Context) []remote.Option {
	return []remote.Option{
		remote.WithContext(ctx),
		remote.WithAuthFromKeychain(authn.DefaultKeychain),
		remote.WithPlatform(v1.Platform{OS: s.cfg.OS, Architecture: s.cfg.Arch}),
	}
}
