package fsm

import (
	"fmt"
	"iter"
	"slices"

	bolt "go.etcd.io/bbolt"
)

// Tx is a consistent read-only view of the state. It is valid only inside
// the View callback; the records it returns are copies the caller owns.
type Tx struct {
	tx    *bolt.Tx
	live  *liveCache   // nil: decode every live attempt
	lives *liveSetMemo // nil: read every live attempt from the index
	nodes *nodeCache   // nil: decode every node
	// nodesDone and livesDone are nodes.done and lives.done read before
	// the transaction opened.
	nodesDone, livesDone uint64
}

// View runs fn in a read transaction. Readers never block Apply.
func (f *FSM) View(fn func(tx *Tx) error) error {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.closed {
		return ErrClosed
	}
	// Before the transaction: see versionedMemo.
	nodesDone, livesDone := f.nodes.done.Load(), f.lives.done.Load()
	return f.db.View(func(tx *bolt.Tx) error {
		return fn(&Tx{tx: tx, live: &f.live, lives: &f.lives, nodes: &f.nodes, nodesDone: nodesDone, livesDone: livesDone})
	})
}

// Job returns one job, or ErrNotFound.
func (t *Tx) Job(id string) (*Job, error) {
	v := t.tx.Bucket(bucketJobs).Get([]byte(id))
	return record[Job](v, "job", id)
}

// bucketRecords decodes every value of bucket b (nil: none), in key
// order.
func bucketRecords[T any](b *bolt.Bucket) ([]T, error) {
	if b == nil {
		return nil, nil
	}
	var out []T
	err := b.ForEach(func(_, v []byte) error {
		var r T
		if err := decode(v, &r); err != nil {
			return err
		}
		out = append(out, r)
		return nil
	})
	return out, err
}

// JobSpec returns one job's spec, or ErrNotFound. It skips decoding the
// rest of the record (for callers that only run the job).
func (t *Tx) JobSpec(id string) (*JobSpec, error) {
	v := t.tx.Bucket(bucketJobs).Get([]byte(id))
	if v == nil {
		return nil, fmt.Errorf("%w: job %q", ErrNotFound, id)
	}
	var j jobSpecView
	if err := decode(v, &j); err != nil {
		return nil, err
	}
	return &j.Spec, nil
}

// Attempts returns a job's attempts in order (empty if it has none).
func (t *Tx) Attempts(jobID string) ([]Attempt, error) {
	var out []Attempt
	for _, v := range under(t.tx.Bucket(bucketAttempts), attemptPrefix(jobID)) {
		var at Attempt
		if err := decodeAttempt(v, &at); err != nil {
			return nil, err
		}
		out = append(out, at)
	}
	return out, nil
}

// Attempt returns one attempt, or ErrNotFound.
func (t *Tx) Attempt(jobID string, num int) (*Attempt, error) {
	v := t.tx.Bucket(bucketAttempts).Get(attemptKey(jobID, num))
	if v == nil {
		return nil, fmt.Errorf("%w: attempt %s/%d", ErrNotFound, jobID, num)
	}
	return decodedAttempt(v)
}

// Node returns one node, or ErrNotFound.
func (t *Tx) Node(name string) (*Node, error) {
	v := t.tx.Bucket(bucketNodes).Get([]byte(name))
	return record[Node](v, "node", name)
}

// Nodes returns every node, sorted by name. The records' maps and slices
// (labels, named resources, drivers, job users) may be shared with other
// readers: do not modify them (nodecache.go).
func (t *Tx) Nodes() ([]Node, error) {
	nodes, shared, err := t.nodesMemo()
	if shared {
		nodes = slices.Clone(nodes)
	}
	return nodes, err
}

// NodesShared is Nodes without the copy: the slice and its records may be
// shared with other readers and must not be modified at all. For readers
// of every node on a hot path (the scheduler's plans).
func (t *Tx) NodesShared() ([]Node, error) {
	nodes, _, err := t.nodesMemo()
	return nodes, err
}

