package fsm

import "fmt"

// Checkpoints kept in raft (issue 18). A job (or a client acting for it)
// may store up to CheckpointMax opaque bytes with POST
// /v1/jobs/{id}/checkpoint; they survive the node, and the executor writes
// them into the next attempt's checkpoint directory (exec). Files a job
// writes to its checkpoint directory stay on the node instead (bounded by
// exec's CheckpointDirMax) and never enter raft.

// CmdSetCheckpoint stores (or, with empty Data, clears) a job's checkpoint.
const CmdSetCheckpoint CommandType = "set_checkpoint" // SetCheckpoint

// CheckpointMax is the most bytes a checkpoint kept in raft may hold.
const CheckpointMax = 1 << 20

// bucketCheckpoints: job ID → checkpoint bytes. Created by the first
// checkpoint, so a state without any hashes as before they existed.
var bucketCheckpoints = []byte("checkpoints")

// SetCheckpoint replaces a non-terminal job's checkpoint.
type SetCheckpoint struct {
	JobID string `json:"job_id"`
	Data  []byte `json:"data,omitempty"`
}

func (a *applier) setCheckpoint(p *SetCheckpoint, res *Result) error {
	if len(p.Data) > CheckpointMax {
		return fmt.Errorf("%w: data: %d bytes (at most %d)", ErrBadCommand, len(p.Data), CheckpointMax)
	}
	j, err := a.getJob(p.JobID)
	if err != nil {
		return err
	}
	if j.State.Terminal() {
		return fmt.Errorf("%w: job %s is already %s", ErrConflict, j.ID, j.State)
	}
	if len(p.Data) == 0 {
		if b := a.tx.Bucket(bucketCheckpoints); b != nil {
			return a.del(b, []byte(j.ID))
		}
		return nil
	}
	b, err := a.bucket(bucketCheckpoints)
	if err != nil {
		return err
	}
	return a.put(b, []byte(j.ID), p.Data)
}

// deleteCheckpoint drops a job's checkpoint with the job.
func (a *applier) deleteCheckpoint(jobID string) error {
	if b := a.tx.Bucket(bucketCheckpoints); b != nil && b.Get([]byte(jobID)) != nil {
		return a.del(b, []byte(jobID))
	}
	return nil
}

// Checkpoint returns a copy of the job's checkpoint kept in raft (nil: none).
func (t *Tx) Checkpoint(jobID string) []byte {
	b := t.tx.Bucket(bucketCheckpoints)
	if b == nil {
		return nil
	}
	v := b.Get([]byte(jobID))
	if v == nil {
		return nil
	}
	return append([]byte(nil), v...)
}
