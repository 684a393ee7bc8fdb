package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/raft"

	"github.com/foreman-sched/foreman/fsm"
	"github.com/foreman-sched/foreman/wallclock"
)

// Backup and restore (docs/operations.md, "Backup and restore").
//
// Save asks raft for a snapshot now (raft.Snapshot: the FSM's image at its
// applied index, so it holds every write acknowledged before the call),
// copies it to a private file, opens that as a restore would (proving it
// usable and counting what it holds) and streams it in the backup format.
//
// Restore runs on the leader with writes shut out: restoreMu is taken
// exclusively, so every apply through this node (all writes go through the
// leader's applyBytes) has finished and new ones wait. Under it the current
// state is checked (a cluster holding jobs is only replaced with Force) and
// raft.Restore installs the image on the leader and, through
// InstallSnapshot, on a quorum before it returns. Writes that waited apply
// on top of the restored state; none is lost or half-applied.

// restoreTimeout bounds a restore when the caller's context has no deadline.
const restoreTimeout = 5 * time.Minute

// Backup is a snapshot ready to be sent. Close removes its file.
type Backup struct {
	header fsm.BackupHeader
	file   *os.File
}

// Header describes the backup.
func (b *Backup) Header() fsm.BackupHeader { return b.header }

// Size is the length of the backup file.
func (b *Backup) Size() int64 {
	n, _ := b.header.FileSize()
	return n
}

// Write writes the backup file (header, image, checksum) to w.
func (b *Backup) Write(w io.Writer) error {
	if _, err := b.file.Seek(0, io.SeekStart); err != nil {
		return err
	}
	return fsm.WriteBackup(w, b.header, b.file)
}

// Close releases the backup's temporary file.
func (b *Backup) Close() error {
	err := b.file.Close()
	if rerr := os.Remove(b.file.Name()); err == nil {
		err = rerr
	}
	return err
}

// tempFile creates a file for an image in the data dir (the same disk as
// the snapshots, which may not fit in /tmp).
func (n *Node) tempFile(kind string) (*os.File, error) {
	return os.CreateTemp(n.cfg.DataDir, "."+kind+"-*.db")
}

// removeTempFiles deletes the images a crashed agent left (tempFile).
func removeTempFiles(dataDir string, logger *slog.Logger) {
	for _, kind := range []string{"snapshot", "restore"} {
		left, _ := filepath.Glob(filepath.Join(dataDir, "."+kind+"-*.db"))
		for _, p := range left {
			if err := os.Remove(p); err != nil {
				logger.Warn("cannot remove a leftover snapshot image", "path", p, "err", err)
			}
		}
	}
}

// SaveSnapshot takes a raft snapshot now and prepares it for download.
// Leader only (ErrNotLeader elsewhere). The caller must Close the result.
func (n *Node) SaveSnapshot(ctx context.Context) (*Backup, error) {
	if !n.IsLeader() {
		return nil, ErrNotLeader
	}
	f := n.raft.Snapshot()
	if err := waitFuture(ctx, f); err != nil {
		if errors.Is(err, raft.ErrNothingNewToSnapshot) {
			return nil, fmt.Errorf("%w: the cluster has not applied anything yet", ErrNothingToSave)
		}
		return nil, raftErr(err)
	}
	meta, rc, err := f.Open()
	if err != nil {
		return nil, fmt.Errorf("open snapshot: %w", err)
	}
	defer rc.Close()
	tmp, err := n.tempFile("snapshot")
	if err != nil {
		return nil, err
	}
	b := &Backup{file: tmp}
	fail := func(err error) (*Backup, error) {
		_ = b.Close()
		return nil, err
	}
	if _, err := io.Copy(tmp, rc); err != nil {
		return fail(fmt.Errorf("copy snapshot: %w", err))
	}
	info, err := fsm.CheckImage(tmp.Name(), nil, n.logger)
	if err != nil {
		return fail(fmt.Errorf("the snapshot raft took does not open: %w", err))
	}
	st, err := tmp.Stat()
	if err != nil {
		return fail(err)
	}
	b.header = fsm.BackupHeader{
		Format: fsm.BackupFormat, SchemaVersion: info.SchemaVersion, Index: meta.Index, Term: meta.Term,
		Size: st.Size(), ClusterID: info.ClusterID, Node: n.cfg.Name, CreatedAt: wallclock.Now().UTC(),
		Counts: info.Counts,
	}
	return b, nil
}

// RestoreOptions tune RestoreSnapshot.
type RestoreOptions struct {
	// Force replaces a state that holds jobs (they are lost); without it
	// such a restore is refused with ErrNotEmpty.
	Force bool
}

