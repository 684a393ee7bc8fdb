package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"sync"

	"github.com/foreman-sched/foreman/cluster"
	"github.com/foreman-sched/foreman/exec"
	"github.com/foreman-sched/foreman/fsm"
	"github.com/foreman-sched/foreman/httpapi"
	"github.com/foreman-sched/foreman/ui"
)

// The adapters below connect concrete types to the small interfaces that
// exec, sched and httpapi declare, so those packages never import each other.

// assignments is the worker's view of the local FSM.
type assignments struct {
	f     *fsm.FSM
	specs *specCache
}

func newAssignments(f *fsm.FSM) assignments { return assignments{f: f, specs: &specCache{}} }

func (a assignments) Watch() (<-chan struct{}, func()) { return a.f.Watch() }

// LiveAttempts lists the node's live attempts with the spec of the
// assigned ones (the worker needs a spec only to start an attempt). A
// node can hold thousands of assigned attempts waiting for a slot, and the
// worker reconciles after every apply, so the specs already read are kept
// (a.specs) and a reconcile decodes only the jobs of new attempts.
func (a assignments) LiveAttempts(node string) ([]exec.Assignment, error) {
	c := a.specs
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []exec.Assignment
	next := make(map[specKey]fsm.JobSpec, len(c.specs))
	nextFrom := make(map[specKey]string, len(c.from))
	err := a.f.View(func(tx *fsm.Tx) error {
		var firstErr error
		err := tx.LiveAttemptsOnNode(node, func(at *fsm.Attempt) bool {
			if at.State != fsm.AttemptAssigned {
				out = append(out, exec.Assignment{Attempt: *at})
				return true
			}
			k := specKey{job: at.JobID, num: at.Num, token: at.FencingToken}
			spec, ok := c.specs[k]
			if !ok {
				s, err := tx.JobSpec(at.JobID)
				if err != nil {
					firstErr = err
					return false
				}
				spec = *s
			}
			next[k] = spec
			as := exec.Assignment{Attempt: *at, Spec: spec, Checkpoint: tx.Checkpoint(at.JobID)}
			from, ok := c.from[k]
			if !ok {
				from = checkpointFrom(tx, at)
			}
			nextFrom[k], as.CheckpointFrom = from, from
			if from != "" {
				// Not cached: the upload may be recorded after the first look.
				as.CheckpointStored = storedCheckpoint(tx, at)
			}
			if len(spec.DependsOn) > 0 {
				// The parents' results, for the child's inputs directory.
				in, err := tx.JobInputs(&spec)
				if err != nil {
					firstErr = err
					return false
				}
				for _, x := range in {
					as.Inputs = append(as.Inputs, exec.Input{Name: x.Name, Result: x.Result, JobID: x.JobID, Attempt: x.Attempt, Node: x.Node, Artifacts: x.Artifacts, Outputs: x.Outputs})
				}
			}
			out = append(out, as)
			return true
		})
		if firstErr != nil {
			return firstErr
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	c.specs, c.from = next, nextFrom // only the attempts still assigned
	return out, nil
}

// workSource is what this agent, as a server, sends a node outside raft
// on its work stream (cluster/workstream.go): the view the node's own
// executor would read from a replica, so the executor cannot tell the two
// apart. It keeps each node's spec cache between reads, as the node's own
// worker does: a stream's frame is rebuilt after every change to the
// node's attempts, and decoding the specs of attempts still waiting for a
// start again each time was a seventh of writing the frames. A node's
// cache is dropped when none of its attempts is assigned, so the map holds
// only nodes with attempts waiting to start.
type workSource struct {
	f     *fsm.FSM
	mu    sync.Mutex
	nodes map[string]*specCache
}

func newWorkSource(f *fsm.FSM) *workSource {
	return &workSource{f: f, nodes: map[string]*specCache{}}
}

func (s *workSource) NodeWork(node string) (any, error) {
	s.mu.Lock()
	c := s.nodes[node]
	if c == nil {
		c = &specCache{}
		s.nodes[node] = c
	}
	s.mu.Unlock()
	out, err := assignments{f: s.f, specs: c}.LiveAttempts(node)
	c.mu.Lock()
	empty := len(c.specs) == 0
	c.mu.Unlock()
	if empty {
		s.mu.Lock()
		if s.nodes[node] == c {
			delete(s.nodes, node)
		}
		s.mu.Unlock()
	}
	return out, err
}

// specCache holds the specs of a node's assigned attempts from the last
// LiveAttempts. A job's spec never changes once submitted, and the key
// names one attempt (its fencing token is the index of the entry that
// placed it), so an entry is right for as long as that attempt exists. The
// specs are shared between calls: the worker reads them, never writes.
type specCache struct {
	mu    sync.Mutex
	specs map[specKey]fsm.JobSpec
	// from is each assigned attempt's Assignment.CheckpointFrom.
	from map[specKey]string
}

// checkpointFrom is the node of at's task's latest earlier attempt that
// started ("" if none): where its checkpoint directory is. A gang task
// follows its own index; a job without a gang, any earlier attempt.
func checkpointFrom(tx *fsm.Tx, at *fsm.Attempt) string {
	if at.Num <= 1 {
		return ""
	}
	prev, err := tx.Attempts(at.JobID)
	if err != nil {
		return ""
	}
	best, node := 0, ""
	for i := range prev {
		p := &prev[i]
		if p.Num >= at.Num || p.Num <= best || p.StartedAt.IsZero() {
			continue
		}
		if (at.Task == nil) != (p.Task == nil) || (at.Task != nil && p.Task.Index != at.Task.Index) {
			continue
		}
		best, node = p.Num, p.Node
	}
	return node
}

// storedCheckpoint is the object store's copy of the checkpoint of at's
// task's latest earlier started attempt (checkpointFrom's), or nil.
func storedCheckpoint(tx *fsm.Tx, at *fsm.Attempt) *exec.StoredCheckpoint {
	prev, err := tx.Attempts(at.JobID)
	if err != nil {
		return nil
	}
	var best *fsm.Attempt
	for i := range prev {
		p := &prev[i]
		if p.Num >= at.Num || (best != nil && p.Num <= best.Num) || p.StartedAt.IsZero() {
			continue
		}
		if (at.Task == nil) != (p.Task == nil) || (at.Task != nil && p.Task.Index != at.Task.Index) {
			continue
		}
		best = p
	}
	if best == nil || best.Outputs == nil || best.Outputs.State == fsm.OutputsPending {
		return nil
	}
	if o := best.Outputs.Object(fsm.OutputCheckpoint); o != nil {
		return &exec.StoredCheckpoint{Store: best.Outputs.Store, Key: o.Key, Attempt: best.Num}
	}
	return nil
}

type specKey struct {
	job   string
	num   int
	token uint64
}

// clusterAdapter turns cluster.Node into httpapi.Cluster.
type clusterAdapter struct{ *cluster.Node }

func (c clusterAdapter) NodeName() string { return c.Name() }

// Apply maps cluster's "no leader" onto the API's, so it answers 503.
func (c clusterAdapter) Apply(ctx context.Context, cmd *fsm.Command) (*fsm.Result, error) {
	res, err := c.Node.Apply(ctx, cmd)
	if errors.Is(err, cluster.ErrNoLeader) {
		return nil, fmt.Errorf("%w: %v", httpapi.ErrNoLeader, err)
	}
	return res, err
}

// workerLogs maps exec's "no such attempt here" onto fs.ErrNotExist, which
// the API answers with 404.
type workerLogs struct{ w *exec.Worker }

func (l workerLogs) StreamLog(ctx context.Context, jobID string, attempt int, stream string, follow bool, out io.Writer) error {
	err := l.w.StreamLog(ctx, jobID, attempt, stream, follow, out)
	if errors.Is(err, exec.ErrNoSuchAttempt) && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: %w", fs.ErrNotExist, err)
	}
	return err
}

func (c clusterAdapter) Members() []httpapi.Member {
	info := c.Node.RaftInfo()
	role := map[string]cluster.RaftServer{}
	for _, s := range info.Servers {
		role[s.ID] = s
	}
	var out []httpapi.Member
	for _, m := range c.Node.Members() {
		hm := httpapi.Member{Name: m.Name, Addr: m.Addr, HTTPAddr: m.HTTPAddr, RaftAddr: m.RaftAddr, Status: string(m.Status), RaftRole: "none", Version: m.Version}
		if s, ok := role[m.Name]; ok {
			hm.Voter = s.Suffrage == "voter"
			hm.Leader = s.Role == "leader"
			switch {
			case hm.Leader:
				hm.RaftRole = "leader"
			case hm.Voter:
				hm.RaftRole = "follower"
			default:
				hm.RaftRole = "nonvoter"
			}
		}
		out = append(out, hm)
	}
	return out
}

func (c clusterAdapter) RaftInfo() httpapi.RaftInfo {
	info := c.Node.RaftInfo()
	_, leaderAddr := c.Node.Leader()
	out := httpapi.RaftInfo{
		Node: info.Node, State: info.State, Leader: info.Leader, LeaderAddr: leaderAddr, Term: info.Term,
		CommitIndex: info.CommitIndex, AppliedIndex: info.AppliedIndex, LastIndex: info.LastIndex,
		LastContact: info.LastContact, FirstIndex: info.FirstIndex, SnapshotIndex: info.SnapshotIndex,
	}
	for _, s := range info.Servers {
		if s.Suffrage == "voter" {
			out.Voters++
		}
		out.Servers = append(out.Servers, httpapi.RaftServer{ID: s.ID, Address: s.Address, Suffrage: s.Suffrage, Role: s.Role, LastHeardAgo: s.LastHeardAgo, Clients: s.Clients})
	}
	return out
}

func uiHandler() http.Handler { return ui.Handler() }

// workerExec runs foreman exec's commands in this node's attempts
// (httpapi.Exec), its errors in the API's terms.
type workerExec struct{ w *exec.Worker }

func (e workerExec) StartExec(jobID string, attempt int, req httpapi.ExecRequest) (httpapi.ExecSession, error) {
	s, err := e.w.StartExec(jobID, attempt, exec.ExecRequest{Command: req.Command, TTY: req.TTY, Stdin: req.Stdin,
		Width: uint16(req.Width), Height: uint16(req.Height)})
	switch {
	case err == nil:
		return s, nil
	case errors.Is(err, exec.ErrNoSuchAttempt), errors.Is(err, exec.ErrAttemptEnded), errors.Is(err, exec.ErrExecUnsupported):
		return nil, httpapi.NotLive(fmt.Errorf("%w: nothing to exec into", err))
	case errors.Is(err, exec.ErrCommandNotFound), errors.Is(err, exec.ErrNoCommand), errors.Is(err, exec.ErrExecStart):
		return nil, fmt.Errorf("%w: %w", httpapi.ErrExecCommand, err)
	}
	return nil, err
}
