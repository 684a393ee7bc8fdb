package checker

import (
	"strings"
	"testing"
	"time"
)

const (
	gA = "GPU-00000001-0000-4000-8000-000000000000"
	gB = "GPU-00000001-0000-4000-8000-000000000001"
	gC = "GPU-00000001-0000-4000-8000-000000000002"
)

func gpuRec(kind, job string, attempt int, tok uint64, node string, at int64, uuids ...string) GPURecord {
	return GPURecord{Kind: kind, Job: job, Attempt: attempt, Token: tok, Node: node, UUIDs: uuids, At: at}
}

func gpuAttempt(attempt int, tok uint64, node, state string, uuids ...string) FinalAttempt {
	a := FinalAttempt{Attempt: attempt, Node: node, State: state, FencingToken: tok}
	for _, u := range uuids {
		a.GPUs = append(a.GPUs, FinalGPU{UUID: u})
	}
	return a
}

var gpuOpt = GPUOptions{ClockBound: time.Millisecond, TickBound: time.Second,
	NodeGPUs: func(node string) []string {
		if node == "n1" {
			return []string{gA, gB, gC}
		}
		return nil
	}}

func TestGPUDisjointAndRecordedPasses(t *testing.T) {
	s := int64(time.Second)
	recs := []GPURecord{
		// j1 holds A and B, j2 holds C at the same time: disjoint.
		gpuRec("start", "j1", 1, 10, "n1", 1*s, gB, gA),
		gpuRec("start", "j2", 1, 11, "n1", 1*s, gC),
		gpuRec("end", "j1", 1, 10, "n1", 3*s, gB, gA),
		gpuRec("end", "j2", 1, 11, "n1", 3*s, gC),
		// j3 gets A after j1 ended.
		gpuRec("start", "j3", 1, 12, "n1", 3*s+int64(10*time.Millisecond), gA),
		gpuRec("end", "j3", 1, 12, "n1", 4*s, gA),
	}
	final := []FinalJob{
		{ID: "j1", State: "queued", Attempts: []FinalAttempt{gpuAttempt(1, 10, "n1", "lost", gA, gB)}},
		{ID: "j2", State: "succeeded", Attempts: []FinalAttempt{gpuAttempt(1, 11, "n1", "succeeded", gC)}},
		{ID: "j3", State: "succeeded", Attempts: []FinalAttempt{gpuAttempt(1, 12, "n1", "succeeded", gA)}},
	}
	opt := gpuOpt
	opt.Requested = map[string]int{"j1": 2, "j2": 1, "j3": 1}
	r := GPU(recs, final, opt)
	if !r.Valid || r.Stats["matched"] != 3 || r.Stats["overlaps"] != 0 || r.Stats["gpus_used"] != 3 ||
		r.Stats["handovers_after_lost"] != 1 || r.Stats["min_gap_after_lost_ms"] != 10 {
		t.Fatalf("want a pass with 3 matched executions on 3 GPUs, one handover 10 ms after a lost attempt: %s", r)
	}
}

// Two executions of different jobs on one UUID at once: the guarantee
// broken.
func TestGPUOverlapOnOneUUIDFails(t *testing.T) {
	s := int64(time.Second)
	recs := []GPURecord{
		gpuRec("start", "j1", 1, 10, "n1", 1*s, gA, gB),
		gpuRec("start", "j2", 1, 11, "n1", 2*s, gB),
		gpuRec("end", "j1", 1, 10, "n1", 3*s, gA, gB),
		gpuRec("end", "j2", 1, 11, "n1", 4*s, gB),
	}
	final := []FinalJob{
		{ID: "j1", State: "succeeded", Attempts: []FinalAttempt{gpuAttempt(1, 10, "n1", "succeeded", gA, gB)}},
		{ID: "j2", State: "succeeded", Attempts: []FinalAttempt{gpuAttempt(1, 11, "n1", "succeeded", gB)}},
	}
	r := GPU(recs, final, gpuOpt)
	if r.Valid || r.Stats["overlaps"] != 1 || r.Stats["max_overlap_ms"] != 1000 || !strings.Contains(r.Errors[0], "GPU "+gB+" held twice") {
		t.Fatalf("want one overlap of 1 s on %s: %s", gB, r)
	}
}

// Two attempts of one job on one device: a replacement started while the
// first execution was still writing records.
func TestGPUOverlapOfTwoAttemptsOfOneJobFails(t *testing.T) {
	s := int64(time.Second)
	recs := []GPURecord{
		gpuRec("start", "j1", 1, 10, "n1", 1*s, gA),
		gpuRec("start", "j1", 2, 20, "n1", 2*s, gA),
		gpuRec("tick", "j1", 1, 10, "n1", 3*s, gA), // attempt 1 still ran: never ended
		gpuRec("end", "j1", 2, 20, "n1", 4*s, gA),
	}
	final := []FinalJob{{ID: "j1", State: "succeeded", Attempts: []FinalAttempt{
		gpuAttempt(1, 10, "n1", "lost", gA), gpuAttempt(2, 20, "n1", "succeeded", gA)}}}
	r := GPU(recs, final, gpuOpt)
	if r.Valid || r.Stats["overlaps"] != 1 || r.Stats["max_overlap_ms"] != 1000 {
		t.Fatalf("want a certain overlap of 1 s (until attempt 1's last tick): %s", r)
	}
}

