package fsm

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"time"

	bolt "go.etcd.io/bbolt"
)

// The scheduler's indexes. A leader wake must cost what it can do, not
// what is pending, so the scheduler never lists every waiting or queued
// job. Two buckets let it read only what matters now:
//
//   - jobs_by_due holds every pending job (waiting, queued, retrying) that
//     has a time at which the scheduler must act on it: its NextRunAt
//     (waiting/retrying: release) or its deadline (fail), whichever is
//     earlier. A wake reads the entries at or before now, and the first
//     entry after now is its next timer.
//   - queued_by_group holds every queued job, keyed by its placement group
//     (the fields that decide whether and why it can be placed: queue,
//     driver, constraints, resources), then priority, then submit time and
//     ID. Each (group, priority) run is in the scheduler's order, so the
//     scheduler merges the runs and stops reading a group at its first job
//     that does not fit: the rest of that group cannot fit either.
//   - jobs_by_finish holds every terminal job by FinishedAt, so the GC the
//     leader issues every minute reads only the jobs it drops instead of
//     every retained one.
//
// Both are maintained by saveJob and deleteJob only (state.go), like
// jobs_by_state, and are a pure function of the job records, so they are
// rebuilt when a file without them is opened (see ensureSchedIndexes).

// Key layouts.
const (
	groupLen     = 16               // truncated sha256 of the placement group
	runPrefixLen = groupLen + 8     // group + priority
	queuedFixed  = runPrefixLen + 8 // + submitted time, then the job ID
	dueFixed     = 8                // due time, then the job ID
)

// sortableTime encodes t so that byte order is time order. Times outside
// what UnixNano represents (years 1678..2262) are clamped; the scheduler
// re-checks the real fields of every job it reads.
func sortableTime(t time.Time) uint64 {
	var n int64
	switch {
	case t.Before(minIndexTime):
		n = math.MinInt64
	case t.After(maxIndexTime):
		n = math.MaxInt64
	default:
		n = t.UnixNano()
	}
	return uint64(n) ^ (1 << 63)
}

var (
	minIndexTime = time.Unix(0, math.MinInt64)
	maxIndexTime = time.Unix(0, math.MaxInt64)
)

func timeFromKey(b []byte) time.Time {
	return time.Unix(0, int64(binary.BigEndian.Uint64(b)^(1<<63))).UTC()
}

// dueTime is the key time of a job in jobs_by_due, if it has one.
func dueTime(j *Job) (time.Time, bool) {
	var due time.Time
	switch j.State {
	case JobWaiting, JobRetrying:
		due = j.NextRunAt
	case JobQueued:
	default:
		return time.Time{}, false
	}
	if d := j.Spec.Deadline; d != nil && (due.IsZero() || d.Before(due)) {
		due = *d
	}
	return due, !due.IsZero()
}

func dueKey(due time.Time, id string) []byte {
	k := make([]byte, 0, dueFixed+len(id))
	k = binary.BigEndian.AppendUint64(k, sortableTime(due))
	return append(k, id...)
}

// PlacementGroup identifies jobs that are interchangeable for placement:
// same queue, driver, constraints and resources. If one job of a group
// cannot be placed (its queue is full, no node matches, no node has room)
// then, for as long as capacity only shrinks, none of the group can, for
// the same reason. The value is opaque (a truncated sha256).
func PlacementGroup(s *JobSpec) string {
	return string(appendPlacementGroup(make([]byte, 0, groupLen), s))
}