// nodesMemo returns the records from the memo (shared), patched from it
// (nodecache.go), or decoded now.
func (t *Tx) nodesMemo() (nodes []Node, shared bool, err error) {
	if t.nodes == nil {
		nodes, err = bucketRecords[Node](t.tx.Bucket(bucketNodes))
		return nodes, false, err
	}
	version, exact := t.nodes.version(t.nodesDone, t.AppliedIndex)
	if exact {
		if memo, ok := t.nodes.get(version); ok {
			return memo, true, nil
		}
	}
	if memo, names, ok := t.nodes.patchable(version, exact); ok {
		t.nodes.patched.Add(1)
		b := t.tx.Bucket(bucketNodes)
		nodes, err = patchNodes(memo, names, func(name string) (*Node, error) {
			v := b.Get([]byte(name))
			if v == nil {
				return nil, nil
			}
			return record[Node](v, "node", name)
		})
	} else {
		nodes, err = bucketRecords[Node](t.tx.Bucket(bucketNodes))
	}
	if err == nil && exact {
		// Built here and never changed again: the memo and this caller
		// share it, and Nodes copies it for its caller.
		t.nodes.put(version, nodes)
		return nodes, true, nil
	}
	return nodes, false, err
}

// NodesVersion identifies the node records this view holds: two views
// with the same version hold the same records. ok is false when it cannot
// tell (a write in flight); readers then build from the records.
func (t *Tx) NodesVersion() (version uint64, ok bool) {
	if t.nodes == nil {
		return 0, false
	}
	return t.nodes.version(t.nodesDone, t.AppliedIndex)
}

// ForEachJobInState calls fn for each job in state, oldest first, until fn
// returns false.
func (t *Tx) ForEachJobInState(state JobState, fn func(*Job) bool) error {
	for j, err := range jobsInState(t.tx, state) {
		if err != nil {
			return err
		}
		if !fn(j) {
			return nil
		}
	}
	return nil
}

// jobsInState yields the jobs in state, oldest first, from the state
// index; an error (a job it names is missing or undecodable) ends it.
func jobsInState(tx *bolt.Tx, state JobState) iter.Seq2[*Job, error] {
	return func(yield func(*Job, error) bool) {
		jobs := tx.Bucket(bucketJobs)
		var cs cursors
		prefix := jobStatePrefix(state)
		c := tx.Bucket(bucketJobsByState).Cursor()
		for k, _ := c.Seek(prefix); k != nil && hasPrefix(k, prefix); k, _ = c.Next() {
			v := cs.get(jobs, k[len(prefix):])
			if v == nil {
				yield(nil, fmt.Errorf("%w: index names missing job %q", ErrCorrupt, k[len(prefix):]))
				return
			}
			var j Job
			if err := decode(v, &j); err != nil {
				yield(nil, err)
				return
			}
			if !yield(&j, nil) {
				return
			}
		}
	}
}

// CountJobsInState counts jobs in state without decoding them.
func (t *Tx) CountJobsInState(state JobState) int {
	n := 0
	prefix := jobStatePrefix(state)
	c := t.tx.Bucket(bucketJobsByState).Cursor()
	for k, _ := c.Seek(prefix); k != nil && hasPrefix(k, prefix); k, _ = c.Next() {
		n++
	}
	return n
}

// LiveAttempts calls fn for every assigned or running attempt (by node,
// then job ID) until fn returns false.
func (t *Tx) LiveAttempts(fn func(*Attempt) bool) error {
	if t.lives == nil {
		return t.scanLive(nil, func(_ []byte, at *Attempt) bool { return fn(at) })
	}
	set, err := t.liveSetNow()
	if err != nil {
		return err
	}
	for i := range set.atts {
		at := copyAttempt(&set.atts[i])
		if !fn(&at) {
			return nil
		}
	}
	return nil
}

// LiveAttemptsShared is every live attempt, in the order LiveAttempts
// gives them, without a copy: the slice and the records' maps and
// pointers may be shared with other readers and must not be modified at
// all. For the scheduler, which reads every live attempt on every plan
// (liveset.go).
func (t *Tx) LiveAttemptsShared() ([]Attempt, error) {
	if t.lives == nil {
		var out []Attempt
		err := t.scanLive(nil, func(_ []byte, at *Attempt) bool { out = append(out, *at); return true })
		return out, err
	}
	set, err := t.liveSetNow()
	if err != nil {
		return nil, err
	}
	return set.atts, nil
}

