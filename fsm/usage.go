package fsm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math/bits"
	"slices"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// Usage accounting (issue 39): every attempt that ends adds what it used
// to an hourly record per namespace, user and chosen labels, in the same
// transaction as its end, so it counts exactly once on every replica and
// outlives the jobs' own retention. See DESIGN.md "Usage accounting".
//
// The bucket is created by the first record, not at Open, so a state that
// never accounted hashes as before it existed. Keys: 8-byte big-endian
// unix seconds of the record's start (an hour; a day for records older
// than UsageHourlyFor, rolled up by GC), then namespace display name,
// NUL, user, NUL, labels ("k=v,k2=v2", keys sorted). Values: Usage.
var bucketUsage = []byte("usage")

// Keys in bucketMeta for accounting.
var (
	// metaUsage: the StartUsage in force (present: accounting is on).
	metaUsage = []byte("usage")
	// metaUsageRolled: 8-byte unix seconds before which every usage
	// record is a daily one (GC's rollup got that far).
	metaUsageRolled = []byte("usage_rolled")
)

// CmdStartUsage turns accounting on, or changes its labels.
const CmdStartUsage CommandType = "start_usage" // StartUsage

// Accounting limits.
const (
	// MaxUsageLabels bounds StartUsage.Labels.
	MaxUsageLabels = 4
	// MaxUsageKeysPerPeriod bounds the records of one hour (or day): a
	// new combination beyond it is added to its namespace's
	// UsageOtherLabels record instead.
	MaxUsageKeysPerPeriod = 500
	// UsageHourlyFor is how long records stay hourly; GC then rolls them
	// into one record per day.
	UsageHourlyFor = 31 * 24 * time.Hour
	// UsageRetention is how long records are kept at all.
	UsageRetention = 365 * 24 * time.Hour
)

// UsageOtherLabels is the labels of the record that folds the
// combinations of an hour past MaxUsageKeysPerPeriod (its user is "").
const UsageOtherLabels = "(other)"

// StartUsage turns accounting on (Apply adds usage only once a
// StartUsage is committed: an older server would not, and the states
// would diverge). Labels are the job label keys records are split by.
type StartUsage struct {
	Labels []string `json:"labels,omitempty"`
}

// Usage is what attempts used, summed: exact integers, so every replica
// adds the same. Times are milliseconds of wall time; "X·ms" fields are X
// held for that long.
type Usage struct {
	// Attempts counts the attempts that ended (started or not: one that
	// never started adds 1 here and nothing else).
	Attempts int64 `json:"attempts"`
	// WallMs: finished − started.
	WallMs int64 `json:"wall_ms"`
	// CPUUsedMs: the CPU time the node measured (cgroup usage).
	CPUUsedMs int64 `json:"cpu_used_ms"`
	// CPUReqMs: requested millicores × wall ms / 1000, core-ms allocated.
	CPUReqMs int64 `json:"cpu_requested_ms"`
	// MemReqMiBMs: requested MiB × wall ms.
	MemReqMiBMs int64 `json:"memory_requested_mib_ms"`
	// MemUsedMiBMs: peak MiB × wall ms, an upper bound of memory-time
	// (the node reports only the peak).
	MemUsedMiBMs int64 `json:"memory_used_mib_ms"`
	// PeakMemoryB is the largest peak of any attempt (a max, not a sum).
	PeakMemoryB int64 `json:"peak_memory_bytes"`
	// GPUMs: whole GPUs held × wall ms.
	GPUMs int64 `json:"gpu_ms"`
	// GPUMemMiBMs: GPU memory share requested (MiB) × wall ms.
	GPUMemMiBMs int64 `json:"gpu_memory_mib_ms"`
}

// Add adds o to u (PeakMemoryB: the larger).
func (u *Usage) Add(o *Usage) {
	u.Attempts += o.Attempts
	u.WallMs += o.WallMs
	u.CPUUsedMs += o.CPUUsedMs
	u.CPUReqMs += o.CPUReqMs
	u.MemReqMiBMs += o.MemReqMiBMs
	u.MemUsedMiBMs += o.MemUsedMiBMs
	u.PeakMemoryB = max(u.PeakMemoryB, o.PeakMemoryB)
	u.GPUMs += o.GPUMs
	u.GPUMemMiBMs += o.GPUMemMiBMs
}

