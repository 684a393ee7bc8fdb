package fsm

import (
	"strings"
	"testing"
)

// h200 is one 143,771 MiB device (what an H200 reports).
func h200() []GPU {
	g := testGPUs(2)
	for i := range g {
		g[i].MemoryMiB = 143771
		g[i].Model = "NVIDIA H200"
	}
	return g
}

const gib60 = 60 * 1024

func sharePlacement(job, node, uuid string, mib int64) Placement {
	return Placement{JobID: job, Node: node, GPUShare: uuid, Resources: Resources{GPUMemoryMiB: mib}}
}

func TestPlaceGPUShares(t *testing.T) {
	h := newHarness(t)
	h.addNode("n1")
	g := h200()
	h.must(CmdNodeGPUs, NodeGPUs{Name: "n1", GPUs: g, GPUMemoryMode: GPUMemoryWatchReport})
	h.submit("S1", "S2", "S3", "W1", "S4", "W2")
	// Two 60 GiB shares fit one device; a third in the same entry does not.
	r := h.must(CmdPlace, Place{Placements: []Placement{
		sharePlacement("S1", "n1", g[0].UUID, gib60),
		sharePlacement("S2", "n1", g[0].UUID, gib60),
		sharePlacement("S3", "n1", g[0].UUID, gib60),
	}})
	if len(r.Skipped) != 1 || !strings.Contains(r.Skipped["S3"], "does not fit") {
		t.Fatalf("skipped %v, want S3 (does not fit)", r.Skipped)
	}
	at := h.attempt("S2", 1)
	if at.GPUShare == nil || at.GPUShare.GPU.UUID != g[0].UUID || at.GPUShare.MemoryMiB != gib60 || len(at.GPUs) != 0 {
		t.Fatalf("S2's share: %+v (gpus %v)", at.GPUShare, at.GPUs)
	}
	if d := at.Devices(); len(d) != 1 || d[0].UUID != g[0].UUID {
		t.Fatalf("Devices() = %v", d)
	}
	// A device with shares is not free for a whole-GPU job; one held whole
	// is not shareable; a share with no device, or a device with no share,
	// is refused.
	r = h.must(CmdPlace, Place{Placements: []Placement{
		{JobID: "W1", Node: "n1", GPUs: []string{g[0].UUID}},
		{JobID: "W2", Node: "n1", GPUs: []string{g[1].UUID}},
		sharePlacement("S3", "n1", g[1].UUID, gib60),
		sharePlacement("S4", "n1", "", gib60),
	}})
	if len(r.Skipped) != 3 || !strings.Contains(r.Skipped["W1"], "holds shares") ||
		!strings.Contains(r.Skipped["S3"], "held whole") || !strings.Contains(r.Skipped["S4"], "does not match") {
		t.Fatalf("skipped %v, want W1 (shares), S3 (held whole), S4 (no device)", r.Skipped)
	}
	// A share ending frees its room.
	tok := h.attempt("S1", 1).FencingToken
	h.must(CmdReport, ReportAttempt{JobID: "S1", Attempt: 1, FencingToken: tok, Node: "n1", State: AttemptSucceeded, ExitCode: intp(0)})
	r = h.must(CmdPlace, Place{Placements: []Placement{sharePlacement("S4", "n1", g[0].UUID, gib60)}})
	if len(r.Skipped) != 0 {
		t.Fatalf("after S1 ended: skipped %v", r.Skipped)
	}
	checkIndexes(t, h.f)
	if n := h.node("n1"); n.GPUMemoryMode != GPUMemoryWatchReport {
		t.Fatalf("mode %q", n.GPUMemoryMode)
	}
}

