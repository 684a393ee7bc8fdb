package sched

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"path/filepath"
	"testing"
	"time"

	"github.com/foreman-sched/foreman/fsm"
)

const gib = 1024 // MiB

// shareNode is a node with n devices of mib MiB each.
func shareNode(name string, n int, mib int64) fsm.Node {
	nd := node(name, 64000, 512000)
	nd.Capacity.Named = map[string]int64{"gpu": int64(n)}
	for i := range n {
		nd.GPUs = append(nd.GPUs, fsm.GPU{UUID: fmt.Sprintf("GPU-%s-%d", name, i), Index: i, Minor: i, Model: "NVIDIA H200", MemoryMiB: mib})
	}
	return nd
}

// shareJob asks for a share of mib, submitted sec seconds after t0.
func shareJob(id string, mib int64, sec int) *fsm.Job {
	j := job(id, 50, 100, 64)
	j.Spec.Resources.GPUMemoryMiB = mib
	j.SubmittedAt = t0.Add(time.Duration(sec) * time.Second)
	return j
}

// shareOf is the device index of a placement's share on nd (-1: none).
func shareOf(nd fsm.Node, p fsm.Placement) int {
	for _, g := range nd.GPUs {
		if g.UUID == p.GPUShare && p.GPUShare != "" {
			return g.Index
		}
	}
	return -1
}

func shareAttempt(id string, nd fsm.Node, dev int, mib int64) fsm.Attempt {
	a := liveAttempt(id, nd.Name, 100, 64, 3)
	a.Resources.GPUMemoryMiB = mib
	g := nd.GPUs[dev]
	a.GPUShare = &fsm.GPUShare{GPU: g, MemoryMiB: mib}
	return a
}

func TestPlanGPUSharesTwoFitThirdWaits(t *testing.T) {
	nd := shareNode("h1", 1, 143771) // one H200
	jobs := []*fsm.Job{shareJob("a", 60*gib, 0), shareJob("b", 60*gib, 1), shareJob("c", 60*gib, 2)}
	d := decode(t, Plan(&Snapshot{Nodes: []fsm.Node{nd}, Pending: jobs}, t0, testConfig()))
	if len(d.placements) != 2 || shareOf(nd, d.placements[0]) != 0 || shareOf(nd, d.placements[1]) != 0 {
		t.Fatalf("placements %+v, want a and b on device 0", d.placements)
	}
	if d.reasons["c"] != "1 node: 1 insufficient gpu memory" {
		t.Fatalf("c's reason %q", d.reasons["c"])
	}
	for _, p := range d.placements {
		if len(p.GPUs) != 0 || p.Resources.GPUMemoryMiB != 60*gib {
			t.Fatalf("a share placement holds %v / %d MiB", p.GPUs, p.Resources.GPUMemoryMiB)
		}
	}
	// Running, the two still hold the device; one ended, c fits.
	live := []fsm.Attempt{shareAttempt("a", nd, 0, 60*gib), shareAttempt("b", nd, 0, 60*gib)}
	d = decode(t, Plan(&Snapshot{Nodes: []fsm.Node{nd}, Live: live, Pending: jobs[2:]}, t0, testConfig()))
	if len(d.placements) != 0 {
		t.Fatalf("c placed beside two live 60 GiB shares: %+v", d.placements)
	}
	d = decode(t, Plan(&Snapshot{Nodes: []fsm.Node{nd}, Live: live[1:], Pending: jobs[2:]}, t0, testConfig()))
	if len(d.placements) != 1 || shareOf(nd, d.placements[0]) != 0 {
		t.Fatalf("after a ended: %+v %v", d.placements, d.reasons)
	}
	// An in-flight placement holds its share too.
	inflight := Placing{Placement: fsm.Placement{JobID: "a", Node: "h1", Resources: fsm.Resources{GPUMemoryMiB: 100 * gib}, GPUShare: nd.GPUs[0].UUID}}
	d = decode(t, Plan(&Snapshot{Nodes: []fsm.Node{nd}, Placing: []Placing{inflight}, Pending: jobs[2:]}, t0, testConfig()))
	if len(d.placements) != 0 {
		t.Fatalf("placed beside a 100 GiB share in flight: %+v", d.placements)
	}
}