// AttemptUsage is what a terminal attempt used.
func AttemptUsage(at *Attempt) Usage {
	u := Usage{Attempts: 1, CPUUsedMs: at.CPUTimeNs / 1e6, PeakMemoryB: at.PeakMemoryB}
	if at.StartedAt.IsZero() || at.FinishedAt.IsZero() {
		return u
	}
	wall := max(at.FinishedAt.Sub(at.StartedAt).Milliseconds(), 0)
	gpus := int64(len(at.GPUs))
	if gpus == 0 {
		gpus = at.Resources.Named["gpu"]
	}
	u.WallMs = wall
	u.CPUReqMs = mulDiv(at.Resources.CPU, wall, 1000)
	u.MemReqMiBMs = mulDiv(at.Resources.MemoryMB, wall, 1)
	u.MemUsedMiBMs = mulDiv(at.PeakMemoryB, wall, 1<<20)
	u.GPUMs = mulDiv(gpus, wall, 1)
	u.GPUMemMiBMs = mulDiv(at.Resources.GPUMemoryMiB, wall, 1)
	return u
}

// mulDiv is a×b/d without overflowing in between (negatives: 0; a
// quotient past int64: the largest int64).
func mulDiv(a, b, d int64) int64 {
	if a <= 0 || b <= 0 {
		return 0
	}
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi >= uint64(d) {
		return 1<<63 - 1
	}
	q, _ := bits.Div64(hi, lo, uint64(d))
	return int64(min(q, 1<<63-1))
}

func validStartUsage(p *StartUsage) error {
	if len(p.Labels) > MaxUsageLabels {
		return fmt.Errorf("%w: labels: %d keys (at most %d)", ErrBadCommand, len(p.Labels), MaxUsageLabels)
	}
	for _, l := range p.Labels {
		if err := validKey("labels", l, 128); err != nil {
			return err
		}
		if strings.ContainsAny(l, ",=") {
			return fmt.Errorf("%w: labels: %q must not contain ',' or '='", ErrBadCommand, l)
		}
	}
	if !slices.IsSorted(p.Labels) || len(slices.Compact(slices.Clone(p.Labels))) != len(p.Labels) {
		return fmt.Errorf("%w: labels: %q must be sorted and distinct", ErrBadCommand, p.Labels)
	}
	return nil
}

// NormalizeUsageLabels sorts and dedupes label keys for StartUsage.
func NormalizeUsageLabels(labels []string) []string {
	out := slices.Clone(labels)
	slices.Sort(out)
	return slices.Compact(out)
}

func (a *applier) startUsage(p *StartUsage, _ *Result) error {
	if err := validStartUsage(p); err != nil {
		return err
	}
	v, err := encode(p)
	if err != nil {
		return err
	}
	if bytes.Equal(a.meta.Get(metaUsage), v) {
		return nil
	}
	if err := a.put(a.meta, metaUsage, v); err != nil {
		return err
	}
	a.usage.marker = &usageMarker{on: true, labels: p.Labels}
	return nil
}

// usageMemo is what accounting reads once per batch rather than once per
// attempt. It lives in the applier, so it begins empty with every batch's
// transaction (a batch re-run after a refusal included) and never outlives
// the state it was read from (a snapshot restore replaces the file between
// batches).
type usageMemo struct {
	marker *usageMarker // the StartUsage in force, once read
	bucket *bolt.Bucket // the usage bucket, once created or found
	// keys counts the records of the period starting at period (up to
	// MaxUsageKeysPerPeriod), when known: the bound is checked by a
	// cursor scan only once a period per batch.
	period    []byte
	keys      int
	keysKnown bool
	// pending holds the records this batch changed, by key, as they will
	// be written: a batch's ends add up in memory and each record is
	// written once, by flushUsage, before anything reads the bucket
	// (the scan of periodKeys, gcUsage) and before the batch commits.
	pending map[string]*Usage
}

// usageMarker is the StartUsage in force (off: nil labels, on false).
type usageMarker struct {
	on     bool
	labels []string
}

// usageMarker reads the StartUsage in force through the batch's memo.
func (a *applier) usageMarker() (*usageMarker, error) {
	if a.usage.marker == nil {
		labels, on, err := usageLabels(a.meta)
		if err != nil {
			return nil, err
		}
		if len(labels) > MaxUsageLabels {
			return nil, fmt.Errorf("%w: usage marker names %d labels (at most %d)", ErrCorrupt, len(labels), MaxUsageLabels)
		}
		a.usage.marker = &usageMarker{on: on, labels: labels}
	}
	return a.usage.marker, nil
}

// usageLabels is the label keys in force, and whether accounting is on.
func usageLabels(meta *bolt.Bucket) ([]string, bool, error) {
	v := meta.Get(metaUsage)
	if v == nil {
		return nil, false, nil
	}
	p, err := decoded[StartUsage](v)
	if err != nil {
		return nil, false, err
	}
	return p.Labels, true, nil
}

// usageSpecLabels is a stored spec with only its labels decoded
// (unknown keys are skipped by the decoder).
type usageSpecLabels struct {
	Labels map[string]string `json:"labels,omitempty"`
}

