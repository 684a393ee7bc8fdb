package release

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"
)

// ErrTool means a tool the release needs is missing; the message names
// the Debian packages that provide it.
var ErrTool = errors.New("release needs a tool that is missing")

// Config says what to build. DefaultConfig fills everything but Version.
type Config struct {
	Version string   // the tag, vX.Y.Z (CheckVersion)
	Dir     string   // the checkout to build (the module root)
	Out     string   // where the artifacts go (dist)
	Arches  []string // GOARCH values, each a Debian architecture too
	Tags    string   // go build tags (the Makefile's TAGS)
	Go      string   // the go command
	// SourceDateEpoch is every timestamp the artifacts carry, in Unix
	// seconds; 0 takes $SOURCE_DATE_EPOCH, else the commit's time.
	SourceDateEpoch int64
	Log             io.Writer // progress, one line a step; nil: none
}

// DefaultConfig builds the checkout in the current directory into dist/.
func DefaultConfig() Config {
	return Config{
		Dir:    ".",
		Out:    "dist",
		Arches: []string{"amd64", "arm64"},
		Tags:   "netgo osusergo urfave_cli_no_docs",
		Go:     "go",
	}
}

// crossCompilers is the C compiler (cgo: libcontainer's nsenter) and its
// static libc for each architecture when it is not the host's, with the
// Debian packages that provide them.
var crossCompilers = map[string]struct{ cc, libc, pkgs string }{
	"amd64": {"x86_64-linux-gnu-gcc", "/usr/x86_64-linux-gnu/lib/libc.a", "gcc-x86-64-linux-gnu libc6-dev-amd64-cross"},
	"arm64": {"aarch64-linux-gnu-gcc", "/usr/aarch64-linux-gnu/lib/libc.a", "gcc-aarch64-linux-gnu libc6-dev-arm64-cross"},
}

// compilerFor is the CC for arch on this host, or ErrTool naming the
// packages to install.
func compilerFor(arch string) (string, error) {
	if arch == runtime.GOARCH {
		if _, err := exec.LookPath("gcc"); err != nil {
			return "", fmt.Errorf("%w: gcc (apt-get install gcc libc6-dev)", ErrTool)
		}
		return "gcc", nil
	}
	c, ok := crossCompilers[arch]
	if !ok {
		return "", fmt.Errorf("release: architecture %q: want one of amd64, arm64", arch)
	}
	if _, err := exec.LookPath(c.cc); err != nil {
		return "", fmt.Errorf("%w: %s for linux/%s (apt-get install %s)", ErrTool, c.cc, arch, c.pkgs)
	}
	if _, err := os.Stat(c.libc); err != nil {
		return "", fmt.Errorf("%w: %s for a static linux/%s build (apt-get install %s)", ErrTool, c.libc, arch, c.pkgs)
	}
	return c.cc, nil
}

// Artifact is one file Build wrote.
type Artifact struct {
	Name   string // base name in Out
	Size   int64
	SHA256 string
}