// appendPlacementGroup appends s's PlacementGroup to k.
func appendPlacementGroup(k []byte, s *JobSpec) []byte {
	var stack [256]byte
	b := stack[:0] // the hashed text: each field as its length, ':', itself
	field := func(v string) {
		b = strconv.AppendInt(b, int64(len(v)), 10)
		b = append(append(b, ':'), v...)
	}
	var num [20]byte
	intField := func(n int64) {
		d := strconv.AppendInt(num[:0], n, 10)
		b = strconv.AppendInt(b, int64(len(d)), 10)
		b = append(append(b, ':'), d...)
	}
	field(s.Queue)
	field(s.Driver)
	intField(int64(len(s.Constraints)))
	for _, c := range s.Constraints {
		field(c)
	}
	intField(s.Resources.CPU)
	intField(s.Resources.MemoryMB)
	if len(s.Resources.Named) > 0 {
		for _, k := range slices.Sorted(maps.Keys(s.Resources.Named)) {
			field(k)
			intField(s.Resources.Named[k])
		}
	}
	// Namespace (its quota) and user (the nodes' --job-users) also decide
	// placement. Like gangs they add to the text only when set, so jobs of
	// the default namespace without a user keep their keys; files written
	// before they were part of the group are re-indexed at Open
	// (metaGroupVersion).
	if s.Namespace != "" {
		field("ns")
		field(s.Namespace)
	}
	if s.User != "" {
		field("user")
		field(s.User)
	}
	// Volumes too: only when set, so other jobs keep their keys.
	for _, v := range s.Volumes {
		field("volume")
		field(v.Name)
	}
	if g := s.Gang; g != nil {
		// Only gangs add to the text, so other jobs keep their keys.
		field("gang")
		intField(int64(g.Size))
		if g.SpreadTasks() {
			field("spread")
		}
	}
	sum := sha256.Sum256(b)
	return append(k, sum[:groupLen]...)
}

func queuedKey(j *Job) []byte {
	k := make([]byte, 0, queuedFixed+len(j.ID))
	k = appendPlacementGroup(k, &j.Spec)
	k = binary.BigEndian.AppendUint64(k, uint64(int64(j.Spec.Priority))^(1<<63))
	k = binary.BigEndian.AppendUint64(k, sortableTime(j.SubmittedAt))
	return append(k, j.ID...)
}

// finishTime is the key time of a job in jobs_by_finish, if it has one.
func finishTime(j *Job) (time.Time, bool) {
	return j.FinishedAt, j.State.Terminal()
}

// dueMemo remembers, per job read in this transaction, the times its
// jobs_by_due and jobs_by_finish entries have, so saveJob can move the
// entries after the caller changed NextRunAt or FinishedAt. A batch that is
// rolled back gets a new applier.
type dueMemo map[string]indexTimes

type indexTimes struct {
	due, finished       time.Time
	hasDue, hasFinished bool
}

func timesOf(j *Job) indexTimes {
	var t indexTimes
	t.due, t.hasDue = dueTime(j)
	t.finished, t.hasFinished = finishTime(j)
	return t
}

func (t indexTimes) equal(o indexTimes) bool {
	return t.hasDue == o.hasDue && t.due.Equal(o.due) && t.hasFinished == o.hasFinished && t.finished.Equal(o.finished)
}

func (a *applier) rememberDue(j *Job) {
	if a.dueOf == nil {
		a.dueOf = dueMemo{}
	}
	a.dueOf[j.ID] = timesOf(j)
}

// moveTimeKey replaces job id's key in the time index b: the one at
// from (if hadFrom) goes, the one at to (if hasTo) comes.
func (a *applier) moveTimeKey(b *bolt.Bucket, id string, from time.Time, hadFrom bool, to time.Time, hasTo bool) error {
	if hadFrom {
		if err := a.del(b, dueKey(from, id)); err != nil {
			return err
		}
	}
	if hasTo {
		return a.put(b, dueKey(to, id), nil)
	}
	return nil
}

// indexSchedJob moves j's entries in the scheduler's indexes; from is its
// state before this entry ("" for a new job).
func (a *applier) indexSchedJob(j *Job, from JobState) error {
	a.packSchedIndexes()
	var old indexTimes
	if from != "" {
		var ok bool
		if old, ok = a.dueOf[j.ID]; !ok {
			// Not read through getJob in this transaction: read the record
			// as stored (every handler does read it first; this is a guard).
			v := a.get(a.jobs, []byte(j.ID))
			if v == nil {
				return fmt.Errorf("%w: job %q saved as %s but not stored", ErrCorrupt, j.ID, from)
			}
			var prev Job
			if err := decode(v, &prev); err != nil {
				return err
			}
			old = timesOf(&prev)
		}
	}
	cur := timesOf(j)
	if !old.equal(cur) {
		if err := a.moveTimeKey(a.byDue, j.ID, old.due, old.hasDue, cur.due, cur.hasDue); err != nil {
			return err
		}
		if err := a.moveTimeKey(a.byFinish, j.ID, old.finished, old.hasFinished, cur.finished, cur.hasFinished); err != nil {
			return err
		}
	}
	// A job created by this entry is read through getJob (which remembers
	// its times) before anything changes it again.
	if from != "" {
		if a.dueOf == nil {
			a.dueOf = dueMemo{}
		}
		a.dueOf[j.ID] = cur
	}
	switch {
	case from == JobQueued && j.State != JobQueued:
		return a.del(a.queuedByGroup, queuedKey(j))
	case from != JobQueued && j.State == JobQueued:
		return a.put(a.queuedByGroup, queuedKey(j), nil)
	}
	return nil
}