// accountAttempt adds the use of at, which just ended, to the record of
// the entry's hour. It returns what it added (nil: accounting is off).
func (a *applier) accountAttempt(at *Attempt) (*Usage, error) {
	m, err := a.usageMarker()
	if err != nil || !m.on {
		return nil, err
	}
	id, err := a.identOf(at.JobID)
	if errors.Is(err, ErrNotFound) {
		return nil, fmt.Errorf("%w: job %q of an ended attempt", ErrCorrupt, at.JobID)
	}
	if err != nil {
		return nil, err
	}
	var kv []byte
	if len(m.labels) > 0 {
		lv := pickLabels(id.labels, m.labels)
		if id.spec != nil {
			if lv, err = specLabels(id.spec, m.labels); err != nil {
				return nil, err
			}
		}
		for i, k := range m.labels {
			if lv.ok[i] {
				if len(kv) > 0 {
					kv = append(kv, ',')
				}
				kv = append(append(append(kv, k...), '='), lv.v[i]...)
			}
		}
	}
	u := AttemptUsage(at)
	hour := a.at.Truncate(time.Hour)
	if err := a.addUsage(hour, NamespaceOf(id.ns), id.user, string(kv), &u); err != nil {
		return nil, err
	}
	return &u, nil
}

// usageKey is the record key of one combination in the period starting
// at start.
func usageKey(start time.Time, ns, user, labels string) []byte {
	k := binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(ns)+len(user)+len(labels)+2), uint64(start.Unix()))
	k = append(k, noNUL(ns)...)
	k = append(k, 0)
	k = append(k, noNUL(user)...)
	k = append(k, 0)
	return append(k, noNUL(labels)...)
}

func noNUL(s string) string { return strings.ReplaceAll(s, "\x00", "?") }

// parseUsageKey splits a record key.
func parseUsageKey(k []byte) (start time.Time, ns, user, labels string, ok bool) {
	if len(k) < 10 {
		return time.Time{}, "", "", "", false
	}
	start = time.Unix(int64(binary.BigEndian.Uint64(k)), 0).UTC()
	parts := bytes.SplitN(k[8:], []byte{0}, 3)
	if len(parts) != 3 {
		return time.Time{}, "", "", "", false
	}
	return start, string(parts[0]), string(parts[1]), string(parts[2]), true
}

// addUsage adds u to a record, folding a new combination past
// MaxUsageKeysPerPeriod into its namespace's UsageOtherLabels record.
// The record is written by flushUsage.
func (a *applier) addUsage(start time.Time, ns, user, labels string, u *Usage) error {
	b := a.usage.bucket
	if b == nil {
		var err error
		if b, err = a.bucket(bucketUsage); err != nil {
			return err
		}
		a.usage.bucket = b
	}
	k := usageKey(start, ns, user, labels)
	if len(k) > bolt.MaxKeySize {
		// Refused with its entry, as a Put would: flushUsage must not fail.
		return fmt.Errorf("usage key: %w", bolterrors.ErrKeyTooLarge)
	}
	rec, err := a.usageRecord(b, k, labels != UsageOtherLabels)
	if err != nil {
		return err
	}
	if rec == nil { // a new combination past the bound
		if rec, err = a.usageRecord(b, usageKey(start, ns, "", UsageOtherLabels), false); err != nil {
			return err
		}
	}
	rec.Add(u)
	a.wrote = true
	return nil
}

// usageRecord is the pending record of key k, read from the bucket the
// first time; nil when k is new, bounded is set and its period has
// MaxUsageKeysPerPeriod keys already.
func (a *applier) usageRecord(b *bolt.Bucket, k []byte, bounded bool) (*Usage, error) {
	if rec := a.usage.pending[string(k)]; rec != nil {
		return rec, nil
	}
	rec := &Usage{}
	if v := b.Get(k); v != nil {
		if err := decodeUsage(v, rec); err != nil {
			return nil, err
		}
	} else {
		n, err := a.periodKeys(b, k[:8])
		if err != nil {
			return nil, err
		}
		if bounded && n >= MaxUsageKeysPerPeriod {
			return nil, nil
		}
		a.usage.keys = min(n+1, MaxUsageKeysPerPeriod)
	}
	if a.usage.pending == nil {
		a.usage.pending = map[string]*Usage{}
	}
	a.usage.pending[string(k)] = rec
	return rec, nil
}

// periodKeys counts the records of one period (up to the bound), pending
// ones included: by a cursor scan once per period and batch (after
// writing what is pending), then through the memo.
func (a *applier) periodKeys(b *bolt.Bucket, prefix []byte) (int, error) {
	if a.usage.keysKnown && bytes.Equal(a.usage.period, prefix) {
		return a.usage.keys, nil
	}
	if err := a.flushUsage(); err != nil {
		return 0, err
	}
	n := 0
	c := b.Cursor()
	for k, _ := c.Seek(prefix); k != nil && hasPrefix(k, prefix) && n < MaxUsageKeysPerPeriod; k, _ = c.Next() {
		n++
	}
	a.usage.period, a.usage.keys, a.usage.keysKnown = slices.Clone(prefix), n, true
	return n, nil
}

