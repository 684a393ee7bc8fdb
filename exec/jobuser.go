package exec

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// CheckJobUsers validates an agent's --job-users and --job-default-user
// (WorkerConfig.JobUsers and DefaultJobUser): the default user must be
// allowed and exist on this host.
func CheckJobUsers(allowed []string, def string) error {
	if def == "" {
		return nil
	}
	if !slices.Contains(allowed, def) && !slices.Contains(allowed, "*") {
		return fmt.Errorf("--job-default-user %q is not in --job-users (%s)", def, strings.Join(allowed, ", "))
	}
	if _, err := strconv.Atoi(def); err == nil {
		return nil
	}
	if _, err := user.Lookup(def); err != nil {
		return fmt.Errorf("--job-default-user %q: %v (create it, or pick another user)", def, err)
	}
	return nil
}

// checkUser refuses a job user that WorkerConfig.JobUsers does not list.
// For the process driver "" (run as the agent's user) is allowed only when
// JobUsers is nil or lists "*": an agent that restricts users also sets
// DefaultJobUser. A container job without a user runs as its image's user
// inside its own namespaces, not as the agent.
func (w *Worker) checkUser(spec, driver string) error {
	allowed := w.cfg.JobUsers
	if allowed == nil || slices.Contains(allowed, "*") {
		return nil
	}
	name, _, _ := strings.Cut(spec, ":")
	if name == "" && driver != ProcessDriverName {
		return nil
	}
	if name == "" {
		return fmt.Errorf("%w: a job without user: would run as the agent's own user on node %s; set agent --job-default-user", ErrUserNotAllowed, w.cfg.Node)
	}
	if slices.Contains(allowed, name) {
		return nil
	}
	return fmt.Errorf("%w: user %q may not run jobs on node %s (agent --job-users allows %s)", ErrUserNotAllowed, name, w.cfg.Node, strings.Join(allowed, ", "))
}

// handOver lets a process-driver job running as user spec use its attempt
// dir: the dir and its ancestors up to the data dir become traversable
// (o+x only: the job cannot list them, so raft's and other attempts' file
// names stay hidden) and the work dir becomes the user's. Only root can
// switch users; for anyone else credential() refuses the start later with
// a clear message, so this is a no-op.
//
// The ancestors (the attempts dir up to the data dir, and the dirs above it)
// are checked until they pass once per Worker: they are the same for every
// attempt, and walking them cost ten syscalls on each start. The attempt
// dir is made 0700 by start, so it is set to 0711 without a look first.
func (w *Worker) handOver(dir, spec string) error {
	if os.Geteuid() != 0 {
		return nil
	}
	cred, err := credential(spec)
	if err != nil {
		return err
	}
	if cred.Uid == 0 {
		return nil // root reaches every dir and owns the attempt dir already
	}
	if err := os.Chmod(dir, 0o711); err != nil {
		return err
	}
	if !w.reachable.Load() {
		dataDir := w.cfg.DataDir
		for d := filepath.Dir(dir); ; d = filepath.Dir(d) {
			st, err := os.Stat(d)
			if err != nil {
				return err
			}
			if st.Mode().Perm()&0o001 == 0 {
				if err := os.Chmod(d, st.Mode().Perm()|0o011); err != nil {
					return err
				}
			}
			if d == dataDir || d == filepath.Dir(d) || !strings.HasPrefix(d, dataDir) {
				break
			}
		}
		// Above the data dir foreman changes nothing: say which dirs block.
		if dirs := unsearchableAbove(dataDir); len(dirs) > 0 {
			return cannotReach(spec, dirs)
		}
		w.reachable.Store(true)
	}
	for _, d := range []string{WorkDirName, IODirName} {
		err := os.Lchown(filepath.Join(dir, d), int(cred.Uid), int(cred.Gid))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("hand %s to user %q: %w", d, spec, err)
		}
	}
	return nil
}

// CheckJobUserReach reports whether process jobs running as user spec can
// reach their attempt dirs under dataDir. Foreman makes the data dir and
// what is below it searchable itself (handOver) but never changes a dir
// above it, so one that others cannot search (a data dir under a 0700 dir,
// which mktemp -d makes) stops every such job at its start. Root reaches
// every dir. The error wraps ErrJobUserCannotReach and names the dir and
// the ways out.
func CheckJobUserReach(dataDir, spec string) error {
	if isRootUser(spec) {
		return nil
	}
	if dirs := unsearchableAbove(dataDir); len(dirs) > 0 {
		return cannotReach(spec, dirs)
	}
	return nil
}

func cannotReach(spec string, dirs []string) error {
	list := strings.Join(dirs, " ")
	verb := "is"
	if len(dirs) > 1 {
		verb = "are"
	}
	return fmt.Errorf("%w: user %q cannot reach the attempt dirs: %s %s not searchable by others (chmod o+x %s, or a --data-dir whose parents others can search, or run process jobs as root with agent --job-default-user=)",
		ErrJobUserCannotReach, spec, list, verb, list)
}

// unsearchableAbove lists the existing dirs above dataDir that others
// cannot search (no o+x), outermost first: all of them need fixing.
func unsearchableAbove(dataDir string) []string {
	var dirs []string
	for d := filepath.Dir(dataDir); ; d = filepath.Dir(d) {
		if st, err := os.Stat(d); err == nil && st.Mode().Perm()&0o001 == 0 {
			dirs = append([]string{d}, dirs...)
		}
		if d == filepath.Dir(d) {
			return dirs
		}
	}
}

// isRootUser reports whether spec (name or uid, optionally ":group") is
// uid 0. An unknown name is not root (CheckJobUsers refuses it anyway).
func isRootUser(spec string) bool {
	name, _, _ := strings.Cut(spec, ":")
	if name == "0" || name == "root" {
		return true
	}
	if _, err := strconv.Atoi(name); err == nil {
		return false
	}
	uid, _, err := lookupUser(name)
	return err == nil && uid == "0"
}

// warnIfJobUserCannotReach says at start what would otherwise show only as
// every process job failing: the default job user cannot reach the attempt
// dirs (the agent then does not offer the process driver).
func warnIfJobUserCannotReach(cfg *WorkerConfig, log *slog.Logger) {
	if os.Geteuid() != 0 || cfg.DefaultJobUser == "" {
		return // only root switches users
	}
	if err := CheckJobUserReach(cfg.DataDir, cfg.DefaultJobUser); err != nil {
		dirs := strings.Join(unsearchableAbove(cfg.DataDir), " ")
		log.Warn("process jobs cannot run on this node: their user cannot reach the data dir; the process driver is not offered",
			"user", cfg.DefaultJobUser, "dir", dirs, "data_dir", cfg.DataDir,
			"fix", "chmod o+x "+dirs+", or a --data-dir whose parents others can search, or --job-default-user= (process jobs run as root)")
	}
}