// LiveAttemptsOnNode calls fn for the live attempts on one node.
func (t *Tx) LiveAttemptsOnNode(node string, fn func(*Attempt) bool) error {
	return t.scanLive(livePrefix(node), func(_ []byte, at *Attempt) bool { return fn(at) })
}

// LiveAttemptSpecs calls fn for each live attempt with its job's spec
// (JobSpec), until fn returns false.
func (t *Tx) LiveAttemptSpecs(fn func(*Attempt, *JobSpec) bool) error {
	var specErr error
	err := t.LiveAttempts(func(a *Attempt) bool {
		spec, err := t.JobSpec(a.JobID)
		if err != nil {
			specErr = err
			return false
		}
		return fn(a, spec)
	})
	if err == nil {
		err = specErr
	}
	return err
}

// scanLive calls fn with the key and a copy of each live attempt under
// prefix in the live index, until fn returns false.
func (t *Tx) scanLive(prefix []byte, fn func(key []byte, at *Attempt) bool) error {
	attempts := t.tx.Bucket(bucketAttempts)
	var cs cursors
	c := t.tx.Bucket(bucketLiveByNode).Cursor()
	k, _ := c.First()
	if prefix != nil {
		k, _ = c.Seek(prefix)
	}
	var old, next map[string]*liveEntry
	if t.live != nil {
		old = t.live.take(prefix)
		next = make(map[string]*liveEntry, len(old))
	}
	for ; k != nil && hasPrefix(k, prefix); k, _ = c.Next() {
		i := indexByte(k, 0)
		if i < 0 {
			return fmt.Errorf("%w: live index entry %q names no attempt", ErrCorrupt, k)
		}
		v := cs.get(attempts, k[i+1:])
		if v == nil {
			return fmt.Errorf("%w: live index entry %q names no attempt", ErrCorrupt, k)
		}
		var at Attempt
		var err error
		if t.live != nil {
			at, err = t.live.attempt(old, next, k[i+1:], v)
		} else {
			err = decodeAttempt(v, &at)
		}
		if err != nil {
			return err
		}
		if !fn(k, &at) {
			// A partial scan: keep what it met and what it did not reach.
			if t.live != nil {
				for key, e := range old {
					if _, ok := next[key]; !ok {
						next[key] = e
					}
				}
				t.live.put(prefix, next)
			}
			return nil
		}
	}
	if t.live != nil {
		t.live.put(prefix, next)
	}
	return nil
}

func indexByte(b []byte, c byte) int {
	for i, x := range b {
		if x == c {
			return i
		}
	}
	return -1
}

// Queues returns the concurrency limit of every limited queue.
func (t *Tx) Queues() (map[string]int, error) {
	out := map[string]int{}
	err := t.tx.Bucket(bucketQueues).ForEach(func(k, v []byte) error {
		var q Queue
		if err := decode(v, &q); err != nil {
			return err
		}
		out[string(k)] = q.MaxRunning
		return nil
	})
	return out, err
}

// ClusterID is the ID recorded by InitCluster ("" before).
func (t *Tx) ClusterID() string {
	return string(t.tx.Bucket(bucketMeta).Get(metaClusterID))
}

// AppliedIndex is the index this view reflects.
func (t *Tx) AppliedIndex() uint64 {
	return readU64(t.tx.Bucket(bucketMeta).Get(metaAppliedIndex))
}

// JobIDByIdempotencyKey returns the job a still-valid key points at.
func (t *Tx) JobIDByIdempotencyKey(key string) (string, bool) {
	v := t.tx.Bucket(bucketIdempotency).Get([]byte(key))
	if v == nil {
		return "", false
	}
	var r idemRecord
	if decode(v, &r) != nil {
		return "", false
	}
	return r.JobID, true
}
