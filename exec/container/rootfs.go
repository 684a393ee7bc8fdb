package container

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"golang.org/x/sys/unix"
)

// Container paths every rootfs (host skeleton or image) must provide as
// mountpoints, so libcontainer never creates them in a shared tree.
const (
	TaskDir       = "/task"
	ArtifactsDir  = "/foreman/artifacts"
	CheckpointDir = "/foreman/checkpoint"
	ResultFile    = "/foreman/result" // the job's result (exec.ContainerResultPath)
	InputsDir     = "/foreman/inputs" // its parents' results (exec.ContainerInputsDir)
	ShimTarget    = "/.foreman/init"
)

// MountDirs and MountFiles are the mountpoints pre-created in every rootfs;
// pass them to image.Config so extracted images have them too.
var (
	MountDirs  = []string{"/proc", "/dev", "/sys", "/tmp", TaskDir, ArtifactsDir, CheckpointDir, InputsDir}
	MountFiles = []string{ShimTarget, "/etc/hosts", "/etc/resolv.conf", ResultFile}
)

// hostTopDirs are the host directories a host-rootfs job sees (read-only).
// On merged-/usr hosts most are symlinks into /usr and are recreated as such.
var hostTopDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}

// etcCopied are copied into the skeleton's /etc (a snapshot): what libc,
// name lookups and TLS need. /etc/shadow and friends are never included.
var etcCopied = []string{
	"passwd", "group", "nsswitch.conf", "host.conf", "gai.conf", "services", "protocols",
	"ld.so.cache", "ld.so.conf", "localtime", "timezone", "os-release", "mime.types",
}

// etcBound are host /etc directories bind-mounted read-only (certificates
// and Debian's alternatives symlink farm, without which awk etc. break).
var etcBound = []string{"/etc/ssl/certs", "/etc/alternatives", "/etc/ca-certificates"}

// hostRootfs is the shared read-only skeleton plus the binds that fill it.
type hostRootfs struct {
	dir   string
	binds []string // host dirs bound at the same path
}

// hostRootfsFor returns the skeleton for stateRoot, rebuilding it (reading
// and hashing every input) only when an input's inode, size or ctime
// changed since the last call, or the skeleton is gone. ctime cannot be set
// from user space, so any write, rename or chmod of an input is seen; the
// check is one lstat per input instead of reading ~130 KB and hashing it on
// every start.
//
// The same fingerprint also names an index file in stateRoot
// (hostfp-<hash of fingerprint>) recording which skeleton it built, so a
// freshly started supervisor (whose in-memory cache is empty) skips the
// read-and-hash as well: 0.8 ms of its warm-up, paid by most container
// attempts when a burst outgrows the pool of recycled supervisors. The
// index is written only when the fingerprint was the same before and
// after the build, so it never maps inputs to a skeleton built from others.
func (d *Driver) hostRootfsFor(stateRoot string) (*hostRootfs, error) {
	fp := hostInputsFingerprint()
	d.hostMu.Lock()
	defer d.hostMu.Unlock()
	if c := d.hostCache[stateRoot]; c != nil && c.fingerprint == fp {
		if _, err := os.Stat(filepath.Join(c.hr.dir, ".complete")); err == nil {
			return c.hr, nil
		}
	}
	hr := readHostIndex(stateRoot, fp)
	if hr == nil {
		var err error
		if hr, err = buildHostRootfs(stateRoot); err != nil {
			return nil, err
		}
		if hostInputsFingerprint() == fp {
			writeHostIndex(stateRoot, fp, hr)
		}
	}
	if d.hostCache == nil {
		d.hostCache = map[string]*hostCacheEntry{}
	}
	d.hostCache[stateRoot] = &hostCacheEntry{fingerprint: fp, hr: hr}
	return hr, nil
}

// hostIndexPath is the index file of a fingerprint.
func hostIndexPath(stateRoot, fp string) string {
	sum := sha256.Sum256([]byte("v" + skeletonVersion + "\n" + fp))
	return filepath.Join(stateRoot, "hostfp-"+hex.EncodeToString(sum[:8]))
}

