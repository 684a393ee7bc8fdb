package fsm

import (
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// Apply applies one committed entry. See ApplyBatch.
func (f *FSM) Apply(l *raft.Log) any { return f.ApplyBatch([]*raft.Log{l})[0] }

// ApplyBatch applies committed entries in one bbolt transaction together
// with the new applied index, and returns a *Result per entry. Entries at
// or below the stored applied index are skipped (raft replays its log
// after a restart). A refused entry changes nothing but its index is still
// recorded. A storage failure panics: continuing would let this node's
// state silently diverge from the log (etcd does the same).
func (f *FSM) ApplyBatch(logs []*raft.Log) []any {
	out := make([]any, len(logs))
	if len(logs) == 0 {
		return out
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.closed {
		for i, l := range logs {
			out[i] = &Result{Index: l.Index, Err: ErrClosed}
		}
		return out
	}
	// refused holds entries that failed after writing part of their
	// change: the batch is rolled back and re-run with them refused up
	// front, so "a refused entry changes nothing" holds for every handler.
	refused := map[int]error{}
	for {
		events, redo, err := f.applyOnce(logs, out, refused)
		if err != nil {
			panic(fmt.Sprintf("fsm: storage failure applying entries %d..%d: %v",
				logs[0].Index, logs[len(logs)-1].Index, err))
		}
		if redo >= 0 {
			continue
		}
		if last := logs[len(logs)-1].Index; last > f.applied.Load() {
			f.applied.Store(last)
		}
		f.notify.publish(events)
		f.events.append(events)
		observeEvents(events)
		return out
	}
}

// applyOnce runs the batch in one write transaction. It returns the
// position of an entry that must be re-run as refused (or -1), and a
// non-nil error only for storage failures.
func (f *FSM) applyOnce(logs []*raft.Log, out []any, refused map[int]error) ([]Event, int, error) {
	tx, err := f.db.Begin(true)
	if err != nil {
		return nil, -1, err
	}
	defer func() { _ = tx.Rollback() }()
	meta := tx.Bucket(bucketMeta)
	applied := readU64(meta.Get(metaAppliedIndex))
	a := newApplier(tx)
	a.nodeMemo, _ = f.nodes.committed()
	last := applied
	for i, l := range logs {
		if l.Index <= applied {
			out[i] = &Result{Index: l.Index}
			continue
		}
		last = l.Index
		res := &Result{Index: l.Index}
		out[i] = res
		if l.Type != raft.LogCommand {
			continue // configuration entries only advance the index
		}
		if err, ok := refused[i]; ok {
			res.Err = err
			continue
		}
		a.begin(l.Index)
		err := a.applyEntry(l.Data, res)
		if err == nil {
			err = a.flushWorkflows()
		}
		if err != nil {
			a.dropWorkflows()
		}
		if err == nil && f.faultHook != nil {
			err = f.faultHook(l.Index)
		}
		if err == nil {
			if err := a.commitEntry(); err != nil {
				return nil, -1, err
			}
			continue
		}
		if !isRefusal(err) {
			return nil, -1, err
		}
		res.Err = err
		res.Jobs, res.Skipped, res.Submits, res.Workflow = nil, nil, nil, ""
		if a.wrote {
			refused[i] = err
			return nil, i, nil
		}
	}
	if err := a.flushUsage(); err != nil {
		return nil, -1, err
	}
	if last > applied {
		if err := meta.Put(metaAppliedIndex, u64(last)); err != nil {
			return nil, -1, err
		}
	}
	if len(a.nodeNames) > 0 {
		f.nodes.beginWrite(a.nodeNames, false, last)
		defer f.nodes.endWrite()
	}
	if len(a.liveKeys) > 0 {
		f.lives.beginWrite(a.liveKeys, false, last)
		defer f.lives.endWrite()
	}
	if err := tx.Commit(); err != nil {
		return nil, -1, err
	}
	observeCommit(tx.Stats(), f.db.Info().PageSize)
	return a.events, -1, nil
}

// isRefusal tells a refused command (bad input, stale token, conflict)
// from a storage failure.
func isRefusal(err error) bool {
	for _, s := range []error{ErrBadCommand, ErrUnsupportedVersion, ErrNotFound, ErrStaleToken, ErrConflict,
		bolterrors.ErrKeyTooLarge, bolterrors.ErrValueTooLarge, bolterrors.ErrKeyRequired} {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

// applier carries one write transaction through a batch.
type applier struct {
	nodeNames                            []string // the node records written, if any (nodecache.go)
	liveKeys                             []string // the attempt and live index keys written, if any (liveset.go)
	nodeMemo                             []Node   // the committed node records, when memoized (readNode)
	tx                                   *bolt.Tx
	jobs, byState, attempts, live, nodes *bolt.Bucket
	idem, queues, meta                   *bolt.Bucket
	byDue, queuedByGroup, byFinish       *bolt.Bucket
	schedules                            *bolt.Bucket
	timeline                             *bolt.Bucket
	cursors                              cursors             // get and del read through these (cursors.go)
	dueOf                                dueMemo             // see schedindex.go
	specOf                               map[*Job][]byte     // stored spec of jobs read by getJob
	jobMemo                              map[string]jobIdent // job ID → what events and accounting read of it (state.go)
	usage                                usageMemo           // accounting's marker and key count (usage.go)
	arrayTmpl                            map[string]*JobSpec // array ID → its tasks' spec (array.go)
	quietTasks                           bool                // a task's array is counted by the caller (array.go)
	index                                uint64
	at                                   time.Time
	atText                               string  // rfc3339Text(at), once needed
	wrote                                bool    // the current entry changed something
	events                               []Event // committed entries' events
	pending                              []Event // the current entry's events

	// The current entry's workflow records, written once at its end
	// (apply_workflow.go); holdDecisions pauses dependency decisions
	// while a workflow is being cancelled (dag.go).
	wfs           map[string]*Workflow
	wfDirty       bool
	holdDecisions bool
}

// appendFill packs pages fuller in buckets whose keys mostly arrive in
// order (ULIDs): bbolt's default of 0.5 would leave them half empty.
const appendFill = 0.9

func newApplier(tx *bolt.Tx) *applier {
	a := &applier{
		tx:       tx,
		jobs:     tx.Bucket(bucketJobs),
		byState:  tx.Bucket(bucketJobsByState),
		attempts: tx.Bucket(bucketAttempts),
		live:     tx.Bucket(bucketLiveByNode),
		nodes:    tx.Bucket(bucketNodes),
		idem:     tx.Bucket(bucketIdempotency),
		queues:   tx.Bucket(bucketQueues),
		meta:     tx.Bucket(bucketMeta),

		byDue:         tx.Bucket(bucketJobsByDue),
		queuedByGroup: tx.Bucket(bucketQueuedByGroup),
		byFinish:      tx.Bucket(bucketJobsByFinish),
		schedules:     tx.Bucket(bucketSchedules),
		wfs:           map[string]*Workflow{},
		timeline:      tx.Bucket(bucketJobEvents),
	}
	a.timeline.FillPercent = appendFill
	a.jobs.FillPercent = appendFill
	a.byState.FillPercent = appendFill
	a.attempts.FillPercent = appendFill
	return a
}

func (a *applier) begin(index uint64) {
	a.index, a.at, a.atText, a.wrote, a.pending = index, time.Time{}, "", false, a.pending[:0]
}

// commitEntry numbers the entry's events and writes the job ones to their
// job's timeline.
func (a *applier) commitEntry() error {
	for i := range a.pending {
		e := &a.pending[i]
		e.Seq = i
		if e.JobID != "" {
			if err := a.putTimeline(e); err != nil {
				return err
			}
		}
	}
	a.events = append(a.events, a.pending...)
	return nil
}

func (a *applier) emit(e Event) {
	e.Index, e.At = a.index, a.at
	a.pending = append(a.pending, e)
}

func (a *applier) put(b *bolt.Bucket, k, v []byte) error {
	a.wrote = true
	a.noteNodes(b, k)
	a.noteLive(b, k)
	return b.Put(k, v)
}

// noteNodes records a write of node k when b is the nodes bucket.
func (a *applier) noteNodes(b *bolt.Bucket, k []byte) {
	if b == a.nodes {
		a.nodeNames = append(a.nodeNames, string(k))
	}
}

// putRecord encodes x and puts it under k in b.
func (a *applier) putRecord(b *bolt.Bucket, k []byte, x any) error {
	v, err := encode(x)
	if err != nil {
		return err
	}
	return a.put(b, k, v)
}

func (a *applier) del(b *bolt.Bucket, k []byte) error {
	a.wrote = true
	a.noteNodes(b, k)
	a.noteLive(b, k)
	return a.cursors.delete(b, k)
}

// get is b.Get(k) through the transaction's cursor for b.
func (a *applier) get(b *bolt.Bucket, k []byte) []byte { return a.cursors.get(b, k) }

// applyEntry decodes the envelope and runs the command's handler.
func (a *applier) applyEntry(data []byte, res *Result) error {
	cmd, err := DecodeCommand(data)
	if err != nil {
		return err
	}
	if cmd.At.IsZero() {
		return fmt.Errorf("%w: %s: at: missing (the leader stamps the time)", ErrBadCommand, cmd.Type)
	}
	a.at = cmd.At
	switch cmd.Type {
	case CmdInit:
		return run(a, cmd, res, (*applier).initCluster)
	case CmdSubmitJobs:
		return run(a, cmd, res, (*applier).submitJobs)
	case CmdSubmitGroup:
		return run(a, cmd, res, (*applier).submitGroup)
	case CmdUpsertNode:
		return run(a, cmd, res, (*applier).upsertNode)
	case CmdNodeState:
		return run(a, cmd, res, (*applier).setNodeState)
	case CmdNodeGPUs:
		return run(a, cmd, res, (*applier).nodeGPUs)
	case CmdNodeStates:
		return run(a, cmd, res, (*applier).setNodeStates)
	case CmdSilentClients:
		return run(a, cmd, res, (*applier).silentClients)
	case CmdExecAudit:
		return run(a, cmd, res, (*applier).execAudit)
	case CmdResetGPUs:
		return run(a, cmd, res, (*applier).resetGPUs)
	case CmdPlace:
		return run(a, cmd, res, (*applier).place)
	case CmdReport:
		return run(a, cmd, res, (*applier).report)
	case CmdReportBatch:
		return run(a, cmd, res, (*applier).reportBatch)
	case CmdRelease:
		return run(a, cmd, res, (*applier).release)
	case CmdCancelJob:
		return run(a, cmd, res, (*applier).cancelJob)
	case CmdRetryJob:
		return run(a, cmd, res, (*applier).retryJob)
	case CmdMarkLost:
		return run(a, cmd, res, (*applier).markLost)
	case CmdFailJobs:
		return run(a, cmd, res, (*applier).failJobs)
	case CmdSetReasons:
		return run(a, cmd, res, (*applier).setReasons)
	case CmdSetQueue:
		return run(a, cmd, res, (*applier).setQueue)
	case CmdStopAttempts:
		return run(a, cmd, res, (*applier).stopAttempts)
	case CmdGC:
		return run(a, cmd, res, (*applier).gc)
	case CmdPutSchedule:
		return run(a, cmd, res, (*applier).putSchedule)
	case CmdDeleteSchedule:
		return run(a, cmd, res, (*applier).deleteSchedule)
	case CmdPauseSchedule:
		return run(a, cmd, res, (*applier).pauseSchedule)
	case CmdFireSchedules:
		return run(a, cmd, res, (*applier).fireSchedules)
	case CmdSubmitWorkflow:
		return run(a, cmd, res, (*applier).submitWorkflow)
	case CmdCancelWorkflow:
		return run(a, cmd, res, (*applier).cancelWorkflow)
	case CmdRetryWorkflow:
		return run(a, cmd, res, (*applier).retryWorkflow)
	case CmdLeader:
		return run(a, cmd, res, (*applier).leaderChanged)
	case CmdDeliveries:
		return run(a, cmd, res, (*applier).deliveries)
	case CmdACLBootstrap:
		return run(a, cmd, res, (*applier).aclBootstrap)
	case CmdACLCreateToken:
		return run(a, cmd, res, (*applier).aclCreateToken)
	case CmdACLRevokeToken:
		return run(a, cmd, res, (*applier).aclRevokeToken)
	case CmdACLInternal:
		return run(a, cmd, res, (*applier).aclInternal)
	case CmdSetCheckpoint:
		return run(a, cmd, res, (*applier).setCheckpoint)
	case CmdSetNamespace:
		return run(a, cmd, res, (*applier).setNamespace)
	case CmdDeleteNamespace:
		return run(a, cmd, res, (*applier).deleteNamespace)
	case CmdStartUsage:
		return run(a, cmd, res, (*applier).startUsage)
	}
	return fmt.Errorf("%w: unknown command type %q", ErrBadCommand, cmd.Type)
}

// run decodes the payload into P and calls the handler.
func run[P any](a *applier, cmd *Command, res *Result, h func(*applier, *P, *Result) error) error {
	var p P
	if err := decodePayload(cmd, &p); err != nil {
		return err
	}
	if err := h(a, &p, res); err != nil {
		return fmt.Errorf("%s: %w", cmd.Type, err)
	}
	return nil
}

// skip records a per-item refusal in the result.
func skip(res *Result, id, reason string) {
	if res.Skipped == nil {
		res.Skipped = map[string]string{}
	}
	res.Skipped[id] = reason
}
