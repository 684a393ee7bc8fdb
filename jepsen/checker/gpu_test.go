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

func shareRec(kind, job string, attempt int, tok uint64, at int64, mib int64, uuid string) GPURecord {
	return GPURecord{Kind: kind, Job: job, Attempt: attempt, Token: tok, Node: "n1", UUIDs: []string{uuid}, ShareMiB: mib, At: at}
}

func shareAttempt(attempt int, tok uint64, state string, mib int64, uuid string) FinalAttempt {
	return FinalAttempt{Attempt: attempt, Node: "n1", State: state, FencingToken: tok, GPUShare: &FinalGPUShare{GPU: FinalGPU{UUID: uuid}, MemoryMiB: mib}}
}

var shareOpt = func() GPUOptions {
	o := gpuOpt
	o.DeviceMiB = func(string) int64 { return 81920 }
	return o
}()

// Shares on one device at once are fine while they fit: two 40 GiB
// shares of an 80 GiB device, and a third starting as one ends.
func TestGPUSharesThatFitPass(t *testing.T) {
	s := int64(time.Second)
	recs := []GPURecord{
		shareRec("start", "s1", 1, 10, 1*s, 40960, gA),
		shareRec("start", "s2", 1, 11, 1*s, 40960, gA),
		shareRec("end", "s1", 1, 10, 3*s, 40960, gA),
		shareRec("start", "s3", 1, 12, 3*s, 40960, gA), // handed over at the same instant
		shareRec("end", "s2", 1, 11, 4*s, 40960, gA),
		shareRec("end", "s3", 1, 12, 5*s, 40960, gA),
		gpuRec("start", "w1", 1, 13, "n1", 6*s, gA), // whole, after every share ended
		gpuRec("end", "w1", 1, 13, "n1", 7*s, gA),
	}
	final := []FinalJob{
		{ID: "s1", State: "succeeded", Attempts: []FinalAttempt{shareAttempt(1, 10, "succeeded", 40960, gA)}},
		{ID: "s2", State: "succeeded", Attempts: []FinalAttempt{shareAttempt(1, 11, "succeeded", 40960, gA)}},
		{ID: "s3", State: "succeeded", Attempts: []FinalAttempt{shareAttempt(1, 12, "succeeded", 40960, gA)}},
		{ID: "w1", State: "succeeded", Attempts: []FinalAttempt{gpuAttempt(1, 13, "n1", "succeeded", gA)}},
	}
	opt := shareOpt
	opt.RequestedShare = map[string]int64{"s1": 40960, "s2": 40960, "s3": 40960}
	opt.Requested = map[string]int{"w1": 1}
	r := GPU(recs, final, opt)
	if !r.Valid || r.Stats["matched"] != 4 || r.Stats["share_executions"] != 3 || r.Stats["max_shares_per_gpu"] != 2 || r.Stats["max_share_pct"] != 100 {
		t.Fatalf("want a pass, 2 shares at most, 100%% of the device: %s", r)
	}
}

