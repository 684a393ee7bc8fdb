package httpapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/foreman-sched/foreman/api"
	"github.com/foreman-sched/foreman/fsm"
)

// Operator carries out the operator requests (backup and restore, raft
// membership). They run on the leader: the routes proxy them there, and a
// call on a node that is no longer leader returns an error wrapping
// ErrNoLeader. Errors: fsm.ErrBadBackup or fsm.ErrBackupVersion for an
// unusable file (400), ErrRefused for a request refused to protect the
// cluster or its state (409), fsm.ErrNotFound for an unknown server (404).
type Operator interface {
	// SaveSnapshot takes a snapshot of the whole state now. The caller
	// writes it out and closes it.
	SaveSnapshot(ctx context.Context) (Snapshot, error)
	// RestoreSnapshot replaces the whole state with the backup file in r;
	// a state holding jobs is replaced only with force.
	RestoreSnapshot(ctx context.Context, r io.Reader, force bool) (*RestoreResponse, error)
	// RemovePeer removes a server (name or raft address) from raft.
	RemovePeer(ctx context.Context, name string) error
	// TransferLeadership hands leadership to the voter to ("" = any
	// healthy voter) and returns the new leader's name.
	TransferLeadership(ctx context.Context, to string) (string, error)
}

// Snapshot is a backup file ready to be sent.
type Snapshot interface {
	Header() fsm.BackupHeader
	Size() int64 // of the whole file
	Write(w io.Writer) error
	Close() error
}

// ErrRefused means an operator request was refused because carrying it
// out would lose quorum or replace state without being told to.
var ErrRefused = errors.New("refused")

// RestoreResponse is the reply to PUT /v1/operator/snapshot.
type RestoreResponse struct {
	// Snapshot is the restored file's header.
	Snapshot fsm.BackupHeader `json:"snapshot"`
	// Index is the raft index the restored state was installed at.
	Index uint64 `json:"index"`
	// Replaced counts what the state held before (only with force).
	Replaced fsm.StateCounts `json:"replaced"`
	// DeadNodes are the snapshot's nodes that are not members of this
	// cluster; they are restored as dead and their attempts re-queued.
	DeadNodes []string `json:"dead_nodes,omitempty"`
}

// TransferRequest is the body of POST /v1/cluster/raft/transfer-leadership.
type TransferRequest struct {
	To string `json:"to,omitempty"`
}

// TransferResponse is its reply.
type TransferResponse = api.TransferResponse

// RemovePeerResponse is the reply to DELETE /v1/cluster/raft/peers/{name}.
type RemovePeerResponse = api.RemovePeerResponse

// Snapshot headers of GET /v1/operator/snapshot, so a client can describe
// the file without parsing it.
const (
	HeaderSnapshotIndex = "X-Foreman-Snapshot-Index"
	HeaderSnapshotTerm  = "X-Foreman-Snapshot-Term"
)

// operatorTimeout bounds a raft operator request (a snapshot or restore
// has none: it takes as long as the state is large).
const operatorTimeout = 30 * time.Second

func (s *server) operator(w http.ResponseWriter, r *http.Request) (Operator, bool) {
	if s.ops == nil {
		s.writeError(w, r, fmt.Errorf("%w: operator requests are not served by this agent", ErrUnavailable))
		return nil, false
	}
	return s.ops, true
}

func (s *server) saveSnapshot(w http.ResponseWriter, r *http.Request) {
	ops, ok := s.operator(w, r)
	if !ok {
		return
	}
	snap, err := ops.SaveSnapshot(r.Context())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	defer snap.Close()
	h := snap.Header()
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.FormatInt(snap.Size(), 10))
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="foreman-%d.snap"`, h.Index))
	w.Header().Set(HeaderSnapshotIndex, strconv.FormatUint(h.Index, 10))
	w.Header().Set(HeaderSnapshotTerm, strconv.FormatUint(h.Term, 10))
	w.WriteHeader(http.StatusOK)
	if err := snap.Write(w); err != nil {
		// The status is sent: the client sees a short body and its
		// checksum check refuses the file.
		s.log.Warn("snapshot download cut short", "err", err)
	}
}

func (s *server) restoreSnapshot(w http.ResponseWriter, r *http.Request) {
	ops, ok := s.operator(w, r)
	if !ok {
		return
	}
	force := false
	if v := r.URL.Query().Get("force"); v != "" {
		var err error
		if force, err = strconv.ParseBool(v); err != nil {
			s.writeError(w, r, invalid("force", "must be true or false (got %q)", v))
			return
		}
	}
	res, err := ops.RestoreSnapshot(r.Context(), r.Body, force)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

func (s *server) removePeer(w http.ResponseWriter, r *http.Request) {
	ops, ok := s.operator(w, r)
	if !ok {
		return
	}
	name := r.PathValue("name")
	ctx, cancel := context.WithTimeout(r.Context(), operatorTimeout)
	defer cancel()
	if err := ops.RemovePeer(ctx, name); err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, RemovePeerResponse{Removed: name})
}

func (s *server) transferLeadership(w http.ResponseWriter, r *http.Request) {
	ops, ok := s.operator(w, r)
	if !ok {
		return
	}
	var req TransferRequest
	if err := s.decodeOptional(w, r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), operatorTimeout)
	defer cancel()
	leader, err := ops.TransferLeadership(ctx, req.To)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, TransferResponse{Leader: leader})
}
