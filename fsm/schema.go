package fsm

import (
	"encoding/binary"
	"fmt"
	"strconv"
)

// SchemaVersion is the layout of the bbolt file this binary writes. Open
// refuses files with a newer version and upgrades version 1 (JSON records)
// in place (migrate.go). 2: records are CBOR.
const SchemaVersion = 2

// Every bucket in the state file. Keys are described next to each name;
// values are records encoded by codec.go unless said otherwise.
var (
	// bucketMeta holds single values under the meta* keys below.
	bucketMeta = []byte("meta")
	// bucketJobs: job ID (a ULID, so keys sort by submit time) → Job.
	bucketJobs = []byte("jobs")
	// bucketJobsByState: state + "/" + job ID → empty. Lets the scheduler
	// scan queued/waiting/retrying jobs without reading every job.
	bucketJobsByState = []byte("jobs_by_state")
	// bucketAttempts: job ID + "/" + zero-padded attempt number → Attempt.
	bucketAttempts = []byte("attempts")
	// bucketLiveByNode: node + "\x00" + attempt key → empty, for attempts
	// in a live state (assigned, running) only.
	bucketLiveByNode = []byte("live_attempts_by_node")
	// bucketNodes: node name → Node.
	bucketNodes = []byte("nodes")
	// bucketIdempotency: idempotency key → idemRecord.
	bucketIdempotency = []byte("idempotency")
	// bucketQueues: queue name → Queue (only queues with a limit).
	bucketQueues = []byte("queues")
	// bucketJobsByDue: 8-byte sortable due time + job ID → empty, for
	// pending jobs with a NextRunAt or deadline (schedindex.go).
	bucketJobsByDue = []byte("jobs_by_due")
	// bucketQueuedByGroup: 16-byte placement group + 8-byte priority +
	// 8-byte sortable submit time + job ID → empty, for queued jobs
	// (schedindex.go).
	bucketQueuedByGroup = []byte("queued_by_group")
	// bucketJobsByFinish: 8-byte sortable FinishedAt + job ID → empty, for
	// terminal jobs, so GC reads only what it drops (schedindex.go).
	bucketJobsByFinish = []byte("jobs_by_finish")
	// bucketSchedules: schedule name → Schedule.
	bucketSchedules = []byte("schedules")
	// bucketJobEvents: job ID + "/" + 8-byte raft index + 4-byte seq →
	// timelineRecord, every event of the job (its timeline, timeline.go).
	bucketJobEvents = []byte("job_events")

	// Created by the first workflow or dependency, not at Open, so a
	// state that has none hashes as before they existed:
	//
	// bucketJobChildren: parent job ID + "/" + child job ID → empty.
	bucketJobChildren = []byte("job_children")
	// bucketSingletons: namespace + NUL + name → the ID of the latest
	// singleton job of that name (after.go).
	bucketSingletons = []byte("singletons")
	// bucketSilent: client name → RFC 3339 time it has been silent since,
	// for the clients whose deaths the leader holds (silent.go).
	bucketSilent = []byte("silent")
	// bucketWorkflows: workflow ID (a ULID) → Workflow.
	bucketWorkflows = []byte("workflows")
	// bucketWorkflowJobs: workflow ID + "/" + 8-digit position → job ID.
	bucketWorkflowJobs = []byte("workflow_jobs")
)

// allBuckets is created at Open; order is irrelevant (bbolt sorts them).
var allBuckets = [][]byte{
	bucketMeta, bucketJobs, bucketJobsByState, bucketAttempts,
	bucketLiveByNode, bucketNodes, bucketIdempotency, bucketQueues,
	bucketJobsByDue, bucketQueuedByGroup, bucketJobsByFinish, bucketJobEvents, bucketSchedules,
}

// groupVersion is the current PlacementGroup version (metaGroupVersion).
var groupVersion = []byte("2")

