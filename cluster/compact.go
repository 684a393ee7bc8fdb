package cluster

import (
	"errors"
	"math/rand/v2"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// raft compacts its log only by entry count (SnapshotThreshold entries
// since the last snapshot, TrailingLogs kept after it). An entry here is
// anything from one job to a batch of 1,000 (~480 KB), so counts alone let
// raft.db reach gigabytes. The size trigger below snapshots once the log
// grew by Raft.SnapshotLogBytes — or by the last snapshot's size, if
// larger, so that snapshot writes stay at most about the log's own — and
// lowers TrailingLogs first so that about SnapshotLogBytes of log stays.

const (
	// compactCheckInterval is how often the size trigger looks at the log.
	compactCheckInterval = time.Second
	// minTrailingLogs keeps a short log after a snapshot even when entries
	// are huge, so a follower a few entries behind still catches up from
	// the log instead of a snapshot.
	minTrailingLogs = 64
)

// logVolume counts stored log entries and their data bytes.
type logVolume struct{ entries, bytes atomic.Uint64 }

// add counts ls and returns their data bytes.
func (v *logVolume) add(ls []*raft.Log) uint64 {
	var n uint64
	for _, l := range ls {
		n += uint64(len(l.Data))
	}
	v.entries.Add(uint64(len(ls)))
	v.bytes.Add(n)
	return n
}

func (v *logVolume) load() (entries, bytes uint64) { return v.entries.Load(), v.bytes.Load() }

// trailingLogsFor is how many entries of the given average size fit in
// budget bytes, between minTrailingLogs and the configured count.
func trailingLogsFor(budget, bytes, entries, configured uint64) uint64 {
	if entries == 0 || bytes == 0 {
		return configured
	}
	avg := max(bytes/entries, 1)
	return min(max(budget/avg, minTrailingLogs), max(configured, minTrailingLogs))
}

// compactLoop is the size-based snapshot trigger; it runs until Shutdown.
func (n *Node) compactLoop() {
	budget := n.cfg.Raft.SnapshotLogBytes
	if budget == 0 {
		return
	}
	baseEntries, baseBytes := n.storage.bolt.appended.load()
	var seenIndex, lastSize uint64
	// Every node's log grows alike; a per-node spread of up to +50% keeps
	// them from snapshotting (a CPU and disk burst) all at once.
	spread := func() float64 { return 1 + rand.Float64()/2 }
	factor := spread()
	for range ticks(compactCheckInterval, n.closing) {
		// Any other snapshot (raft's own, one installed from the leader)
		// restarts the count. The store is listed only then: a listing
		// during a snapshot logs a warning about its temporary directory.
		if idx := n.lastSnapshotIndex(); idx != seenIndex {
			seenIndex, lastSize = idx, n.newestSnapshotSize()
			baseEntries, baseBytes = n.storage.bolt.appended.load()
		}
		entries, bytes := n.storage.bolt.appended.load()
		grown := bytes - baseBytes
		if float64(grown) < factor*float64(max(budget, lastSize)) {
			continue
		}
		n.snapshotForSize(trailingLogsFor(budget, grown, entries-baseEntries, n.cfg.Raft.TrailingLogs), grown)
		// Counted from before this snapshot, not from the next look: what
		// was appended during and after it must count toward the next one
		// (a burst right after a snapshot was never compacted by size).
		baseEntries, baseBytes, factor = entries, bytes, spread()
		seenIndex, lastSize = n.lastSnapshotIndex(), n.newestSnapshotSize()
	}
}

// newestSnapshotSize is the size of the newest stored snapshot (0: none).
func (n *Node) newestSnapshotSize() uint64 {
	if metas, err := n.storage.snaps.List(); err == nil && len(metas) > 0 {
		return uint64(metas[0].Size)
	}
	return 0
}

// lastSnapshotIndex is the index of raft's newest snapshot (0: none).
func (n *Node) lastSnapshotIndex() uint64 {
	idx, _ := strconv.ParseUint(n.raft.Stats()["last_snapshot_index"], 10, 64)
	return idx
}

// snapshotForSize sets TrailingLogs for this snapshot's compaction and
// takes the snapshot.
func (n *Node) snapshotForSize(trailing, grown uint64) {
	r := n.cfg.Raft
	err := n.raft.ReloadConfig(raft.ReloadableConfig{
		TrailingLogs: trailing, SnapshotInterval: r.SnapshotInterval, SnapshotThreshold: r.SnapshotThreshold,
		HeartbeatTimeout: r.HeartbeatTimeout, ElectionTimeout: r.ElectionTimeout,
	})
	if err != nil {
		n.logger.Warn("cannot set trailing logs for a size-triggered snapshot", "err", err)
		return
	}
	start := time.Now()
	err = n.raft.Snapshot().Error()
	switch {
	case errors.Is(err, raft.ErrNothingNewToSnapshot):
	case err != nil:
		n.logger.Warn("size-triggered snapshot failed", "err", err)
	default:
		n.logger.Info("raft log compacted by size", "log_bytes", grown, "trailing_logs", trailing, "took", time.Since(start).Round(time.Millisecond))
	}
}
