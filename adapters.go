package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"

	"github.com/foreman-sched/foreman/cluster"
	"github.com/foreman-sched/foreman/exec"
	"github.com/foreman-sched/foreman/fsm"
	"github.com/foreman-sched/foreman/httpapi"
	"github.com/foreman-sched/foreman/ui"
)

// The adapters below connect concrete types to the small interfaces that
// exec, sched and httpapi declare, so those packages never import each other.

// assignments is the worker's view of the local FSM.
type assignments struct{ f *fsm.FSM }

func (a assignments) Watch() (<-chan struct{}, func()) { return a.f.Watch() }

func (a assignments) LiveAttempts(node string) ([]exec.Assignment, error) {
	var out []exec.Assignment
	err := a.f.View(func(tx *fsm.Tx) error {
		var firstErr error
		err := tx.LiveAttemptsOnNode(node, func(at *fsm.Attempt) bool {
			if at.State != fsm.AttemptAssigned {
				// The worker needs the spec only to start an attempt; skipping
				// the job's decode halves the cost of a reconcile on a busy node.
				out = append(out, exec.Assignment{Attempt: *at})
				return true
			}
			job, err := tx.Job(at.JobID)
			if err != nil {
				firstErr = err
				return false
			}
			out = append(out, exec.Assignment{Attempt: *at, Spec: job.Spec})
			return true
		})
		if firstErr != nil {
			return firstErr
		}
		return err
	})
	return out, err
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
		hm := httpapi.Member{Name: m.Name, Addr: m.Addr, HTTPAddr: m.HTTPAddr, RaftAddr: m.RaftAddr, Status: string(m.Status), RaftRole: "none"}
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
		LastContact: info.LastContact,
	}
	for _, s := range info.Servers {
		if s.Suffrage == "voter" {
			out.Voters++
		}
		out.Servers = append(out.Servers, httpapi.RaftServer{ID: s.ID, Address: s.Address, Suffrage: s.Suffrage, Role: s.Role})
	}
	return out
}

func uiAssets() fs.FS { return ui.Assets() }