// Build makes every artifact of cfg.Version in cfg.Out: the files are made
// in a scratch dir inside Out and moved in at the end, replacing an earlier
// release's, so a failure leaves Out as it was. It checks the version and
// the tools before writing anything.
func Build(ctx context.Context, cfg Config) (arts []Artifact, err error) {
	if err := CheckVersion(cfg.Version); err != nil {
		return nil, err
	}
	if len(cfg.Arches) == 0 {
		return nil, errors.New("release: no architectures")
	}
	ccs := map[string]string{}
	for _, arch := range cfg.Arches {
		cc, err := compilerFor(arch)
		if err != nil {
			return nil, err
		}
		ccs[arch] = cc
	}
	commit, err := gitCommit(ctx, cfg.Dir)
	if err != nil {
		return nil, err
	}
	epoch, err := sourceDateEpoch(ctx, cfg)
	if err != nil {
		return nil, err
	}
	mtime := time.Unix(epoch, 0).UTC()
	read := func(name string, optional bool) ([]byte, error) {
		b, err := os.ReadFile(filepath.Join(cfg.Dir, name))
		if err != nil && optional && errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return b, err
	}
	var readme, license, unit, config []byte
	for _, r := range []struct {
		dst      *[]byte
		name     string
		optional bool
	}{{&readme, "README.md", false}, {&license, "LICENSE", true}, {&unit, "contrib/foreman.service", false}, {&config, "contrib/agent.yaml", false}} {
		if *r.dst, err = read(r.name, r.optional); err != nil {
			return nil, fmt.Errorf("release: %w", err)
		}
	}
	debUnit, err := debUnitFile(unit)
	if err != nil {
		return nil, fmt.Errorf("release: %w", err)
	}
	logf := func(format string, args ...any) {
		if cfg.Log != nil {
			fmt.Fprintf(cfg.Log, "release: "+format+"\n", args...)
		}
	}
	if license == nil {
		logf("no LICENSE in the tree: the tarballs and packages carry none")
	}

	if _, err := os.Stat(cfg.Out); errors.Is(err, os.ErrNotExist) {
		// Made here: on failure, leave no empty dist behind either.
		defer func() {
			if err != nil {
				_ = os.Remove(cfg.Out)
			}
		}()
	}
	if err := os.MkdirAll(cfg.Out, 0o755); err != nil {
		return nil, fmt.Errorf("release: %w", err)
	}
	scratch, err := os.MkdirTemp(cfg.Out, ".release-")
	if err != nil {
		return nil, fmt.Errorf("release: %w", err)
	}
	defer os.RemoveAll(scratch)

	out := map[string][]byte{} // artifact name → bytes
	binaries := map[string][]byte{}
	for _, arch := range cfg.Arches {
		start := time.Now()
		bin := filepath.Join(scratch, "foreman-"+arch)
		if err := goBuild(ctx, cfg, arch, ccs[arch], commit, epoch, bin); err != nil {
			return nil, err
		}
		b, err := os.ReadFile(bin)
		if err != nil {
			return nil, err
		}
		binaries[arch] = b
		logf("built linux/%s (%d MiB) in %s", arch, len(b)>>20, time.Since(start).Round(time.Second))

		base := fmt.Sprintf("foreman_%s_linux_%s", cfg.Version, arch)
		files := []file{
			{name: base + "/foreman", mode: 0o755, data: b},
			{name: base + "/README.md", mode: 0o644, data: readme},
			{name: base + "/foreman.service", mode: 0o644, data: unit},
			{name: base + "/agent.yaml", mode: 0o644, data: config},
		}
		if license != nil {
			files = append(files, file{name: base + "/LICENSE", mode: 0o644, data: license})
		}
		if out[base+".tar.gz"], err = tarGz(files, tarOptions{mtime: mtime}); err != nil {
			return nil, err
		}
		dv := debVersion(cfg.Version)
		if out[fmt.Sprintf("foreman_%s_%s.deb", dv, arch)], err = buildDeb(debInput{
			version: dv, arch: arch, binary: b, unit: debUnit, config: config,
			readme: readme, license: license, mtime: mtime,
		}); err != nil {
			return nil, err
		}
	}
	if out[fmt.Sprintf("foreman_%s_oci.tar", cfg.Version)], err = ociLayout(cfg.Version, commit, binaries, cfg.Arches, mtime, scratch); err != nil {
		return nil, err
	}
	names := make([]string, 0, len(out))
	for n := range out {
		names = append(names, n)
	}
	sort.Strings(names)
	var sums bytes.Buffer
	for _, n := range names {
		sum := fmt.Sprintf("%x", sha256.Sum256(out[n]))
		fmt.Fprintf(&sums, "%s  %s\n", sum, n)
		arts = append(arts, Artifact{Name: n, Size: int64(len(out[n])), SHA256: sum})
	}
	out["SHA256SUMS"] = sums.Bytes()
	arts = append(arts, Artifact{Name: "SHA256SUMS", Size: int64(sums.Len()), SHA256: fmt.Sprintf("%x", sha256.Sum256(sums.Bytes()))})

	// Everything is made: write it to scratch, clear the previous
	// release's files, move these in.
	for n, b := range out {
		if err := os.WriteFile(filepath.Join(scratch, n), b, 0o644); err != nil {
			return nil, fmt.Errorf("release: %w", err)
		}
	}
	if err := clearPrevious(cfg.Out); err != nil {
		return nil, err
	}
	for n := range out {
		if err := os.Rename(filepath.Join(scratch, n), filepath.Join(cfg.Out, n)); err != nil {
			return nil, fmt.Errorf("release: %w", err)
		}
	}
	logf("%s: %d files in %s (commit %s, SOURCE_DATE_EPOCH=%d)", cfg.Version, len(out), cfg.Out, commit, epoch)
	return arts, nil
}

// clearPrevious removes the files an earlier Build left in out (only
// those: foreman_* and SHA256SUMS), so out holds one release.
func clearPrevious(out string) error {
	ents, err := os.ReadDir(out)
	if err != nil {
		return fmt.Errorf("release: %w", err)
	}
	for _, e := range ents {
		if !e.IsDir() && (strings.HasPrefix(e.Name(), "foreman_") || e.Name() == "SHA256SUMS") {
			if err := os.Remove(filepath.Join(out, e.Name())); err != nil {
				return fmt.Errorf("release: %w", err)
			}
		}
	}
	return nil
}

// goBuild builds the static binary for linux/arch, as `make build` does,
// plus what makes it reproducible: -trimpath, no build ID, no VCS stamp
// (the commit is passed explicitly).
func goBuild(ctx context.Context, cfg Config, arch, cc, commit string, epoch int64, outPath string) error {
	ldflags := fmt.Sprintf("-s -w -buildid= -X main.version=%s -X main.commit=%s -linkmode external -extldflags -static", cfg.Version, commit)
	cmd := exec.CommandContext(ctx, cfg.Go, "build", "-trimpath", "-buildvcs=false", "-tags", cfg.Tags, "-ldflags", ldflags, "-o", outPath, ".")
	cmd.Dir = cfg.Dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1", "GOOS=linux", "GOARCH="+arch, "CC="+cc,
		"SOURCE_DATE_EPOCH="+strconv.FormatInt(epoch, 10))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.Stdout = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("release: go build linux/%s: %v: %s", arch, err, lastLine(stderr.String()))
	}
	return nil
}

// gitCommit is HEAD's ID, with "-dirty" when the tree has changes (tracked
// or untracked, ignored files aside): those are built too.
func gitCommit(ctx context.Context, dir string) (string, error) {
	head, err := git(ctx, dir, "rev-parse", "HEAD")
	if err != nil {
		return "", err
	}
	st, err := git(ctx, dir, "status", "--porcelain")
	if err != nil {
		return "", err
	}
	if st != "" {
		head += "-dirty"
	}
	return head, nil
}

func sourceDateEpoch(ctx context.Context, cfg Config) (int64, error) {
	if cfg.SourceDateEpoch != 0 {
		return cfg.SourceDateEpoch, nil
	}
	if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n <= 0 {
			return 0, fmt.Errorf("release: SOURCE_DATE_EPOCH=%q: want Unix seconds", s)
		}
		return n, nil
	}
	s, err := git(ctx, cfg.Dir, "log", "-1", "--format=%ct")
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(s, 10, 64)
}

func git(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("release: git %s: %v: %s", strings.Join(args, " "), err, lastLine(stderr.String()))
	}
	return strings.TrimSpace(string(b)), nil
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}
