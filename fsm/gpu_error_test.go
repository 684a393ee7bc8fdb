package fsm

import (
	"strings"
	"testing"
)

func attemptEvents(sub *Subscription, name string) []string {
	var out []string
	for len(sub.C()) > 0 {
		e := <-sub.C()
		if e.Type == EventAttempt && e.Name == name {
			out = append(out, e.JobID+" "+e.Reason)
		}
	}
	return out
}

// TestGPUErrorPolicy: a device under two running jobs turns unhealthy; the
// keep job is left alone with an event, the requeue job is asked to stop
// and, once killed, is queued again without using up an attempt.
func TestGPUErrorPolicy(t *testing.T) {
	h := newHarness(t)
	h.addNode("n1")
	g := testGPUs(3)
	h.must(CmdNodeGPUs, NodeGPUs{Name: "n1", GPUs: g})
	h.must(CmdSubmitJobs, SubmitJobs{Jobs: []NewJob{
		{ID: "K", Spec: JobSpec{Command: []string{"true"}}},
		{ID: "R", Spec: JobSpec{Command: []string{"true"}, MaxAttempts: 1, OnGPUError: GPUErrorRequeue}},
		{ID: "O", Spec: JobSpec{Command: []string{"true"}, OnGPUError: GPUErrorRequeue}},
	}})
	r := h.must(CmdPlace, Place{Placements: []Placement{
		{JobID: "K", Node: "n1", GPUs: []string{g[0].UUID}},
		{JobID: "R", Node: "n1", GPUs: []string{g[1].UUID}},
		{JobID: "O", Node: "n1", GPUs: []string{g[2].UUID}},
	}})
	tok := r.Index
	sub := h.f.Subscribe(64)
	defer sub.Close()

	bad := testGPUs(3)
	bad[0].Health = "xid 79: GPU has fallen off the bus"
	bad[1].Health = "xid 48: DBE"
	h.must(CmdNodeGPUs, NodeGPUs{Name: "n1", GPUs: bad})

	got := attemptEvents(sub, NameGPUError)
	want := []string{
		"K GPU-aaaaaaaa (index 0): xid 79: GPU has fallen off the bus; on_gpu_error keep: left running",
		"R GPU-bbbbbbbb (index 1): xid 48: DBE; on_gpu_error requeue: stopping it",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("gpu_error events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if at := h.attempt("K", 1); at.CancelRequested != "" {
		t.Fatalf("keep job asked to stop: %q", at.CancelRequested)
	}
	if at := h.attempt("O", 1); at.CancelRequested != "" {
		t.Fatalf("job on a healthy device asked to stop: %q", at.CancelRequested)
	}
	stop := h.attempt("R", 1).CancelRequested
	if stop != "gpu_error: GPU-bbbbbbbb (index 1): xid 48: DBE" {
		t.Fatalf("requeue job's stop request %q", stop)
	}
	// The same record again changes nothing (no second stop, no event).
	h.must(CmdNodeGPUs, NodeGPUs{Name: "n1", GPUs: bad})
	if got := attemptEvents(sub, NameGPUError); len(got) != 0 {
		t.Fatalf("repeated record: %v", got)
	}

	// The supervisor reports the kill with the reason it was sent.
	h.must(CmdReport, ReportAttempt{JobID: "R", Attempt: 1, FencingToken: tok, Node: "n1", State: AttemptKilled, Reason: stop})
	at, j := h.attempt("R", 1), h.job("R")
	if at.Counted || j.CountedAttempts != 0 || j.State != JobQueued {
		t.Fatalf("after the kill: attempt counted %v, job %s counted %d (max_attempts 1)", at.Counted, j.State, j.CountedAttempts)
	}
	if !strings.Contains(j.Reason, "xid 48") {
		t.Fatalf("job reason %q does not name the XID", j.Reason)
	}
	// The leader may not put it back on the unhealthy device.
	r2 := h.must(CmdPlace, Place{Placements: []Placement{{JobID: "R", Node: "n1", GPUs: []string{g[1].UUID}}}})
	if len(r2.Skipped) != 1 {
		t.Fatalf("placed on the unhealthy device: %+v", r2)
	}
}

// TestGPUErrorGang: one task's device fails; the task is stopped, its end
// stops the siblings, and the gang is queued again with no attempt used.
func TestGPUErrorGang(t *testing.T) {
	h := newHarness(t)
	for _, n := range []string{"a", "b"} {
		h.must(CmdUpsertNode, UpsertNode{Node: Node{Name: n, HTTPAddr: "10.0.0.1:7070", Capacity: Resources{CPU: 4000, MemoryMB: 8192}, GPUs: testGPUs(1)}})
	}
	h.must(CmdSubmitJobs, SubmitJobs{Jobs: []NewJob{{ID: "g", Spec: JobSpec{Command: []string{"true"}, MaxAttempts: 1, OnGPUError: GPUErrorRequeue, Gang: &GangSpec{Size: 2}}}}})
	uuid := testGPUs(1)[0].UUID
	r := h.must(CmdPlace, Place{Placements: []Placement{{JobID: "g", Node: "a", Tasks: []TaskSlot{
		{Node: "a", Port: 31000, GPUs: []string{uuid}}, {Node: "b", Port: 31000, GPUs: []string{uuid}}}}}})
	if len(r.Skipped) > 0 {
		t.Fatalf("skipped %v", r.Skipped)
	}
	tok := r.Index
	bad := testGPUs(1)
	bad[0].Health = "xid 79"
	h.must(CmdNodeGPUs, NodeGPUs{Name: "b", GPUs: bad})
	stop := h.attempt("g", 2).CancelRequested
	if !IsGPUErrorStop(stop) || h.attempt("g", 1).CancelRequested != "" {
		t.Fatalf("stop requests: task 0 %q, task 1 %q", h.attempt("g", 1).CancelRequested, stop)
	}
	h.must(CmdReport, ReportAttempt{JobID: "g", Attempt: 2, FencingToken: tok, Node: "b", State: AttemptKilled, Reason: stop})
	if at := h.attempt("g", 1); at.CancelRequested != ReasonGang {
		t.Fatalf("sibling not stopped: %q", at.CancelRequested)
	}
	h.must(CmdReport, ReportAttempt{JobID: "g", Attempt: 1, FencingToken: tok, Node: "a", State: AttemptKilled})
	j := h.job("g")
	if j.State != JobQueued || j.CountedAttempts != 0 || !strings.Contains(j.Reason, "xid 79") {
		t.Fatalf("gang after the stop: %s counted %d reason %q", j.State, j.CountedAttempts, j.Reason)
	}
}

// TestResetGPUs: an operator's reset names the node's unhealthy devices
// (or the ones given) in its record for the agent, with an event; bad
// names change nothing; the agent's own upsert keeps the request.
func TestResetGPUs(t *testing.T) {
	h := newHarness(t)
	h.addNode("n1")
	g := testGPUs(3)
	g[1].Health = "xid 79"
	g[2].Health = "xid 48"
	h.must(CmdNodeGPUs, NodeGPUs{Name: "n1", GPUs: g})
	before := h.hash()
	for name, p := range map[string]ResetGPUs{
		"unknown node": {Name: "nope"},
		"unknown uuid": {Name: "n1", UUIDs: []string{g[0].UUID, "GPU-nope"}},
		"twice":        {Name: "n1", UUIDs: []string{g[0].UUID, g[0].UUID}},
	} {
		r := h.apply(CmdResetGPUs, p)
		if r.Err == nil {
			t.Errorf("%s: applied", name)
		}
		if name == "unknown uuid" && !strings.Contains(r.Err.Error(), `uuids[1]: node n1 has no GPU "GPU-nope"`) {
			t.Errorf("unknown uuid: %v", r.Err)
		}
	}
	if h.hash() != before {
		t.Fatal("a refused reset changed the state")
	}
	sub := h.f.Subscribe(16)
	defer sub.Close()
	r := h.must(CmdResetGPUs, ResetGPUs{Name: "n1", By: "token ops"})
	gr := h.node("n1").GPUReset
	if gr == nil || gr.Index != r.Index || strings.Join(gr.UUIDs, ",") != g[1].UUID+","+g[2].UUID || gr.By != "token ops" {
		t.Fatalf("reset record %+v", gr)
	}
	want := "node.gpu_reset health reset of GPU-bbbbbbbb (index 1), GPU-cccccccc (index 2) by token ops"
	if got := nodeEvents(sub); len(got) != 2 || got[1] != want {
		t.Fatalf("events %q, want [node.updated …, %q]", got, want)
	}
	// The record's health is the node's to change: untouched.
	if h.node("n1").GPUs[1].Health != "xid 79" {
		t.Fatal("the reset changed the record's health itself")
	}
	h.must(CmdUpsertNode, UpsertNode{Node: Node{Name: "n1", Capacity: Resources{CPU: 4000, MemoryMB: 8192}}, KeepGPUs: true})
	if got := h.node("n1").GPUReset; got == nil || got.Index != r.Index {
		t.Fatalf("upsert lost the reset: %+v", got)
	}
}