// packSchedIndexes fills the index pages like the other append-mostly
// buckets (apply.go): due, finish and submit times mostly grow, so bbolt's
// default of 0.5 left jobs_by_due half empty (10.5 MB of pages for 3.4 MB
// of keys at 100,000 jobs). FillPercent belongs to the transaction's bucket
// handle and only shapes page splits, never the keys and values.
func (a *applier) packSchedIndexes() {
	a.byDue.FillPercent, a.queuedByGroup.FillPercent, a.byFinish.FillPercent = appendFill, appendFill, appendFill
}

// unindexSchedJob drops a deleted job's entries (j as stored).
func (a *applier) unindexSchedJob(j *Job) error {
	a.packSchedIndexes()
	if due, ok := dueTime(j); ok {
		if err := a.del(a.byDue, dueKey(due, j.ID)); err != nil {
			return err
		}
	}
	if fin, ok := finishTime(j); ok {
		if err := a.del(a.byFinish, dueKey(fin, j.ID)); err != nil {
			return err
		}
	}
	delete(a.dueOf, j.ID)
	if j.State == JobQueued {
		return a.del(a.queuedByGroup, queuedKey(j))
	}
	return nil
}

// haveSchedIndexes reports whether the file has every index bucket.
func haveSchedIndexes(tx *bolt.Tx) bool {
	return tx.Bucket(bucketJobsByDue) != nil && tx.Bucket(bucketQueuedByGroup) != nil && tx.Bucket(bucketJobsByFinish) != nil
}