// Arrival order 32, 32, 48, 48 GiB on two 80 GiB devices: first-fit in
// that order puts both 32s on device 0 and strands the second 48 (16 and
// 32 GiB left); first-fit decreasing pairs each 48 with a 32.
func TestPlanGPUSharesFirstFitDecreasing(t *testing.T) {
	nd := shareNode("h1", 2, 80*gib)
	sizes := []int64{32, 32, 48, 48}
	var jobs []*fsm.Job
	for i, s := range sizes {
		jobs = append(jobs, shareJob(string(rune('a'+i)), s*gib, i))
	}
	// All queued at once: one plan, largest first.
	d := decode(t, Plan(&Snapshot{Nodes: []fsm.Node{nd}, Pending: jobs}, t0, testConfig()))
	if len(d.placements) != 4 {
		t.Fatalf("FFD placed %d of 4: %v", len(d.placements), d.reasons)
	}
	used := map[int]int64{}
	for _, p := range d.placements {
		used[shareOf(nd, p)] += p.Resources.GPUMemoryMiB
	}
	if used[0] != 80*gib || used[1] != 80*gib {
		t.Fatalf("per device %v, want 80 GiB on each", used)
	}
	// The same jobs arriving one plan at a time (naive first-fit): the
	// last one waits. This is the case FFD exists for.
	var live []fsm.Attempt
	for _, j := range jobs {
		d := decode(t, Plan(&Snapshot{Nodes: []fsm.Node{nd}, Live: live, Pending: []*fsm.Job{j}}, t0, testConfig()))
		if len(d.placements) == 0 {
			if j.ID != "d" {
				t.Fatalf("one at a time, %s waits: %v", j.ID, d.reasons)
			}
			return
		}
		live = append(live, shareAttempt(j.ID, nd, shareOf(nd, d.placements[0]), j.Spec.Resources.GPUMemoryMiB))
	}
	t.Fatal("one at a time placed all four: the case does not show fragmentation")
}

func TestPlanGPUSharesAndWholeDevices(t *testing.T) {
	nd := shareNode("h1", 2, 80*gib)
	// A share on device 1: a 2-GPU job waits, a 1-GPU job takes device 0,
	// and a new share joins device 1 rather than breaking into device 0.
	live := []fsm.Attempt{shareAttempt("s", nd, 1, 10*gib)}
	two, one, sh := gpuJob("two", 2), gpuJob("one", 1), shareJob("sh", 10*gib, 1)
	d := decode(t, Plan(&Snapshot{Nodes: []fsm.Node{nd}, Live: live, Pending: []*fsm.Job{two}}, t0, testConfig()))
	if len(d.placements) != 0 || d.reasons["two"] != "1 node: 1 insufficient gpu" {
		t.Fatalf("2 GPUs beside a share: %+v %q", d.placements, d.reasons["two"])
	}
	d = decode(t, Plan(&Snapshot{Nodes: []fsm.Node{nd}, Live: live, Pending: []*fsm.Job{sh}}, t0, testConfig()))
	if len(d.placements) != 1 || shareOf(nd, d.placements[0]) != 1 {
		t.Fatalf("share went to %+v, want device 1 (already shared)", d.placements)
	}
	d = decode(t, Plan(&Snapshot{Nodes: []fsm.Node{nd}, Live: live, Pending: []*fsm.Job{one}}, t0, testConfig()))
	if len(d.placements) != 1 || indexes(nd, d.placements[0].GPUs)[0] != 0 {
		t.Fatalf("1 GPU went to %+v, want device 0", d.placements)
	}
	// Device 0 held whole: a share goes to device 1 only, and none fits
	// once device 1 is full.
	whole := liveAttempt("w", "h1", 100, 64, 3)
	whole.Resources.Named = map[string]int64{"gpu": 1}
	whole.GPUs = []fsm.GPU{nd.GPUs[0]}
	big := shareJob("big", 75*gib, 1)
	d = decode(t, Plan(&Snapshot{Nodes: []fsm.Node{nd}, Live: []fsm.Attempt{whole, live[0]}, Pending: []*fsm.Job{big}}, t0, testConfig()))
	if len(d.placements) != 0 || d.reasons["big"] != "1 node: 1 insufficient gpu memory" {
		t.Fatalf("75 GiB beside a whole holder and 10 GiB: %+v %q", d.placements, d.reasons["big"])
	}
	// Unhealthy devices take no share.
	sick := shareNode("h1", 2, 80*gib)
	sick.GPUs[0].Health = "xid 79"
	d = decode(t, Plan(&Snapshot{Nodes: []fsm.Node{sick}, Pending: []*fsm.Job{shareJob("x", gib, 0)}}, t0, testConfig()))
	if len(d.placements) != 1 || shareOf(sick, d.placements[0]) != 1 {
		t.Fatalf("share on %+v, want the healthy device 1", d.placements)
	}
}