// Keys in bucketMeta.
var (
	// metaAppliedIndex: 8-byte big-endian raft index of the last applied
	// entry, written in the same transaction as that entry's change.
	metaAppliedIndex = []byte("applied_index")
	// metaClusterID: the cluster ID from InitCluster.
	metaClusterID = []byte("cluster_id")
	// metaGroupVersion: the version of PlacementGroup the queued_by_group
	// keys were made with (absent: before namespace and user joined it);
	// Open rebuilds the indexes when it differs from groupVersion.
	metaGroupVersion = []byte("placement_group_version")
	// metaSchemaVersion: decimal SchemaVersion.
	metaSchemaVersion = []byte("schema_version")
	// metaCommandVersion: decimal, the newest CommandVersion of the
	// binaries that have opened the file for writing (version.go): an
	// older binary would fail to apply entries of that version in the log.
	metaCommandVersion = []byte("command_version")
	// metaWrittenBy: the foreman version that last opened the file for
	// writing (Options.Version), named when a binary refuses the file.
	// Node-local: excluded from StateHash.
	metaWrittenBy = []byte("written_by")
	// metaFeatures: decimal FeatureSet, every feature known to a binary
	// that has opened the file for writing (version.go). Node-local.
	metaFeatures = []byte("features")
	// metaCleanShutdown: present only while the file is closed cleanly.
	// Node-local: excluded from StateHash, never in a snapshot.
	metaCleanShutdown = []byte("clean_shutdown")
)

// nodeLocalMeta lists meta keys that differ between nodes at the same
// index (or are reported separately) and so stay out of StateHash.
var nodeLocalMeta = map[string]bool{
	string(metaCleanShutdown): true,
	string(metaGroupVersion):  true, // describes the derived indexes
	string(metaAppliedIndex):  true,
	// Which binaries opened this node's file: the same state on nodes at
	// different versions during an upgrade.
	string(metaWrittenBy):      true,
	string(metaCommandVersion): true,
	string(metaFeatures):       true,
}

// Limits on key sizes; bbolt refuses keys over 32 KiB and long keys make
// every index scan slower.
const (
	maxIDLen  = 128
	maxKeyLen = 1024
)

func jobStateKey(state JobState, id string) []byte {
	k := make([]byte, 0, len(state)+1+len(id))
	k = append(k, state...)
	k = append(k, '/')
	return append(k, id...)
}

func jobStatePrefix(state JobState) []byte { return append([]byte(state), '/') }

// attemptKey pads the number so attempts sort numerically.
func attemptKey(jobID string, num int) []byte {
	return appendAttemptKey(make([]byte, 0, len(jobID)+9), jobID, num)
}

// appendAttemptKey appends jobID + "/" + num as fmt's %08d writes it.
func appendAttemptKey(k []byte, jobID string, num int) []byte {
	if num < 0 || num > 99999999 {
		return fmt.Appendf(k, "%s/%08d", jobID, num)
	}
	k = append(k, jobID...)
	var d [9]byte
	d[0] = '/'
	for i := 8; i > 0; i-- {
		d[i] = byte('0' + num%10)
		num /= 10
	}
	return append(k, d[:]...)
}

func attemptPrefix(jobID string) []byte { return append([]byte(jobID), '/') }

func liveKey(node, jobID string, num int) []byte {
	k := make([]byte, 0, len(node)+1+len(jobID)+9)
	k = append(append(k, node...), 0)
	return appendAttemptKey(k, jobID, num)
}

func livePrefix(node string) []byte { return append([]byte(node), 0) }

// splitAttemptKey is the inverse of attemptKey.
func splitAttemptKey(k []byte) (string, int, bool) {
	if len(k) < 10 || k[len(k)-9] != '/' {
		return "", 0, false
	}
	n, err := strconv.Atoi(string(k[len(k)-8:]))
	if err != nil {
		return "", 0, false
	}
	return string(k[:len(k)-9]), n, true
}

func u64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

func readU64(b []byte) uint64 {
	if len(b) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(b)
}
