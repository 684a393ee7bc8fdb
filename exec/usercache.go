package exec

import (
	"os/user"
	"sync"
	"syscall"
	"time"
)

// Job users are looked up on every process attempt, twice (the agent hands
// the attempt dir over, the supervisor sets the job's credential), and the
// static build (osusergo) reads and parses the whole of /etc/passwd each
// time: about 14 syscalls per lookup on the hot path of a short job. The
// answers are kept while the file is unchanged (same inode, size and
// mtime) and for at most idCacheTTL, so a user added or removed shows at
// the next attempt, and one served by another source (NSS with cgo) within
// the TTL.

// idCacheTTL bounds how long an answer is trusted even when /etc/passwd
// and /etc/group look unchanged.
const idCacheTTL = 30 * time.Second

// fileStamp identifies one version of a file without reading it.
type fileStamp struct {
	ino, size, mtime int64
}

func stampOf(path string) fileStamp {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return fileStamp{ino: -1}
	}
	return fileStamp{ino: int64(st.Ino), size: st.Size, mtime: st.Mtim.Nano()}
}

// idCache memoizes one kind of lookup (users or groups) by name.
type idCache struct {
	file   string
	lookup func(string) (string, string, error) // name -> id, group id

	mu    sync.Mutex
	stamp fileStamp
	at    time.Time
	byKey map[string]idAnswer
}

type idAnswer struct {
	id, gid string
	err     error
}

func (c *idCache) get(name string) (id, gid string, err error) {
	st := stampOf(c.file)
	now := time.Now()
	c.mu.Lock()
	if st != c.stamp || now.Sub(c.at) > idCacheTTL || c.byKey == nil {
		c.stamp, c.at, c.byKey = st, now, map[string]idAnswer{}
	}
	a, ok := c.byKey[name]
	c.mu.Unlock()
	if ok {
		return a.id, a.gid, a.err
	}
	a.id, a.gid, a.err = c.lookup(name)
	c.mu.Lock()
	if c.stamp == st { // not reset by a newer version meanwhile
		c.byKey[name] = a
	}
	c.mu.Unlock()
	return a.id, a.gid, a.err
}

var (
	userIDs = &idCache{file: "/etc/passwd", lookup: func(name string) (string, string, error) {
		u, err := user.Lookup(name)
		if err != nil {
			return "", "", err
		}
		return u.Uid, u.Gid, nil
	}}
	groupIDs = &idCache{file: "/etc/group", lookup: func(name string) (string, string, error) {
		g, err := user.LookupGroup(name)
		if err != nil {
			return "", "", err
		}
		return g.Gid, g.Gid, nil
	}}
)

// lookupUser is user.Lookup's uid and gid, memoized (above).
func lookupUser(name string) (uid, gid string, err error) { return userIDs.get(name) }

// lookupGroupID is user.LookupGroup's gid, memoized (above).
func lookupGroupID(name string) (string, error) {
	gid, _, err := groupIDs.get(name)
	return gid, err
}