// rebuildSchedIndexes refills the indexes from the job records. Open calls
// it for a file written before they existed (an upgrade, a restored old
// snapshot) and after a record migration. The result is a function of the
// records alone, the same on every node, so StateHash still agrees.
func rebuildSchedIndexes(tx *bolt.Tx) error {
	for _, name := range [][]byte{bucketJobsByDue, bucketQueuedByGroup, bucketJobsByFinish} {
		if b := tx.Bucket(name); b != nil {
			if err := tx.DeleteBucket(name); err != nil {
				return err
			}
		}
	}
	byDue, err := tx.CreateBucket(bucketJobsByDue)
	if err != nil {
		return err
	}
	byGroup, err := tx.CreateBucket(bucketQueuedByGroup)
	if err != nil {
		return err
	}
	byFinish, err := tx.CreateBucket(bucketJobsByFinish)
	if err != nil {
		return err
	}
	byDue.FillPercent, byGroup.FillPercent, byFinish.FillPercent = appendFill, appendFill, appendFill
	if tx.Bucket(bucketJobs) == nil || tx.Bucket(bucketJobsByState) == nil {
		return nil // a new file
	}
	for _, st := range []JobState{JobWaiting, JobQueued, JobRetrying, JobSucceeded, JobFailed, JobCancelled, JobSkipped} {
		for j, err := range jobsInState(tx, st) {
			if err != nil {
				return err
			}
			if due, ok := dueTime(j); ok {
				if err := byDue.Put(dueKey(due, j.ID), nil); err != nil {
					return err
				}
			}
			if j.State == JobQueued {
				if err := byGroup.Put(queuedKey(j), nil); err != nil {
					return err
				}
			}
			if fin, ok := finishTime(j); ok {
				if err := byFinish.Put(dueKey(fin, j.ID), nil); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// ForEachDueJob calls fn, earliest first, for every pending job whose
// NextRunAt or deadline is at or before now, until fn returns false. It
// returns the earliest such time after now (zero if there is none), which
// is when the scheduler must look again.
func (t *Tx) ForEachDueJob(now time.Time, fn func(*Job) bool) (next time.Time, err error) {
	jobs := t.tx.Bucket(bucketJobs)
	limit := sortableTime(now)
	c := t.tx.Bucket(bucketJobsByDue).Cursor()
	for k, _ := c.First(); k != nil; k, _ = c.Next() {
		if len(k) <= dueFixed {
			return time.Time{}, fmt.Errorf("%w: due index key %q", ErrCorrupt, k)
		}
		if binary.BigEndian.Uint64(k) > limit {
			return timeFromKey(k), nil
		}
		v := jobs.Get(k[dueFixed:])
		if v == nil {
			return time.Time{}, fmt.Errorf("%w: due index names missing job %q", ErrCorrupt, k[dueFixed:])
		}
		var j Job
		if err := decode(v, &j); err != nil {
			return time.Time{}, err
		}
		if !fn(&j) {
			return time.Time{}, nil
		}
	}
	return time.Time{}, nil
}

// QueuedRun walks the queued jobs of one placement group and one priority,
// oldest first (submit time, then ID). It is valid only inside its View.
type QueuedRun struct {
	jobs   *bolt.Bucket
	c      *bolt.Cursor
	prefix []byte
	k      []byte
}

// QueuedRuns returns a run per (placement group, priority) with queued
// jobs. Listing them costs a seek per run, not a read per job.
func (t *Tx) QueuedRuns() ([]*QueuedRun, error) {
	b := t.tx.Bucket(bucketQueuedByGroup)
	jobs := t.tx.Bucket(bucketJobs)
	var out []*QueuedRun
	c := b.Cursor()
	k, _ := c.First()
	for k != nil {
		if len(k) <= queuedFixed {
			return nil, fmt.Errorf("%w: queued index key %q", ErrCorrupt, k)
		}
		prefix := append([]byte(nil), k[:runPrefixLen]...)
		r := &QueuedRun{jobs: jobs, c: b.Cursor(), prefix: prefix}
		r.k, _ = r.c.Seek(prefix)
		out = append(out, r)
		next, ok := successor(prefix)
		if !ok {
			break
		}
		k, _ = c.Seek(next)
	}
	return out, nil
}

// successor is the smallest key greater than every key starting with p.
func successor(p []byte) ([]byte, bool) {
	s := append([]byte(nil), p...)
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] != 0xff {
			s[i]++
			return s[:i+1], true
		}
	}
	return nil, false
}

// Group is the run's PlacementGroup.
func (r *QueuedRun) Group() string { return string(r.prefix[:groupLen]) }

// Priority is the submitted priority of every job in the run.
func (r *QueuedRun) Priority() int {
	return int(int64(binary.BigEndian.Uint64(r.prefix[groupLen:]) ^ (1 << 63)))
}

// Head returns the submit time and ID of the oldest job left, without
// reading it; ok is false when the run is exhausted.
func (r *QueuedRun) Head() (submitted time.Time, id string, ok bool) {
	if r.k == nil || !hasPrefix(r.k, r.prefix) || len(r.k) <= queuedFixed {
		return time.Time{}, "", false
	}
	return timeFromKey(r.k[runPrefixLen:]), string(r.k[queuedFixed:]), true
}

// Job reads the head job.
func (r *QueuedRun) Job() (*Job, error) {
	_, id, ok := r.Head()
	if !ok {
		return nil, fmt.Errorf("%w: queued run is exhausted", ErrNotFound)
	}
	v := r.jobs.Get([]byte(id))
	if v == nil {
		return nil, fmt.Errorf("%w: queued index names missing job %q", ErrCorrupt, id)
	}
	return decoded[Job](v)
}

// Advance moves to the next job of the run.
func (r *QueuedRun) Advance() {
	if r.k != nil {
		r.k, _ = r.c.Next()
	}
}

// finishedBefore lists the terminal jobs that finished before t, for GC.
func (a *applier) finishedBefore(t time.Time) ([]string, error) {
	var ids []string
	limit := sortableTime(t)
	c := a.byFinish.Cursor()
	for k, _ := c.First(); k != nil; k, _ = c.Next() {
		if len(k) <= dueFixed {
			return nil, fmt.Errorf("%w: finish index key %q", ErrCorrupt, k)
		}
		if binary.BigEndian.Uint64(k) >= limit {
			break
		}
		ids = append(ids, string(k[dueFixed:]))
	}
	return ids, nil
}