func TestPlanGPUSharesUnplaceable(t *testing.T) {
	nd := shareNode("h1", 2, 143771)
	for _, tt := range []struct {
		node   fsm.Node
		mib    int64
		cons   []string
		reason string
	}{
		{nd, 200 * gib, nil, "no GPU has 200GiB of memory (the most any GPU has is 143771MiB)"},
		{gpuNode("g1", 8), 90 * gib, nil, "no GPU has 90GiB of memory (the most any GPU has is 81559MiB)"},
		{nd, 10 * gib, []string{"gpu.model == a100"}, "1 node: 1 no GPU matching gpu.model == a100"},
	} {
		j := shareJob("j", tt.mib, 0)
		j.Spec.Constraints = tt.cons
		d := decode(t, Plan(&Snapshot{Nodes: []fsm.Node{tt.node}, Pending: []*fsm.Job{j}}, t0, testConfig()))
		if len(d.placements) != 0 || d.reasons["j"] != tt.reason {
			t.Errorf("%d MiB %v: placed %+v, reason %q, want %q", tt.mib, tt.cons, d.placements, d.reasons["j"], tt.reason)
		}
	}
	// A node whose gpu count was set by hand has no device memory to share.
	bare := node("b1", 64000, 512000)
	bare.Capacity.Named = map[string]int64{"gpu": 4}
	d := decode(t, Plan(&Snapshot{Nodes: []fsm.Node{bare}, Pending: []*fsm.Job{shareJob("j", gib, 0)}}, t0, testConfig()))
	if len(d.placements) != 0 || d.reasons["j"] != "no node has GPUs with known memory for a 1GiB share" {
		t.Fatalf("hand-set count: %+v %q", d.placements, d.reasons["j"])
	}
}

func TestPlanGangGPUShares(t *testing.T) {
	nd := shareNode("h1", 1, 143771)
	j := shareJob("g", 60*gib, 0)
	j.Spec.Gang = &fsm.GangSpec{Size: 2, Spread: new(bool)}
	d := decode(t, Plan(&Snapshot{Nodes: []fsm.Node{nd}, Pending: []*fsm.Job{j}}, t0, testConfig()))
	if len(d.placements) != 1 || len(d.placements[0].Tasks) != 2 ||
		d.placements[0].Tasks[0].GPUShare != nd.GPUs[0].UUID || d.placements[0].Tasks[1].GPUShare != nd.GPUs[0].UUID {
		t.Fatalf("gang of two 60 GiB shares: %+v %v", d.placements, d.reasons)
	}
	j.Spec.Gang.Size = 3 // 180 GiB on one device: nothing placed
	d = decode(t, Plan(&Snapshot{Nodes: []fsm.Node{nd}, Pending: []*fsm.Job{j}}, t0, testConfig()))
	if len(d.placements) != 0 {
		t.Fatalf("gang of three 60 GiB shares placed: %+v", d.placements)
	}
}