// flushUsage writes the pending records, in key order.
func (a *applier) flushUsage() error {
	if len(a.usage.pending) == 0 {
		return nil
	}
	keys := slices.Sorted(maps.Keys(a.usage.pending))
	buf := make([]byte, 0, len(keys)*usageRecordMax)
	for _, k := range keys {
		start := len(buf)
		buf = appendUsage(buf, a.usage.pending[k])
		if err := a.put(a.usage.bucket, []byte(k), buf[start:len(buf):len(buf)]); err != nil {
			return err
		}
	}
	clear(a.usage.pending)
	return nil
}

// gcUsage rolls hourly records older than UsageHourlyFor into daily
// ones and drops records older than UsageRetention, both reckoned from
// the GC command's stamped time (days in UTC).
func (a *applier) gcUsage() error {
	if m, err := a.usageMarker(); err != nil || !m.on {
		return err
	}
	// Records are read, dropped and rolled below: write what is pending
	// first, and count them afresh.
	if err := a.flushUsage(); err != nil {
		return err
	}
	a.usage.keysKnown = false
	defer func() { a.usage.keysKnown = false }()
	b := a.tx.Bucket(bucketUsage)
	if b == nil {
		return nil
	}
	day := 24 * time.Hour
	rollBefore := a.at.Add(-UsageHourlyFor).Truncate(day)
	dropBefore := a.at.Add(-UsageRetention).Truncate(day)
	type rec struct {
		k []byte
		u Usage
	}
	// Read first: bbolt cursors must not see the bucket change under them.
	var drop [][]byte
	var roll []rec
	rolled := int64(readU64(a.meta.Get(metaUsageRolled)))
	c := b.Cursor()
	k, _ := c.First()
	for ; k != nil && int64(binary.BigEndian.Uint64(k)) < dropBefore.Unix(); k, _ = c.Next() {
		drop = append(drop, slices.Clone(k))
	}
	// Records before rolled are daily already: start where the rollup
	// stopped.
	var v []byte
	for k, v = c.Seek(u64(uint64(max(rolled, dropBefore.Unix(), 0)))); k != nil; k, v = c.Next() {
		t := int64(binary.BigEndian.Uint64(k))
		if t >= rollBefore.Unix() {
			break
		}
		if t%int64(day/time.Second) == 0 {
			continue // a day's first hour: already the daily record's key
		}
		r := rec{k: slices.Clone(k)}
		if err := decodeUsage(v, &r.u); err != nil {
			return err
		}
		roll = append(roll, r)
	}
	for _, k := range drop {
		if err := a.del(b, k); err != nil {
			return err
		}
	}
	for _, r := range roll {
		start, ns, user, labels, ok := parseUsageKey(r.k)
		if !ok {
			return fmt.Errorf("%w: usage key %x", ErrCorrupt, r.k)
		}
		if err := a.del(b, r.k); err != nil {
			return err
		}
		if err := a.addUsage(start.Truncate(day), ns, user, labels, &r.u); err != nil {
			return err
		}
	}
	if rollBefore.Unix() > rolled {
		return a.put(a.meta, metaUsageRolled, u64(uint64(rollBefore.Unix())))
	}
	return nil
}

// UsageStarted returns the label keys accounting splits by, and whether
// it is on.
func (t *Tx) UsageStarted() ([]string, bool) {
	labels, ok, err := usageLabels(t.tx.Bucket(bucketMeta))
	if err != nil {
		return nil, false
	}
	return labels, ok
}

// UsageRange calls fn for every usage record whose period starts in
// [from, to), in key order (time, then namespace, user, labels). A
// record older than UsageHourlyFor covers a whole UTC day. u is fn's to
// keep.
func (t *Tx) UsageRange(from, to time.Time, fn func(start time.Time, namespace, user, labels string, u *Usage) error) error {
	b := t.tx.Bucket(bucketUsage)
	if b == nil {
		return nil
	}
	end := to.Unix()
	c := b.Cursor()
	for k, v := c.Seek(u64(uint64(max(from.Unix(), 0)))); k != nil; k, v = c.Next() {
		if int64(binary.BigEndian.Uint64(k)) >= end {
			return nil
		}
		start, ns, user, labels, ok := parseUsageKey(k)
		if !ok {
			return fmt.Errorf("%w: usage key %x", ErrCorrupt, k)
		}
		var u Usage
		if err := decode(v, &u); err != nil {
			return err
		}
		if err := fn(start, ns, user, labels, &u); err != nil {
			return err
		}
	}
	return nil
}