// The execution checker's slack, and no more: a killed execution (no end)
// whose replacement started after its last record but inside the tick
// bound is a possible overlap, noted; one that started before its last
// record is certain.
func TestGPUFencedExecutionWithinTickIsPossibleOnly(t *testing.T) {
	s := int64(time.Second)
	recs := []GPURecord{
		gpuRec("start", "j1", 1, 10, "n1", 1*s, gA),
		gpuRec("tick", "j1", 1, 10, "n1", 2*s, gA), // then fenced: no end
		gpuRec("start", "j2", 1, 11, "n1", 2*s+int64(300*time.Millisecond), gA),
		gpuRec("end", "j2", 1, 11, "n1", 4*s, gA),
	}
	final := []FinalJob{
		{ID: "j1", State: "failed", Attempts: []FinalAttempt{gpuAttempt(1, 10, "n1", "killed", gA)}},
		{ID: "j2", State: "succeeded", Attempts: []FinalAttempt{gpuAttempt(1, 11, "n1", "succeeded", gA)}},
	}
	r := GPU(recs, final, gpuOpt)
	if !r.Valid || r.Stats["possible_overlaps"] != 1 || r.Stats["overlaps"] != 0 || r.Stats["incomplete"] != 1 {
		t.Fatalf("want a pass with one possible overlap: %s", r)
	}
	// Without the tick bound the open execution runs to the end of the
	// test, as in the execution checker: certain.
	opt := gpuOpt
	opt.TickBound, opt.EndOfTest = 0, 10*s
	if r := GPU(recs, final, opt); r.Valid || r.Stats["overlaps"] != 1 {
		t.Fatalf("with no tick bound the open execution overlaps for certain: %s", r)
	}
}

// An execution whose FOREMAN_GPU_UUIDS differ from its attempt's record.
func TestGPUEnvDiffersFromRecordFails(t *testing.T) {
	s := int64(time.Second)
	recs := []GPURecord{
		gpuRec("start", "j1", 1, 10, "n1", 1*s, gA, gC),
		gpuRec("end", "j1", 1, 10, "n1", 2*s, gA, gC),
	}
	final := []FinalJob{{ID: "j1", State: "succeeded", Attempts: []FinalAttempt{gpuAttempt(1, 10, "n1", "succeeded", gA, gB)}}}
	r := GPU(recs, final, gpuOpt)
	if r.Valid || r.Stats["mismatched"] != 1 || !strings.Contains(r.Errors[0], "its attempt records") {
		t.Fatalf("want a mismatch: %s", r)
	}
	// Order does not matter (the env lists devices by index): same set passes.
	recs2 := []GPURecord{gpuRec("start", "j1", 1, 10, "n1", 1*s, gB, gA), gpuRec("end", "j1", 1, 10, "n1", 2*s, gB, gA)}
	if r := GPU(recs2, final, gpuOpt); !r.Valid || r.Stats["matched"] != 1 {
		t.Fatalf("the same set in another order: %s", r)
	}
}

func TestGPUWrongCountForeignAndUnrecordedFail(t *testing.T) {
	s := int64(time.Second)
	final := []FinalJob{{ID: "j1", State: "succeeded", Attempts: []FinalAttempt{gpuAttempt(1, 10, "n1", "succeeded", gA)}}}
	opt := gpuOpt
	opt.Requested = map[string]int{"j1": 2}
	if r := GPU([]GPURecord{gpuRec("start", "j1", 1, 10, "n1", s, gA)}, final, opt); r.Valid || r.Stats["wrong_count"] != 1 {
		t.Fatalf("asked 2, ran with 1: %s", r)
	}
	other := "GPU-00000002-0000-4000-8000-000000000000"
	final2 := []FinalJob{{ID: "j1", State: "succeeded", Attempts: []FinalAttempt{gpuAttempt(1, 10, "n1", "succeeded", other)}}}
	if r := GPU([]GPURecord{gpuRec("start", "j1", 1, 10, "n1", s, other)}, final2, gpuOpt); r.Valid || r.Stats["foreign_gpus"] != 1 {
		t.Fatalf("n2's GPU on n1: %s", r)
	}
	if r := GPU([]GPURecord{gpuRec("start", "j1", 9, 99, "n1", s, gA)}, final, gpuOpt); r.Valid || r.Stats["unrecorded"] != 1 {
		t.Fatalf("a token the cluster never issued: %s", r)
	}
	// A job whose final read failed is noted, not failed.
	if r := GPU([]GPURecord{gpuRec("start", "j1", 1, 10, "n1", s, gA)}, []FinalJob{{ID: "j1"}}, gpuOpt); !r.Valid || r.Stats["unverified"] != 1 {
		t.Fatalf("unread job: %s", r)
	}
}

func TestParseGPURecords(t *testing.T) {
	in := "start j1 1 10 n1 " + gA + "," + gB + " 5\nstart j2 1 11 n1 - 6\nend j1 1 10 n1 " + gA + "\n"
	recs, torn, err := ParseGPURecords(strings.NewReader(in))
	if err != nil || torn != 1 || len(recs) != 2 || len(recs[0].UUIDs) != 2 || recs[0].UUIDs[1] != gB || recs[1].UUIDs != nil || recs[1].At != 6 {
		t.Fatalf("recs %+v torn %d err %v", recs, torn, err)
	}
}
