package exec

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/foreman-sched/foreman/fsm"
)

// Checkpoints (issue 18). Every attempt of a job on this node gets the same
// checkpoint directory, DataDir/checkpoints/<job> (<job>-task-<i> for a gang
// task), mounted at /foreman/checkpoint in a container and named by
// $FOREMAN_CHECKPOINT for both drivers. What a job writes there — during
// its run or in the grace period after its kill signal (preemption, drain,
// gang stop, timeout) — is there for its next attempt on this node. A
// checkpoint POSTed to the API (kept in raft, fsm.CheckpointMax) is written
// to <dir>/checkpoint before each attempt starts, on whichever node.
//
// Bounds: a directory found larger than CheckpointDirMax when an attempt
// starts is emptied (the attempt starts fresh, with a warning in the
// agent's log); directories untouched for CheckpointRetention are removed
// when the worker starts.

// CheckpointDirMax bounds one job's node-local checkpoint directory.
const CheckpointDirMax = 256 << 20

// CheckpointRetention is how long an unused checkpoint directory is kept.
const CheckpointRetention = 7 * 24 * time.Hour

// CheckpointFileName is the file the API's checkpoint is written to.
const CheckpointFileName = "checkpoint"

// ContainerCheckpointDir is where a container job sees its checkpoints.
const ContainerCheckpointDir = "/foreman/checkpoint"

func (w *Worker) checkpointsRoot() string { return filepath.Join(w.cfg.DataDir, "checkpoints") }

// checkpointDir is the attempt's checkpoint directory on this node.
func (w *Worker) checkpointDir(at *fsm.Attempt) string {
	return filepath.Join(w.checkpointsRoot(), CheckpointName(at))
}

// CheckpointName names an attempt's checkpoint directory on every node:
// the job ID, plus -task-<i> for a gang task.
func CheckpointName(at *fsm.Attempt) string {
	name := at.JobID
	if at.Task != nil {
		name += "-task-" + strconv.Itoa(at.Task.Index)
	}
	return name
}

// prepareCheckpoint creates (or bounds) the attempt's checkpoint directory,
// writes the API's checkpoint into it and returns the directory and the
// job's FOREMAN_CHECKPOINT variable.
func (w *Worker) prepareCheckpoint(ctx context.Context, a Assignment, driver string) (string, []string, error) {
	dir := w.checkpointDir(&a.Attempt)
	// A dir this call creates is empty and new: it needs no bound and no
	// touch below (three to five syscalls on every attempt's start).
	fresh := true
	if err := os.Mkdir(dir, 0o755); errors.Is(err, fs.ErrExist) {
		fresh = false
	} else if errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return "", nil, err
		}
	} else if err != nil {
		return "", nil, err
	}
	if from := a.CheckpointFrom; from != "" && from != w.cfg.Node && (w.deps.Checkpoints != nil || a.CheckpointStored != nil) {
		fresh = false
		start := time.Now()
		err := errors.New("this agent cannot fetch checkpoints from other nodes")
		var n int64
		if w.deps.Checkpoints != nil {
			n, err = w.fetchCheckpoint(ctx, from, CheckpointName(&a.Attempt), dir)
		}
		if err != nil && a.CheckpointStored != nil {
			// The node cannot serve it (dead, gone): the copy uploaded
			// with that attempt's outputs (outputs.go).
			var serr error
			if n, serr = w.fetchStoredCheckpoint(ctx, a, dir); serr == nil {
				from, err = a.CheckpointStored.Store, nil
			} else {
				err = fmt.Errorf("%v; from the object store: %w", err, serr)
			}
		}
		if err != nil {
			// The copy on a lost node is gone with it: the attempt starts
			// with what this node has (documented).
			w.log.Warn("checkpoint not fetched: the attempt starts with this node's", "job", a.Attempt.JobID,
				"attempt", a.Attempt.Num, "from", from, "err", err)
		} else {
			w.log.Info("checkpoint fetched", "job", a.Attempt.JobID, "attempt", a.Attempt.Num, "from", from,
				"bytes", n, "took", time.Since(start).Round(time.Millisecond))
		}
	}
	// Writable by any user the job may run as, like /tmp.
	if err := os.Chmod(dir, 0o1777); err != nil {
		return "", nil, err
	}
	if !fresh {
		if n := dirSize(dir); n > CheckpointDirMax {
			w.log.Warn("checkpoint directory over its bound: emptied", "dir", dir, "bytes", n, "max", CheckpointDirMax)
			ents, _ := os.ReadDir(dir)
			for _, e := range ents {
				os.RemoveAll(filepath.Join(dir, e.Name()))
			}
		}
	}
	if a.Checkpoint != nil {
		p := filepath.Join(dir, CheckpointFileName)
		os.Remove(p) // never write through a symlink the job left
		if err := os.WriteFile(p, a.Checkpoint, 0o666); err != nil {
			return "", nil, err
		}
	}
	if !fresh {
		now := time.Now() // its mtime is its last use (sweepCheckpoints)
		os.Chtimes(dir, now, now)
	}
	if driver == ProcessDriverName {
		return dir, []string{"FOREMAN_CHECKPOINT=" + dir}, nil
	}
	return dir, []string{"FOREMAN_CHECKPOINT=" + ContainerCheckpointDir}, nil
}

// dirSize adds up the regular files under dir (symlinks are not followed).
func dirSize(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// sweepCheckpoints removes checkpoint directories unused for longer than
// CheckpointRetention.
func (w *Worker) sweepCheckpoints() {
	ents, err := os.ReadDir(w.checkpointsRoot())
	if errors.Is(err, os.ErrNotExist) {
		return
	}
	for _, e := range ents {
		fi, err := e.Info()
		if err == nil && time.Since(fi.ModTime()) > CheckpointRetention {
			os.RemoveAll(filepath.Join(w.checkpointsRoot(), e.Name()))
		}
	}
}
