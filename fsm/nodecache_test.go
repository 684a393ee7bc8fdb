package fsm

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
)

// Tx.Nodes through the memo: a changed record is read changed, and a
// caller's change to a record it got does not reach the next reader.
func TestNodesMemoFollowsTheState(t *testing.T) {
	h := newHarness(t)
	h.must(CmdUpsertNode, UpsertNode{Node: Node{Name: "n1", Labels: map[string]string{"rack": "a"}, Capacity: Resources{CPU: 1000}}})
	h.must(CmdUpsertNode, UpsertNode{Node: Node{Name: "n2", Capacity: Resources{CPU: 2000}}})
	read := func() []Node {
		t.Helper()
		var out []Node
		if err := h.f.View(func(tx *Tx) (err error) { out, err = tx.Nodes(); return err }); err != nil {
			t.Fatal(err)
		}
		return out
	}
	first := read()
	if len(first) != 2 || first[0].Labels["rack"] != "a" {
		t.Fatalf("first read: %+v", first)
	}
	first[0].Capacity.CPU = 1 // the records are the caller's (their maps are shared: read-only)
	if again := read(); again[0].Labels["rack"] != "a" || again[0].Capacity.CPU != 1000 {
		t.Fatalf("a caller's change reached the next read: %+v", again[0])
	}
	h.must(CmdNodeState, SetNodeState{Name: "n2", Gossip: NodeDead})
	h.must(CmdUpsertNode, UpsertNode{Node: Node{Name: "n1", Labels: map[string]string{"rack": "b"}, Capacity: Resources{CPU: 1000}}})
	got := read()
	if got[0].Labels["rack"] != "b" || got[1].Gossip != NodeDead {
		t.Fatalf("after the changes: %+v", got)
	}
}

// Placements read their nodes from the memo of the committed records, and
// from the records themselves once the batch has written a node: a node
// made dead by an earlier entry of the same batch takes no placement, and
// one made alive again does.
func TestPlacementsReadNodesAsTheBatchLeftThem(t *testing.T) {
	h := newHarness(t)
	h.addNode("n1")
	h.addNode("n2")
	h.submit(jobID(1), jobID(2), jobID(3))
	memo := func() {
		t.Helper()
		if err := h.f.View(func(tx *Tx) error { _, err := tx.Nodes(); return err }); err != nil {
			t.Fatal(err)
		}
		if _, ok := h.f.nodes.committed(); !ok {
			t.Fatal("no memo of the committed node records after Tx.Nodes")
		}
	}
	memo()
	// From the memo: n1 is alive; an unknown node is not found.
	r := h.must(CmdPlace, Place{Placements: []Placement{{JobID: jobID(1), Node: "n1"}, {JobID: jobID(2), Node: "nope"}}})
	if len(r.Skipped) != 1 || !strings.Contains(r.Skipped[jobID(2)], `node "nope" not found`) {
		t.Fatalf("skipped %+v, want only %s (node not found)", r.Skipped, jobID(2))
	}
	memo()
	// One batch: n2 dead, then a placement on it, then n2 alive again and
	// a placement on it.
	res := make([]any, 4)
	logs := []*raft.Log{
		h.entry(CmdNodeState, SetNodeState{Name: "n2", Gossip: NodeDead}),
		h.entry(CmdPlace, Place{Placements: []Placement{{JobID: jobID(2), Node: "n2"}}}),
		h.entry(CmdNodeState, SetNodeState{Name: "n2", Gossip: NodeAlive}),
		h.entry(CmdPlace, Place{Placements: []Placement{{JobID: jobID(3), Node: "n2"}}}),
	}
	for i, v := range h.f.ApplyBatch(logs) {
		res[i] = v
	}
	dead, alive := res[1].(*Result), res[3].(*Result)
	if dead.Err != nil || len(dead.Skipped) != 1 || !strings.Contains(dead.Skipped[jobID(2)], "node n2 is dead") {
		t.Fatalf("placement on n2 made dead earlier in the batch: err %v, skipped %+v", dead.Err, dead.Skipped)
	}
	if alive.Err != nil || len(alive.Skipped) != 0 {
		t.Fatalf("placement on n2 alive again: err %v, skipped %+v", alive.Err, alive.Skipped)
	}
	if got := h.job(jobID(3)).State; got != JobRunning {
		t.Fatalf("job 3 is %s, want running", got)
	}
	checkIndexes(t, h.f)
}

// Views read while node records are written patch the memo with the nodes
// written since its version, and get exactly what their own transaction
// holds: readers compare Tx.Nodes with the records they decode themselves,
// in the same transaction, while batches rewrite nodes (some views open
// with a batch's commit in flight).
func TestNodesMemoPatchedWhileNodesAreWritten(t *testing.T) {
	h := newHarness(t)
	const nodes = 40
	for i := range nodes {
		h.addNode(fmt.Sprintf("n%02d", i))
	}
	check := func(tx *Tx) (string, error) {
		got, err := tx.Nodes()
		if err != nil {
			return "", err
		}
		want, err := bucketRecords[Node](tx.tx.Bucket(bucketNodes))
		if err != nil || reflect.DeepEqual(got, want) {
			return "", err
		}
		return fmt.Sprintf("got %d nodes, want %d", len(got), len(want)), nil
	}
	views := checkViewsWhileWriting(t, h.f, check, func() {
		rng := rand.New(rand.NewPCG(1, 2))
		for b := range 400 {
			var logs []*raft.Log
			for range 1 + rng.IntN(4) {
				name := fmt.Sprintf("n%02d", rng.IntN(nodes+5)) // a few new nodes too
				if rng.IntN(3) == 0 {
					logs = append(logs, h.entry(CmdNodeState, SetNodeState{Name: name, Gossip: []GossipState{NodeAlive, NodeDead}[rng.IntN(2)]}))
					continue
				}
				logs = append(logs, h.entry(CmdUpsertNode, UpsertNode{Node: Node{Name: name,
					Labels: map[string]string{"batch": strconv.Itoa(b)}, Capacity: Resources{CPU: int64(1000 + b)}}}))
			}
			h.f.ApplyBatch(logs)
		}
	})
	if h.f.nodes.patched.Load() == 0 {
		t.Fatalf("no view patched the memo in %d views", views)
	}
	if h.f.nodes.resolved.Load() == 0 {
		t.Fatalf("no view opened during a commit in %d views: the version by index is untested", views)
	}
	t.Logf("%d views, %d patched, %d told their version by index", views, h.f.nodes.patched.Load(), h.f.nodes.resolved.Load())
}