// Shares are in the Place entry: a restored replica holds the same
// devices and plans the same next share.
func TestGPUSharesSurviveRestore(t *testing.T) {
	open := func() *fakeRaft {
		f, err := fsm.Open(filepath.Join(t.TempDir(), "state.db"), fsm.Options{NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = f.Close() })
		return &fakeRaft{t: t, f: f}
	}
	apply := func(r *fakeRaft, typ fsm.CommandType, payload any) {
		t.Helper()
		cmd, err := fsm.NewCommand(typ, t0, payload)
		if err != nil {
			t.Fatal(err)
		}
		if res, err := r.Apply(context.Background(), cmd); err != nil || res.Err != nil {
			t.Fatal(err, res.Err)
		}
	}
	share := func(mib int64) fsm.JobSpec {
		return fsm.JobSpec{Command: []string{"true"}, Priority: 50, Resources: fsm.Resources{CPU: 100, MemoryMB: 64, GPUMemoryMiB: mib}}
	}
	devOf := func(r *fakeRaft, job string) int {
		t.Helper()
		dev := -1
		_ = r.f.View(func(tx *fsm.Tx) error {
			at, err := tx.Attempt(job, 1)
			if err == nil && at.GPUShare != nil {
				dev = at.GPUShare.GPU.Index
			}
			return err
		})
		return dev
	}
	r := open()
	nd := shareNode("h1", 2, 143771)
	apply(r, fsm.CmdUpsertNode, &fsm.UpsertNode{Node: nd})
	apply(r, fsm.CmdSubmitJobs, &fsm.SubmitJobs{Jobs: []fsm.NewJob{{ID: "a", Spec: share(60 * gib)}, {ID: "b", Spec: share(70 * gib)}, {ID: "c", Spec: share(60 * gib)}}})
	planAndApply(t, r)
	// Largest first: b (70) on 0, then a and c (60 each): a joins b on 0
	// (130 GiB), c does not fit there and takes 1.
	if a, b, c := devOf(r, "a"), devOf(r, "b"), devOf(r, "c"); a != 0 || b != 0 || c != 1 {
		t.Fatalf("a on %d, b on %d, c on %d; want 0, 0, 1", a, b, c)
	}
	snap, err := r.f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var sink gpuSink
	if err := snap.Persist(&sink); err != nil {
		t.Fatal(err)
	}
	snap.Release()
	r2 := open()
	if err := r2.f.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); err != nil {
		t.Fatal(err)
	}
	r2.index = r.index
	code := 0
	for _, x := range []*fakeRaft{r, r2} {
		var tok uint64
		_ = x.f.View(func(tx *fsm.Tx) error { at, err := tx.Attempt("a", 1); tok = at.FencingToken; return err })
		apply(x, fsm.CmdReport, &fsm.ReportAttempt{JobID: "a", Attempt: 1, FencingToken: tok, Node: "h1", State: fsm.AttemptSucceeded, ExitCode: &code})
		apply(x, fsm.CmdSubmitJobs, &fsm.SubmitJobs{Jobs: []fsm.NewJob{{ID: "d", Spec: share(60 * gib)}}})
		planAndApply(t, x)
	}
	// a's 60 GiB on device 0 is free again; d joins b there (first fit
	// prefers a shared device), on both.
	if d1, d2 := devOf(r, "d"), devOf(r2, "d"); d1 != 0 || d2 != 0 {
		t.Fatalf("d on %d (original) and %d (restored), want 0 on both", d1, d2)
	}
	_, h1, _ := r.f.StateHash()
	_, h2, _ := r2.f.StateHash()
	if h1 != h2 {
		t.Fatalf("state hashes differ after the same entries: %s vs %s", h1, h2)
	}
}

// A whole-GPU preemptor on a node whose only device holds a share:
// preemption reasons in counts, where the shared device looks free, so it
// finds no victim; the preemptor must then wait with the device's reason,
// neither preempt the share holder nor hold the node's room (a lower job
// that fits still runs). Share holders are not victims of whole-GPU jobs
// (sched/DESIGN.md).
func TestPreemptDoesNotCountSharedDevicesFree(t *testing.T) {
	nd := shareNode("h1", 1, 143771)
	s := preemptSnap([]fsm.Node{nd}, []liveJob{{id: "s", node: "h1", prio: 10, cpu: 100, started: time.Minute}}, gpuJob("hi", 1))
	s.Pending[0].Spec.Priority = 90
	s.Live[0].Resources.GPUMemoryMiB = 10 * gib
	s.Live[0].GPUShare = &fsm.GPUShare{GPU: nd.GPUs[0], MemoryMiB: 10 * gib}
	low := job("low", 50, 100, 64) // fits the node's CPU: the preemptor must not hold that room
	low.SubmittedAt = t0.Add(time.Second)
	s.Pending = append(s.Pending, low)
	d := decode(t, Plan(s, t0, testConfig()))
	if by, ids := victims(d); len(ids) != 0 {
		t.Fatalf("%s preempted %v", by, ids)
	}
	if r := d.reasons["hi"]; r != "1 node: 1 insufficient gpu" {
		t.Fatalf("hi's reason %q", r)
	}
	if len(d.placements) != 1 || d.placements[0].JobID != "low" {
		t.Fatalf("placements %+v, want low", d.placements)
	}
}
