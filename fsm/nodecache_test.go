package fsm

import (
	"testing"
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
