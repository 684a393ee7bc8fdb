package fsm

import (
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
)

// StateCounts summarises a state: what a backup holds, or what a restore
// replaced.
type StateCounts struct {
	Jobs            int            `json:"jobs"`
	JobsByState     map[string]int `json:"jobs_by_state,omitempty"`
	Attempts        int            `json:"attempts"`
	LiveAttempts    int            `json:"live_attempts"`
	Nodes           int            `json:"nodes"`
	NodeNames       []string       `json:"node_names,omitempty"`
	Queues          int            `json:"queues"`
	IdempotencyKeys int            `json:"idempotency_keys"`
}

// Unfinished is the number of jobs not in a terminal state.
func (c StateCounts) Unfinished() int {
	n := 0
	for s, k := range c.JobsByState {
		if !JobState(s).Terminal() {
			n += k
		}
	}
	return n
}

func countState(tx *bolt.Tx) (StateCounts, error) {
	c := StateCounts{JobsByState: map[string]int{}}
	err := tx.Bucket(bucketJobsByState).ForEach(func(k, _ []byte) error {
		if i := strings.IndexByte(string(k), '/'); i > 0 {
			c.JobsByState[string(k[:i])]++
			c.Jobs++
		}
		return nil
	})
	if err != nil {
		return c, err
	}
	c.Attempts = tx.Bucket(bucketAttempts).Stats().KeyN
	c.LiveAttempts = tx.Bucket(bucketLiveByNode).Stats().KeyN
	c.Queues = tx.Bucket(bucketQueues).Stats().KeyN
	c.IdempotencyKeys = tx.Bucket(bucketIdempotency).Stats().KeyN
	err = tx.Bucket(bucketNodes).ForEach(func(k, _ []byte) error {
		c.NodeNames = append(c.NodeNames, string(k))
		return nil
	})
	c.Nodes = len(c.NodeNames)
	return c, err
}

// Counts summarises the current state.
func (f *FSM) Counts() (StateCounts, error) {
	var c StateCounts
	err := f.View(func(t *Tx) error {
		var err error
		c, err = countState(t.tx)
		return err
	})
	return c, err
}

// ImageInfo describes a state image (a raft snapshot of this FSM).
type ImageInfo struct {
	SchemaVersion int
	AppliedIndex  uint64
	ClusterID     string
	Counts        StateCounts
}

// ImageFix adapts an image to the cluster it is restored into.
type ImageFix struct {
	// ClusterID replaces the image's cluster ID when set: the cluster
	// keeps its identity (gossip, cluster.json) whatever it restores.
	ClusterID string
	// Members are the nodes of the cluster restored into. A node record of
	// the image that is not among them and is alive or suspect becomes
	// dead at At, so nothing is placed on it and its attempts are
	// declared lost under the usual lease rule.
	Members map[string]bool
	At      time.Time
}

// CheckImage opens the state image at path exactly as Restore will (the
// consistency check, the schema version, an upgrade from schema 1),
// applies fix if given, and describes the result. It changes the file:
// pass a private copy. An unusable image gives an error wrapping
// ErrBadBackup.
func CheckImage(path string, fix *ImageFix, log *slog.Logger) (ImageInfo, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var info ImageInfo
	db, err := openDB(path, Options{}, log)
	if err != nil {
		return info, fmt.Errorf("%w: the state image does not open: %v", ErrBadBackup, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if fix != nil {
			if err := fixImage(tx, fix); err != nil {
				return err
			}
		}
		info.SchemaVersion, _ = strconv.Atoi(string(meta.Get(metaSchemaVersion)))
		info.AppliedIndex = readU64(meta.Get(metaAppliedIndex))
		info.ClusterID = string(meta.Get(metaClusterID))
		var err error
		info.Counts, err = countState(tx)
		return err
	})
	if cerr := closeClean(db); err == nil {
		err = cerr
	}
	if err != nil {
		return info, fmt.Errorf("%w: %v", ErrBadBackup, err)
	}
	return info, nil
}

func fixImage(tx *bolt.Tx, fix *ImageFix) error {
	if fix.ClusterID != "" {
		if err := tx.Bucket(bucketMeta).Put(metaClusterID, []byte(fix.ClusterID)); err != nil {
			return err
		}
	}
	if fix.Members == nil {
		return nil
	}
	nodes := tx.Bucket(bucketNodes)
	var gone []Node
	err := nodes.ForEach(func(k, v []byte) error {
		var n Node
		if err := decode(v, &n); err != nil {
			return err
		}
		if !fix.Members[n.Name] && (n.Gossip == NodeAlive || n.Gossip == NodeSuspect) {
			gone = append(gone, n)
		}
		return nil
	})
	if err != nil {
		return err
	}
	slices.SortFunc(gone, func(a, b Node) int { return strings.Compare(a.Name, b.Name) })
	for _, n := range gone {
		n.Gossip, n.StateChangedAt = NodeDead, fix.At
		v, err := encode(&n)
		if err != nil {
			return err
		}
		if err := nodes.Put([]byte(n.Name), v); err != nil {
			return err
		}
	}
	return nil
}