// Hand-made histories that break the share rules must fail.
func TestGPUShareViolationsFail(t *testing.T) {
	s := int64(time.Second)
	final := func(jobs ...FinalJob) []FinalJob { return jobs }
	over := []GPURecord{
		shareRec("start", "s1", 1, 10, 1*s, 61440, gA),
		shareRec("start", "s2", 1, 11, 2*s, 61440, gA),
		shareRec("end", "s1", 1, 10, 3*s, 61440, gA),
		shareRec("end", "s2", 1, 11, 4*s, 61440, gA),
	}
	r := GPU(over, final(
		FinalJob{ID: "s1", State: "succeeded", Attempts: []FinalAttempt{shareAttempt(1, 10, "succeeded", 61440, gA)}},
		FinalJob{ID: "s2", State: "succeeded", Attempts: []FinalAttempt{shareAttempt(1, 11, "succeeded", 61440, gA)}}), shareOpt)
	if r.Valid || r.Stats["overcommits"] != 1 || !strings.Contains(strings.Join(r.Errors, "\n"), "GPU "+gA+" over-committed: shares of 122880 MiB") {
		t.Fatalf("two 60 GiB shares on an 80 GiB device at once: %s", r)
	}
	mixed := []GPURecord{
		shareRec("start", "s1", 1, 10, 1*s, 1024, gA),
		gpuRec("start", "w1", 1, 11, "n1", 2*s, gA),
		shareRec("end", "s1", 1, 10, 3*s, 1024, gA),
		gpuRec("end", "w1", 1, 11, "n1", 4*s, gA),
	}
	r = GPU(mixed, final(
		FinalJob{ID: "s1", State: "succeeded", Attempts: []FinalAttempt{shareAttempt(1, 10, "succeeded", 1024, gA)}},
		FinalJob{ID: "w1", State: "succeeded", Attempts: []FinalAttempt{gpuAttempt(1, 11, "n1", "succeeded", gA)}}), shareOpt)
	if r.Valid || r.Stats["whole_share_overlaps"] != 1 || !strings.Contains(r.Errors[0], "held whole and by a share at once") {
		t.Fatalf("a whole holder beside a share holder: %s", r)
	}
	// The env's share differs from the attempt's record.
	wrong := []GPURecord{shareRec("start", "s1", 1, 10, 1*s, 2048, gA), shareRec("end", "s1", 1, 10, 2*s, 2048, gA)}
	r = GPU(wrong, final(FinalJob{ID: "s1", State: "succeeded", Attempts: []FinalAttempt{shareAttempt(1, 10, "succeeded", 1024, gA)}}), shareOpt)
	if r.Valid || r.Stats["mismatched"] != 1 {
		t.Fatalf("FOREMAN_GPU_MEMORY_MIB 2048 for a 1024 MiB share: %s", r)
	}
	// A share execution whose attempt says whole GPUs, and a share job run with two devices.
	r = GPU(wrong, final(FinalJob{ID: "s1", State: "succeeded", Attempts: []FinalAttempt{gpuAttempt(1, 10, "n1", "succeeded", gA)}}), shareOpt)
	if r.Valid || r.Stats["mismatched"] != 1 {
		t.Fatalf("a share run for a whole-GPU attempt: %s", r)
	}
	opt := shareOpt
	opt.RequestedShare = map[string]int64{"s1": 1024}
	two := []GPURecord{{Kind: "start", Job: "s1", Attempt: 1, Token: 10, Node: "n1", UUIDs: []string{gA, gB}, ShareMiB: 1024, At: s}}
	if r := GPU(two, final(FinalJob{ID: "s1"}), opt); r.Valid || r.Stats["wrong_count"] != 1 {
		t.Fatalf("a share of two devices: %s", r)
	}
}

// A share killed with no record, whose tail within the tick bound would
// over-commit the device, is noted, not failed.
func TestGPUShareOpenTailIsPossibleOnly(t *testing.T) {
	s := int64(time.Second)
	recs := []GPURecord{
		shareRec("start", "s1", 1, 10, 1*s, 61440, gA),
		shareRec("tick", "s1", 1, 10, 2*s, 61440, gA), // then fenced
		shareRec("start", "s2", 1, 11, 2*s+int64(300*time.Millisecond), 61440, gA),
		shareRec("end", "s2", 1, 11, 4*s, 61440, gA),
	}
	final := []FinalJob{
		{ID: "s1", State: "failed", Attempts: []FinalAttempt{shareAttempt(1, 10, "killed", 61440, gA)}},
		{ID: "s2", State: "succeeded", Attempts: []FinalAttempt{shareAttempt(1, 11, "succeeded", 61440, gA)}},
	}
	r := GPU(recs, final, shareOpt)
	if !r.Valid || r.Stats["possible_overcommits"] != 1 || r.Stats["overcommits"] != 0 {
		t.Fatalf("want a pass with one possible over-commit: %s", r)
	}
}

func TestParseGPURecordsWithShare(t *testing.T) {
	in := "start j1 1 10 n1 " + gA + " 20480 5\ntick j2 1 11 n1 " + gB + " - 6\nstart j3 1 12 n1 " + gA + " x 7\n"
	recs, torn, err := ParseGPURecords(strings.NewReader(in))
	if err != nil || torn != 1 || len(recs) != 2 || recs[0].ShareMiB != 20480 || recs[0].At != 5 || recs[1].ShareMiB != 0 {
		t.Fatalf("recs %+v torn %d err %v", recs, torn, err)
	}
}
