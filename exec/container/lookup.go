package container

import (
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	securejoin "github.com/cyphar/filepath-securejoin"
	"github.com/moby/sys/user"
)

const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// rootView answers "what would the job see at this path" from the host,
// before the container exists, so bad input fails with a clear error
// instead of a shim exit code.
type rootView struct {
	image   string            // image rootfs, or ""
	host    *hostRootfs       // set when image == ""
	workDir string            // host dir mounted at /task
	extra   map[string]string // files mounted at container paths (the driver's utilities)
}

// hostPath maps a container path to the host path the job would see, or
// "" when nothing is mounted there. Symlinks resolve as if chrooted.
func (v rootView) hostPath(p string) string {
	p = path.Clean("/" + p)
	if hp, ok := v.extra[p]; ok {
		return hp
	}
	if rel, ok := strings.CutPrefix(p, TaskDir); ok && (rel == "" || rel[0] == '/') {
		hp, err := securejoin.SecureJoin(v.workDir, rel)
		if err != nil {
			return ""
		}
		return hp
	}
	if v.image != "" {
		hp, err := securejoin.SecureJoin(v.image, p)
		if err != nil {
			return ""
		}
		return hp
	}
	// The skeleton mirrors the host's merged-/usr symlinks, so resolving on
	// the host and keeping only results under a bound dir is equivalent.
	hp, err := securejoin.SecureJoin("/", p)
	if err != nil {
		return ""
	}
	for _, b := range v.host.binds {
		if hp == b || strings.HasPrefix(hp, b+"/") {
			return hp
		}
	}
	return ""
}

// etcFile opens /etc/<name> as the job would see it (nil if absent).
func (v rootView) etcFile(name string) io.ReadCloser {
	hp := ""
	if v.image != "" {
		hp = v.hostPath("/etc/" + name)
	} else {
		hp = filepath.Join(v.host.dir, "etc", name)
	}
	if hp == "" {
		return nil
	}
	f, err := os.Open(hp)
	if err != nil {
		return nil
	}
	return f
}

func isExecutable(hostPath string) bool {
	fi, err := os.Stat(hostPath)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

// lookPath checks argv0 exists in the rootfs, searching PATH from env for
// a bare name. The shim execs argv0 itself, so this only guards the error.
func (v rootView) lookPath(argv0 string, env []string) error {
	notFound := fmt.Errorf("%w: command %q %w", ErrInvalidTask, argv0, ErrCommandNotFound)
	if argv0 == "" {
		return notFound
	}
	if strings.Contains(argv0, "/") {
		p := argv0
		if !path.IsAbs(p) {
			p = path.Join(TaskDir, p) // the job's cwd
		}
		if hp := v.hostPath(p); hp != "" && isExecutable(hp) {
			return nil
		}
		return notFound
	}
	for _, dir := range strings.Split(envValue(env, "PATH", defaultPath), ":") {
		if dir == "" || !path.IsAbs(dir) {
			continue
		}
		if hp := v.hostPath(path.Join(dir, argv0)); hp != "" && isExecutable(hp) {
			return nil
		}
	}
	return notFound
}

// resolveUser turns "uid[:gid]" or "name[:group]" into ids using the
// rootfs's /etc/passwd and /etc/group. "" means root.
func (v rootView) resolveUser(spec string) (*user.ExecUser, error) {
	passwd, group := v.etcFile("passwd"), v.etcFile("group")
	defer closeIf(passwd)
	defer closeIf(group)
	eu, err := user.GetExecUser(spec, &user.ExecUser{Home: "/"}, readerOrNil(passwd), readerOrNil(group))
	if err != nil {
		return nil, fmt.Errorf("%w: %w %q: %v", ErrInvalidTask, ErrUser, spec, err)
	}
	return eu, nil
}

func closeIf(c io.Closer) {
	if c != nil {
		c.Close()
	}
}

// readerOrNil avoids a typed-nil io.Reader, which GetExecUser would read.
func readerOrNil(rc io.ReadCloser) io.Reader {
	if rc == nil {
		return nil
	}
	return rc
}

// envValue returns the last value of key in env, or def.
func envValue(env []string, key, def string) string {
	val := def
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok && k == key {
			val = v
		}
	}
	return val
}

// mergeEnv returns base overridden by over (later keys win), keeping order.
func mergeEnv(base, over []string) []string {
	idx := map[string]int{}
	var out []string
	for _, kv := range append(append([]string(nil), base...), over...) {
		k, _, _ := strings.Cut(kv, "=")
		if i, ok := idx[k]; ok {
			out[i] = kv
			continue
		}
		idx[k] = len(out)
		out = append(out, kv)
	}
	return out
}
