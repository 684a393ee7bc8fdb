package httpapi

import (
	"fmt"
	"io"
	"net/http"

	"github.com/foreman-sched/foreman/api"
	"github.com/foreman-sched/foreman/fsm"
)

// putCheckpoint handles POST /v1/jobs/{id}/checkpoint (leader only): the
// body, at most fsm.CheckpointMax bytes of anything, becomes the job's
// checkpoint kept in raft; an empty body clears it. The next attempt finds
// it in $FOREMAN_CHECKPOINT/checkpoint on whichever node it runs.
func (s *server) putCheckpoint(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	data, err := io.ReadAll(io.LimitReader(r.Body, fsm.CheckpointMax+1))
	if err != nil {
		s.writeError(w, r, invalid("body", "could not be read: %v", err))
		return
	}
	if len(data) > fsm.CheckpointMax {
		s.writeError(w, r, invalid("body", "a checkpoint is at most %d bytes (1 MiB); keep larger ones in $FOREMAN_CHECKPOINT on the node", fsm.CheckpointMax))
		return
	}
	if _, err := s.jobDetail(id); err != nil {
		s.writeError(w, r, err)
		return
	}
	if _, err := s.apply(r.Context(), fsm.CmdSetCheckpoint, fsm.SetCheckpoint{JobID: id, Data: data}); err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, CheckpointInfo{JobID: id, Bytes: len(data)})
}

// CheckpointInfo is the reply to POST /v1/jobs/{id}/checkpoint.
type CheckpointInfo = api.CheckpointInfo

// getCheckpoint handles GET /v1/jobs/{id}/checkpoint: the bytes, or 404.
func (s *server) getCheckpoint(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	var data []byte
	err := s.state.View(func(tx *fsm.Tx) error {
		if _, err := tx.Job(id); err != nil {
			return err
		}
		data = tx.Checkpoint(id)
		return nil
	})
	if err == nil && data == nil {
		err = fmt.Errorf("%w: job %s has no checkpoint", fsm.ErrNotFound, id)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(data)
}
