package agent

import (
	"encoding/json"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/foreman-sched/foreman/exec"
	"github.com/foreman-sched/foreman/fsm"
	"github.com/hashicorp/raft"
)

// TestAssignmentsLiveAttempts: the worker gets every live attempt of its
// node, with the job's spec for assigned ones, whether the spec was read
// now or kept from the previous call; the kept specs are exactly those of
// the attempts still assigned.
func TestAssignmentsLiveAttempts(t *testing.T) {
	f, err := fsm.Open(filepath.Join(t.TempDir(), "state.db"), fsm.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	at := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	var idx uint64
	apply := func(typ fsm.CommandType, p any) *fsm.Result {
		t.Helper()
		c, err := fsm.NewCommand(typ, at, p)
		if err != nil {
			t.Fatal(err)
		}
		b, err := c.Encode()
		if err != nil {
			t.Fatal(err)
		}
		idx++
		r := f.Apply(&raft.Log{Index: idx, Term: 1, Type: raft.LogCommand, Data: b}).(*fsm.Result)
		if r.Err != nil || len(r.Skipped) > 0 {
			t.Fatalf("%s: %v %v", typ, r.Err, r.Skipped)
		}
		return r
	}
	apply(fsm.CmdUpsertNode, fsm.UpsertNode{Node: fsm.Node{Name: "n1", Capacity: fsm.Resources{CPU: 4000, MemoryMB: 4096}}})
	apply(fsm.CmdUpsertNode, fsm.UpsertNode{Node: fsm.Node{Name: "n2", Capacity: fsm.Resources{CPU: 4000, MemoryMB: 4096}}})
	specs := map[string]fsm.JobSpec{}
	var sub fsm.SubmitJobs
	for i, id := range []string{"01JOBA", "01JOBB", "01JOBC"} {
		s := fsm.JobSpec{Name: id, Command: []string{"echo", id}, Env: map[string]string{"I": id}, Priority: 50 + i}
		specs[id] = s
		sub.Jobs = append(sub.Jobs, fsm.NewJob{ID: id, Spec: s})
	}
	apply(fsm.CmdSubmitJobs, sub)
	place := apply(fsm.CmdPlace, fsm.Place{Placements: []fsm.Placement{{JobID: "01JOBA", Node: "n1"}, {JobID: "01JOBB", Node: "n1"}, {JobID: "01JOBC", Node: "n2"}}})

	a := newAssignments(f)
	check := func(wantStates map[string]fsm.AttemptState) {
		t.Helper()
		got, err := a.LiveAttempts("n1")
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(wantStates) {
			t.Fatalf("got %d attempts, want %d: %+v", len(got), len(wantStates), got)
		}
		assigned := 0
		for _, g := range got {
			st, ok := wantStates[g.Attempt.JobID]
			if !ok || g.Attempt.State != st || g.Attempt.Node != "n1" {
				t.Fatalf("unexpected attempt %+v", g.Attempt)
			}
			want := fsm.JobSpec{}
			if st == fsm.AttemptAssigned {
				want = specs[g.Attempt.JobID]
				assigned++
			}
			if !reflect.DeepEqual(g.Spec, want) {
				t.Fatalf("%s: spec %+v, want %+v", g.Attempt.JobID, g.Spec, want)
			}
		}
		if n := len(a.specs.specs); n != assigned {
			t.Fatalf("cache holds %d specs, want %d (the assigned attempts)", n, assigned)
		}
	}
	check(map[string]fsm.AttemptState{"01JOBA": fsm.AttemptAssigned, "01JOBB": fsm.AttemptAssigned})
	check(map[string]fsm.AttemptState{"01JOBA": fsm.AttemptAssigned, "01JOBB": fsm.AttemptAssigned}) // from the cache
	apply(fsm.CmdReport, fsm.ReportAttempt{JobID: "01JOBA", Attempt: 1, FencingToken: place.Index, Node: "n1", State: fsm.AttemptRunning})
	check(map[string]fsm.AttemptState{"01JOBA": fsm.AttemptRunning, "01JOBB": fsm.AttemptAssigned})
	// What a server sends a node outside raft on its work stream decodes
	// into exactly what the node's executor would have read locally.
	src := newWorkSource(f)
	ws, err := src.NodeWork("n1")
	if err != nil {
		t.Fatal(err)
	}
	if c := src.nodes["n1"]; c == nil || len(c.specs) != 1 {
		t.Fatalf("the work source keeps n1's spec cache with its one assigned attempt: %+v", c)
	}
	b, err := json.Marshal(ws)
	if err != nil {
		t.Fatal(err)
	}
	var decoded []exec.Assignment
	if err := json.Unmarshal(b, &decoded); err != nil {
		t.Fatal(err)
	}
	local, err := newAssignments(f).LiveAttempts("n1")
	if err != nil {
		t.Fatal(err)
	}
	if len(local) != 2 || !reflect.DeepEqual(decoded, local) {
		t.Fatalf("work stream payload decodes to\n%+v\nwant the local view\n%+v", decoded, local)
	}
	again, err := src.NodeWork("n1") // from the source's cache
	if err != nil || !reflect.DeepEqual(again, local) {
		t.Fatalf("second read from the work source: %v\n%+v\nwant\n%+v", err, again, local)
	}
	apply(fsm.CmdReport, fsm.ReportAttempt{JobID: "01JOBB", Attempt: 1, FencingToken: place.Index, Node: "n1", State: fsm.AttemptSucceeded})
	check(map[string]fsm.AttemptState{"01JOBA": fsm.AttemptRunning})
	if _, err := src.NodeWork("n1"); err != nil {
		t.Fatal(err)
	}
	if c, ok := src.nodes["n1"]; ok {
		t.Fatalf("n1 has no assigned attempt left, but the work source still holds its cache %+v", c)
	}
}