func TestPlaceGangGPUSharesAllOrNothing(t *testing.T) {
	h := newHarness(t)
	h.addNode("n1")
	g := h200()
	h.must(CmdNodeGPUs, NodeGPUs{Name: "n1", GPUs: g})
	h.must(CmdSubmitJobs, SubmitJobs{Jobs: []NewJob{
		{ID: "G1", Spec: JobSpec{Command: []string{"true"}, Gang: &GangSpec{Size: 3, Spread: new(bool)}}},
	}})
	h.submit("S1")
	before := h.hash()
	// Three 60 GiB tasks on one device: the third does not fit, so none is placed.
	r := h.must(CmdPlace, Place{Placements: []Placement{{JobID: "G1", Node: "n1", Resources: Resources{GPUMemoryMiB: gib60}, Tasks: []TaskSlot{
		{Node: "n1", Port: 20000, GPUShare: g[0].UUID},
		{Node: "n1", Port: 20001, GPUShare: g[0].UUID},
		{Node: "n1", Port: 20002, GPUShare: g[0].UUID},
	}}}})
	if !strings.Contains(r.Skipped["G1"], "tasks[2]: gpu_share") {
		t.Fatalf("skipped %v", r.Skipped)
	}
	if h.hash() != before {
		t.Fatal("a skipped gang changed the state")
	}
	// The skipped gang's first tasks hold nothing for the next placement.
	r = h.must(CmdPlace, Place{Placements: []Placement{{JobID: "G1", Node: "n1", Resources: Resources{GPUMemoryMiB: gib60}, Tasks: []TaskSlot{
		{Node: "n1", Port: 20000, GPUShare: g[0].UUID},
		{Node: "n1", Port: 20001, GPUShare: g[0].UUID},
		{Node: "n1", Port: 20002, GPUShare: g[0].UUID},
	}}, sharePlacement("S1", "n1", g[0].UUID, gib60)}})
	if _, ok := r.Skipped["G1"]; !ok || len(r.Skipped) != 1 {
		t.Fatalf("skipped %v, want only G1", r.Skipped)
	}
	if at := h.attempt("S1", 1); at.GPUShare == nil {
		t.Fatal("S1 got no share")
	}
}

func TestNodeGPUsRefusesUnknownMode(t *testing.T) {
	h := newHarness(t)
	h.addNode("n1")
	before := h.hash()
	if r := h.apply(CmdNodeGPUs, NodeGPUs{Name: "n1", GPUs: h200(), GPUMemoryMode: "mps"}); r.Err == nil {
		t.Fatal("applied an unknown gpu_memory_mode")
	}
	if r := h.apply(CmdUpsertNode, UpsertNode{Node: Node{Name: "c1", Role: RoleClient, GPUs: h200(), GPUMemoryMode: "mps"}}); r.Err == nil {
		t.Fatal("a client's hello with an unknown gpu_memory_mode applied")
	}
	if h.hash() != before {
		t.Fatal("a refused NodeGPUs changed the state")
	}
}

func TestReportGPUMemoryOver(t *testing.T) {
	h := newHarness(t)
	h.addNode("n1")
	g := h200()
	h.must(CmdNodeGPUs, NodeGPUs{Name: "n1", GPUs: g})
	h.submit("S1", "W1")
	h.must(CmdPlace, Place{Placements: []Placement{sharePlacement("S1", "n1", g[0].UUID, 10*1024), {JobID: "W1", Node: "n1", GPUs: []string{g[1].UUID}}}})
	sub := h.f.Subscribe(64)
	defer sub.Close()
	tok := h.attempt("S1", 1).FencingToken
	over := &GPUMemoryOver{UUID: g[0].UUID, UsedMiB: 20480, ShareMiB: 10240, Action: "kill"}
	before := h.attempt("S1", 1).ModifyIndex
	h.must(CmdReport, ReportAttempt{JobID: "S1", Attempt: 1, FencingToken: tok, Node: "n1", State: ReportGPUMemoryOver, GPUMemoryOver: over})
	got := attemptEvents(sub, NameGPUMemoryOver)
	want := "S1 gpu_memory: 20480 MiB used of a 10240 MiB share on " + g[0].UUID + " (kill)"
	if len(got) != 1 || got[0] != want {
		t.Fatalf("events %q, want %q", got, want)
	}
	if h.attempt("S1", 1).ModifyIndex != before {
		t.Fatal("an over-use report changed the attempt")
	}
	wtok := h.attempt("W1", 1).FencingToken
	for name, rep := range map[string]ReportAttempt{
		"stale token":   {JobID: "S1", Attempt: 1, FencingToken: tok + 1, Node: "n1", State: ReportGPUMemoryOver, GPUMemoryOver: over},
		"missing":       {JobID: "S1", Attempt: 1, FencingToken: tok, Node: "n1", State: ReportGPUMemoryOver},
		"bad action":    {JobID: "S1", Attempt: 1, FencingToken: tok, Node: "n1", State: ReportGPUMemoryOver, GPUMemoryOver: &GPUMemoryOver{UUID: g[0].UUID, Action: "shrug"}},
		"not its share": {JobID: "W1", Attempt: 1, FencingToken: wtok, Node: "n1", State: ReportGPUMemoryOver, GPUMemoryOver: &GPUMemoryOver{UUID: g[1].UUID, Action: "report"}},
	} {
		if r := h.apply(CmdReport, rep); r.Err == nil {
			t.Errorf("%s: applied", name)
		}
	}
}
