package fsm

import (
	"strings"
	"testing"
)

func testGPUs(n int) []GPU {
	out := make([]GPU, n)
	for i := range out {
		out[i] = GPU{UUID: "GPU-" + strings.Repeat(string(rune('a'+i)), 8), Index: i, Minor: i, Model: "NVIDIA H100"}
	}
	return out
}

func nodeEvents(sub *Subscription) []string {
	var out []string
	for len(sub.C()) > 0 {
		e := <-sub.C()
		if e.Type == EventNode {
			out = append(out, e.Kind()+" "+e.Reason)
		}
	}
	return out
}

func TestNodeGPUsEvents(t *testing.T) {
	h := newHarness(t)
	sub := h.f.Subscribe(64)
	defer sub.Close()
	// A client's hello carries its devices.
	h.must(CmdUpsertNode, UpsertNode{Node: Node{Name: "c1", Role: RoleClient, Capacity: Resources{Named: map[string]int64{"gpu": 2}}, GPUs: testGPUs(2), GPUDriver: "580.1"}})
	// A gossip upsert (raft members) keeps them.
	h.must(CmdUpsertNode, UpsertNode{Node: Node{Name: "c1", Role: RoleClient, Capacity: Resources{Named: map[string]int64{"gpu": 2}}}, KeepGPUs: true})
	n := h.node("c1")
	if len(n.GPUs) != 2 || n.GPUDriver != "580.1" {
		t.Fatalf("KeepGPUs lost the devices: %+v", n)
	}
	// One vanishes, one turns unhealthy, one appears; the capacity still says 2.
	g := testGPUs(3)[1:]
	g[0].Health = "xid 79"
	h.must(CmdNodeGPUs, NodeGPUs{Name: "c1", GPUs: g})
	got := strings.Join(nodeEvents(sub), "\n")
	want := strings.Join([]string{
		"node.joined eligible",
		"node.gpu_added GPU-aaaaaaaa (index 0, NVIDIA H100)",
		"node.gpu_added GPU-bbbbbbbb (index 1, NVIDIA H100)",
		"node.updated eligible",
		"node.updated eligible",
		"node.gpu_unhealthy GPU-bbbbbbbb (index 1, NVIDIA H100): xid 79",
		"node.gpu_added GPU-cccccccc (index 2, NVIDIA H100)",
		"node.gpu_removed GPU-aaaaaaaa (index 0, NVIDIA H100)",
		"node.gpu_mismatch gpu capacity 2, 1 healthy devices detected",
	}, "\n")
	if got != want {
		t.Fatalf("events:\n%s\nwant:\n%s", got, want)
	}
	if n := h.node("c1"); len(n.GPUs) != 2 || n.GPUDriver != "" || n.GPUs[0].Health != "xid 79" {
		t.Fatalf("after NodeGPUs: %+v", n)
	}
}

func TestNodeGPUsRefused(t *testing.T) {
	h := newHarness(t)
	h.addNode("n1")
	before := h.hash()
	dup := testGPUs(2)
	dup[1].UUID = dup[0].UUID
	short := testGPUs(2)
	short[0].Links = []string{"X"}
	for name, p := range map[string]NodeGPUs{
		"unknown node": {Name: "nope", GPUs: testGPUs(1)},
		"duplicate":    {Name: "n1", GPUs: dup},
		"no uuid":      {Name: "n1", GPUs: []GPU{{Index: 0}}},
		"short links":  {Name: "n1", GPUs: short},
	} {
		if r := h.apply(CmdNodeGPUs, p); r.Err == nil {
			t.Errorf("%s: applied", name)
		}
	}
	if h.hash() != before {
		t.Fatal("a refused NodeGPUs changed the state")
	}
}

func TestPlaceCopiesGPUs(t *testing.T) {
	h := newHarness(t)
	h.addNode("n1")
	g := testGPUs(4)
	g[3].Health = "excluded"
	g[0].Links = []string{"X", "NV4", "SYS", "SYS"}
	g[1].Links = []string{"NV4", "X", "SYS", "SYS"}
	g[2].Links = []string{"SYS", "SYS", "X", "SYS"}
	g[3].Links = []string{"SYS", "SYS", "SYS", "X"}
	h.must(CmdNodeGPUs, NodeGPUs{Name: "n1", GPUs: g})
	h.submit("J1", "J2", "J3", "J4")
	r := h.must(CmdPlace, Place{Placements: []Placement{
		{JobID: "J1", Node: "n1", GPUs: []string{g[1].UUID, g[0].UUID}},
		{JobID: "J2", Node: "n1", GPUs: []string{"GPU-ffffffff"}},
		{JobID: "J3", Node: "n1", GPUs: []string{g[3].UUID}},
		{JobID: "J4", Node: "n1", GPUs: []string{g[2].UUID, g[2].UUID}},
	}})
	if len(r.Skipped) != 3 {
		t.Fatalf("skipped %v, want J2 (unknown), J3 (unhealthy), J4 (twice)", r.Skipped)
	}
	at := h.attempt("J1", 1)
	if len(at.GPUs) != 2 || at.GPUs[0].UUID != g[1].UUID || at.GPUs[1].UUID != g[0].UUID || at.GPUs[0].Minor != 1 || at.GPUs[0].Links != nil {
		t.Fatalf("attempt GPUs %+v", at.GPUs)
	}
}

func (h *harness) node(name string) *Node {
	h.t.Helper()
	var n *Node
	if err := h.f.View(func(tx *Tx) (err error) { n, err = tx.Node(name); return err }); err != nil {
		h.t.Fatalf("node %s: %v", name, err)
	}
	return n
}
