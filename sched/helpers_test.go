package sched

import (
	"fmt"
	"testing"
	"time"

	"github.com/foreman-sched/foreman/fsm"
)

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

// testConfig is DefaultConfig with aging off unless a test wants it.
func testConfig() Config {
	c := DefaultConfig()
	c.AgingInterval = 0
	return c
}

func node(name string, cpu, mem int64, labels ...string) fsm.Node {
	n := fsm.Node{Name: name, Capacity: fsm.Resources{CPU: cpu, MemoryMB: mem},
		Drivers: []string{"process", "container"}, Gossip: fsm.NodeAlive, Eligibility: fsm.Eligible,
		Labels: map[string]string{}}
	for i := 0; i+1 < len(labels); i += 2 {
		n.Labels[labels[i]] = labels[i+1]
	}
	return n
}

func job(id string, prio int, cpu, mem int64) *fsm.Job {
	return &fsm.Job{ID: id, State: fsm.JobQueued, SubmittedAt: t0,
		Spec: fsm.JobSpec{Command: []string{"true"}, Priority: prio, Resources: fsm.Resources{CPU: cpu, MemoryMB: mem}}}
}

func liveAttempt(jobID, nodeName string, cpu, mem int64, token uint64) fsm.Attempt {
	return fsm.Attempt{JobID: jobID, Num: 1, Node: nodeName, State: fsm.AttemptRunning,
		FencingToken: token, Resources: fsm.Resources{CPU: cpu, MemoryMB: mem}}
}

// decoded is a Decision's commands, decoded by type.
type decoded struct {
	types      []fsm.CommandType
	placements []fsm.Placement
	released   []string
	failed     map[string]string // job → reason
	reasons    map[string]string
	lost       []fsm.MarkLost
	stopped    []fsm.StopAttempts
}

func decode(t testing.TB, d *Decision) decoded {
	t.Helper()
	out := decoded{failed: map[string]string{}, reasons: map[string]string{}}
	for _, c := range d.Commands {
		out.types = append(out.types, c.Type)
		var err error
		switch c.Type {
		case fsm.CmdPlace:
			var p fsm.Place
			err = c.DecodePayload(&p)
			out.placements = append(out.placements, p.Placements...)
		case fsm.CmdRelease:
			var p fsm.ReleaseJobs
			err = c.DecodePayload(&p)
			out.released = append(out.released, p.JobIDs...)
		case fsm.CmdFailJobs:
			var p fsm.FailJobs
			err = c.DecodePayload(&p)
			for _, id := range p.JobIDs {
				out.failed[id] = p.Reason
			}
		case fsm.CmdSetReasons:
			var p fsm.SetReasons
			err = c.DecodePayload(&p)
			for k, v := range p.Reasons {
				out.reasons[k] = v
			}
		case fsm.CmdMarkLost:
			var p fsm.MarkLost
			err = c.DecodePayload(&p)
			out.lost = append(out.lost, p)
		case fsm.CmdStopAttempts:
			var p fsm.StopAttempts
			err = c.DecodePayload(&p)
			out.stopped = append(out.stopped, p)
		default:
			err = fmt.Errorf("unexpected command type %q", c.Type)
		}
		if err != nil {
			t.Fatalf("decode %s: %v", c.Type, err)
		}
	}
	return out
}

// placedOn maps job → node.
func (d decoded) placedOn() map[string]string {
	m := map[string]string{}
	for _, p := range d.placements {
		m[p.JobID] = p.Node
	}
	return m
}