// readHostIndex returns the skeleton recorded for fp, or nil when there is
// none (or it is malformed, or the skeleton is gone: then it is rebuilt).
// Format: the skeleton's base name, then one bound host dir per line.
func readHostIndex(stateRoot, fp string) *hostRootfs {
	b, err := os.ReadFile(hostIndexPath(stateRoot, fp))
	if err != nil {
		return nil
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	name := lines[0]
	if !strings.HasPrefix(name, "hostroot-") || strings.ContainsRune(name, '/') {
		return nil
	}
	hr := &hostRootfs{dir: filepath.Join(stateRoot, name)}
	for _, l := range lines[1:] {
		if !filepath.IsAbs(l) || filepath.Clean(l) != l {
			return nil
		}
		hr.binds = append(hr.binds, l)
	}
	if _, err := os.Stat(filepath.Join(hr.dir, ".complete")); err != nil {
		return nil
	}
	return hr
}

// writeHostIndex records hr for fp (temp file + rename; best effort: a
// missing index only costs the next new process a rebuild check).
func writeHostIndex(stateRoot, fp string, hr *hostRootfs) {
	var b strings.Builder
	b.WriteString(filepath.Base(hr.dir) + "\n")
	for _, d := range hr.binds {
		b.WriteString(d + "\n")
	}
	f, err := os.CreateTemp(stateRoot, ".hostfp-")
	if err != nil {
		return
	}
	_, werr := f.WriteString(b.String())
	if cerr := f.Close(); werr != nil || cerr != nil {
		os.Remove(f.Name())
		return
	}
	if err := os.Rename(f.Name(), hostIndexPath(stateRoot, fp)); err != nil {
		os.Remove(f.Name())
	}
}

type hostCacheEntry struct {
	fingerprint string
	hr          *hostRootfs
}

// hostInputsFingerprint identifies the current version of every input of
// buildHostRootfs (missing ones included, as missing).
func hostInputsFingerprint() string {
	var b strings.Builder
	add := func(p string, follow bool) {
		var st unix.Stat_t
		var err error
		if follow {
			err = unix.Stat(p, &st)
		} else {
			err = unix.Lstat(p, &st)
		}
		if err != nil {
			fmt.Fprintf(&b, "%s -\n", p)
			return
		}
		fmt.Fprintf(&b, "%s %d %d %o %d %d.%d\n", p, st.Dev, st.Ino, st.Mode, st.Size, st.Ctim.Sec, st.Ctim.Nsec)
	}
	for _, d := range hostTopDirs {
		add(d, false)
	}
	for _, d := range etcBound {
		add(d, true)
	}
	for _, n := range etcCopied {
		add(filepath.Join("/etc", n), false)
	}
	return b.String()
}

// skeletonVersion changes whenever the skeleton layout changes.
const skeletonVersion = "2" // 2: /foreman/result and /foreman/inputs

// buildHostRootfs creates (once per content hash) <stateRoot>/hostroot-<h>:
// empty mountpoints, the merged-/usr symlinks and the curated /etc. The
// hash covers every input, so a changed /etc/passwd yields a new skeleton
// and running containers keep the one they started with.
func buildHostRootfs(stateRoot string) (*hostRootfs, error) {
	h := sha256.New()
	fmt.Fprintf(h, "v%s\n", skeletonVersion)
	var hr hostRootfs
	links := map[string]string{}
	for _, d := range hostTopDirs {
		fi, err := os.Lstat(d)
		switch {
		case err != nil:
			continue
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(d)
			if err != nil {
				return nil, err
			}
			links[d] = target
			fmt.Fprintf(h, "link %s %s\n", d, target)
		case fi.IsDir():
			hr.binds = append(hr.binds, d)
			fmt.Fprintf(h, "bind %s\n", d)
		}
	}
	for _, d := range etcBound {
		if fi, err := os.Stat(d); err == nil && fi.IsDir() {
			hr.binds = append(hr.binds, d)
			fmt.Fprintf(h, "bind %s\n", d)
		}
	}
	etc := map[string][]byte{}
	etcLinks := map[string]string{}
	for _, name := range etcCopied {
		p := filepath.Join("/etc", name)
		fi, err := os.Lstat(p)
		if err != nil {
			continue
		}
		if fi.Mode()&fs.ModeSymlink != 0 { // e.g. localtime -> /usr/share/zoneinfo/...
			t, err := os.Readlink(p)
			if err != nil {
				return nil, err
			}
			etcLinks[name] = t
			fmt.Fprintf(h, "etclink %s %s\n", name, t)
			continue
		}
		if !fi.Mode().IsRegular() {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		etc[name] = b
		fmt.Fprintf(h, "etc %s %x\n", name, sha256.Sum256(b))
	}
	// Network "none" gets these; network "host" binds the host's over them.
	etc["hosts"] = []byte("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n")
	etc["resolv.conf"] = nil
	sum := h.Sum(nil)
	hr.dir = filepath.Join(stateRoot, "hostroot-"+hex.EncodeToString(sum[:6]))
	if _, err := os.Stat(filepath.Join(hr.dir, ".complete")); err == nil {
		return &hr, nil
	}
	tmp, err := os.MkdirTemp(stateRoot, ".hostroot-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp) // no-op after a successful rename
	if err := fillSkeleton(tmp, &hr, links, etc, etcLinks); err != nil {
		return nil, fmt.Errorf("host rootfs skeleton: %w", err)
	}
	if err := os.Rename(tmp, hr.dir); err != nil {
		// Another supervisor won the race: its skeleton is identical.
		if _, serr := os.Stat(filepath.Join(hr.dir, ".complete")); serr == nil {
			return &hr, nil
		}
		return nil, fmt.Errorf("host rootfs skeleton: %w", err)
	}
	return &hr, nil
}

func fillSkeleton(dir string, hr *hostRootfs, links map[string]string, etc map[string][]byte, etcLinks map[string]string) error {
	if err := os.Chmod(dir, 0o755); err != nil {
		return err
	}
	dirs := append(slices.Clone(MountDirs), hr.binds...)
	dirs = append(dirs, "/etc", "/root", "/home", "/var/tmp", "/.foreman")
	for _, d := range dirs {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return err
		}
	}
	if err := os.Chmod(filepath.Join(dir, "tmp"), 0o1777); err != nil {
		return err
	}
	for link, target := range links {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			return err
		}
	}
	names := make([]string, 0, len(etc))
	for n := range etc {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if err := os.WriteFile(filepath.Join(dir, "etc", n), etc[n], 0o644); err != nil {
			return err
		}
	}
	for n, t := range etcLinks {
		if err := os.Symlink(t, filepath.Join(dir, "etc", n)); err != nil {
			return err
		}
	}
	for _, f := range MountFiles {
		p := filepath.Join(dir, f)
		if _, err := os.Lstat(p); errors.Is(err, fs.ErrNotExist) {
			if err := os.WriteFile(p, nil, 0o644); err != nil {
				return err
			}
		}
	}
	return os.WriteFile(filepath.Join(dir, ".complete"), nil, 0o644)
}