// RestoreResult reports a restore.
type RestoreResult struct {
	// Header is the restored file's header.
	Header fsm.BackupHeader `json:"snapshot"`
	// Index is the raft index the restored state was installed at.
	Index uint64 `json:"index"`
	// Replaced is what the state held before (non-empty only with Force).
	Replaced fsm.StateCounts `json:"replaced"`
	// DeadNodes are the snapshot's nodes that are not members of this
	// cluster, restored as dead: their attempts are lost and re-queued
	// under the usual lease rule.
	DeadNodes []string `json:"dead_nodes,omitempty"`
}

// RestoreSnapshot replaces the whole state with the backup file read from
// r. Leader only. A bad file (ErrBadBackup, ErrBackupVersion from fsm) or a
// refusal (ErrNotEmpty) leaves the state unchanged.
func (n *Node) RestoreSnapshot(ctx context.Context, r io.Reader, opts RestoreOptions) (*RestoreResult, error) {
	if !n.IsLeader() {
		return nil, ErrNotLeader
	}
	tmp, err := n.tempFile("restore")
	if err != nil {
		return nil, err
	}
	defer func() {
		_ = tmp.Close()
		_ = os.Remove(tmp.Name())
	}()
	hdr, err := fsm.ReadBackup(r, tmp)
	if err != nil {
		return nil, err
	}
	if err := tmp.Sync(); err != nil {
		return nil, err
	}

	// Shut writes out: from here the state changes only by this restore.
	n.restoreMu.Lock()
	defer n.restoreMu.Unlock()
	if !n.IsLeader() {
		return nil, ErrNotLeader
	}
	res := &RestoreResult{Header: hdr}
	cur, err := n.fsm.Counts()
	if err != nil {
		return nil, err
	}
	if cur.Jobs > 0 {
		if !opts.Force {
			return nil, fmt.Errorf("%w: the cluster holds %d jobs (%d not finished) that a restore would replace; restore into an empty cluster, or force it to discard them",
				ErrNotEmpty, cur.Jobs, cur.Unfinished())
		}
		res.Replaced = cur
	}
	members := n.memberNames()
	info, err := fsm.CheckImage(tmp.Name(), &fsm.ImageFix{ClusterID: n.fsmClusterID(), Members: members, At: wallclock.Now()}, n.logger)
	if err != nil {
		return nil, err
	}
	for _, name := range hdr.Counts.NodeNames {
		if !members[name] {
			res.DeadNodes = append(res.DeadNodes, name)
		}
	}
	st, err := tmp.Stat()
	if err != nil {
		return nil, err
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	// The restored state's fencing tokens are raft indexes up to the
	// image's; raft installs it above both that and its own last index, so
	// every later token is higher than any in the image.
	meta := &raft.SnapshotMeta{
		Version: raft.SnapshotVersionMax, Index: max(hdr.Index, info.AppliedIndex), Term: hdr.Term, Size: st.Size(),
	}
	n.logger.Warn("restoring the state from a snapshot", "snapshot_index", hdr.Index, "jobs", info.Counts.Jobs,
		"replacing_jobs", cur.Jobs, "nodes_restored_dead", res.DeadNodes)
	if err := n.raft.Restore(meta, tmp, timeoutOf(ctx, restoreTimeout)); err != nil {
		// raft refuses before it touches anything (not leader, a
		// configuration change in flight) or, past that point, the state
		// is restored on this node but not yet known to be on a quorum.
		if errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipLost) {
			return nil, fmt.Errorf("%w: restore: %w (check the state and restore again)", ErrIndeterminate, err)
		}
		return nil, fmt.Errorf("restore: %w", err)
	}
	res.Index = n.raft.LastIndex()
	n.afterRestore()
	n.logger.Warn("state restored from a snapshot", "index", res.Index, "snapshot_index", hdr.Index)
	return res, nil
}

// afterRestore treats the restored state like a new term for the lease
// rule: an attempt the image lists may be running on a node this leader
// has no history of (a node of the old cluster that stopped moments ago,
// whose supervisors run on until their lease runs out), so none is declared
// lost before L + margin from now. The reconcile then runs at once, to
// record this cluster's nodes in the restored state.
func (n *Node) afterRestore() {
	n.ld.mu.Lock()
	if n.ld.ctx != nil {
		n.ld.since = time.Now()
	}
	n.ld.mu.Unlock()
	n.members.signal()
}

// memberNames are the nodes of this cluster: raft servers and gossip
// members of this cluster in any state.
func (n *Node) memberNames() map[string]bool {
	out := map[string]bool{n.cfg.Name: true}
	if f := n.raft.GetConfiguration(); f.Error() == nil {
		for _, s := range f.Configuration().Servers {
			out[string(s.ID)] = true
		}
	}
	for _, m := range n.members.list() {
		if n.sameCluster(m) {
			out[m.Name] = true
		}
	}
	return out
}

// fsmClusterID is the cluster ID the state holds ("" before InitCluster).
func (n *Node) fsmClusterID() string {
	var id string
	_ = n.fsm.View(func(tx *fsm.Tx) error { id = tx.ClusterID(); return nil })
	return id
}
