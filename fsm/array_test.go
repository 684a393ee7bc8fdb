package fsm

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestParseArray(t *testing.T) {
	for in, want := range map[string]ArraySpec{
		"0-999":      {Start: 0, End: 999},
		"0-15%4":     {Start: 0, End: 15, Parallel: 4},
		"1-9:2":      {Start: 1, End: 9, Step: 2},
		"10-20:5%2":  {Start: 10, End: 20, Step: 5, Parallel: 2},
		"7":          {Start: 7, End: 7},
		"0-99999":    {Start: 0, End: 99999},
		"0-199998:2": {Start: 0, End: 199998, Step: 2},
	} {
		got, err := ParseArray(in)
		if err != nil || got != want {
			t.Errorf("ParseArray(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for in, why := range map[string]string{
		"5-1":        "end is before the start",
		"0-10000000": "at most 100000",
		"0-9%0":      "1 or more",
		"0-9:0":      "1 or more",
		"-1-5":       "want START-END",
		"a-b":        "want START-END",
		"0-9%x":      "must be a number",
		"":           "want START-END",
	} {
		if _, err := ParseArray(in); err == nil || !strings.Contains(err.Error(), why) {
			t.Errorf("ParseArray(%q): %v, want %q", in, err, why)
		}
	}
	a := ArraySpec{Start: 10, End: 20, Step: 5}
	if a.Size() != 3 || a.Index(2) != 20 || a.Position(15) != 1 || a.Position(12) != -1 || a.Position(25) != -1 {
		t.Fatalf("%+v: size %d index(2) %d", a, a.Size(), a.Index(2))
	}
}

// submitArray submits array job id over indexes.
func (h *harness) submitArray(id, indexes string) {
	h.t.Helper()
	a, err := ParseArray(indexes)
	if err != nil {
		h.t.Fatal(err)
	}
	h.must(CmdSubmitJobs, SubmitJobs{Jobs: []NewJob{{ID: id, Spec: JobSpec{
		Command: []string{"true"}, MaxAttempts: 1, Env: map[string]string{"A": "1"}, Array: &a,
		Notify: []Webhook{{URL: "http://127.0.0.1:9/hook"}},
	}}}})
}

// tasks lists the made tasks of array id with their states.
func (h *harness) tasks(id string) map[string]JobState {
	h.t.Helper()
	out := map[string]JobState{}
	err := h.f.View(func(tx *Tx) error {
		c := tx.tx.Bucket(bucketJobs).Cursor()
		p := []byte(TaskPrefix(id))
		for k, v := c.Seek(p); k != nil && hasPrefix(k, p); k, v = c.Next() {
			j, _, err := decodeStoredJob(v)
			if err != nil {
				return err
			}
			out[string(k)] = j.State
		}
		return nil
	})
	if err != nil {
		h.t.Fatal(err)
	}
	return out
}

// An array is one record and one entry; its tasks are made as earlier
// ones leave the queue, within %PARALLEL, each a job with its index in
// its environment; the array's state follows its tasks'.
func TestArrayRunsItsTasks(t *testing.T) {
	h := newHarness(t)
	h.addNode("n1")
	h.submitArray("A", "0-8:2%2")
	arr := h.job("A")
	if arr.State != JobRunning || arr.Array.Size != 5 || arr.Array.Live != 2 || arr.Array.Queued != 2 || arr.Array.Next != 2 {
		t.Fatalf("array after submit: %s %+v", arr.State, arr.Array)
	}
	if got := h.tasks("A"); len(got) != 2 || got["A.0"] != JobQueued || got["A.2"] != JobQueued {
		t.Fatalf("tasks after submit: %v", got)
	}
	task := h.job("A.2")
	if task.ArrayTask == nil || task.ArrayTask.Array != "A" || task.ArrayTask.Index != 2 {
		t.Fatalf("task link %+v", task.ArrayTask)
	}
	env := task.Spec.Env
	if env[EnvArrayIndex] != "2" || env[EnvArraySize] != "5" || env[EnvArrayID] != "A" || env["A"] != "1" {
		t.Fatalf("task env %v", env)
	}
	if task.Spec.Array != nil || len(task.Spec.Notify) != 0 {
		t.Fatalf("task spec keeps the array's own fields: %+v", task.Spec)
	}
	h.finish("A.0", true)
	if got := h.tasks("A"); len(got) != 3 || got["A.4"] != JobQueued {
		t.Fatalf("a finished task is replaced within %%2: %v", got)
	}
	h.finish("A.2", false)
	h.finish("A.4", true)
	h.finish("A.6", true)
	h.wantJob("A", JobRunning, "")
	h.finish("A.8", true)
	h.wantJob("A", JobFailed, "1 of 5 tasks failed")
	if s := h.job("A").Array; s.Succeeded != 4 || s.Failed != 1 || s.Live != 0 || s.Queued != 0 {
		t.Fatalf("counts %+v", s)
	}
	checkIndexes(t, h.f)

	// Retrying the array runs its failed task again.
	h.must(CmdRetryJob, RetryJob{JobID: "A"})
	h.wantJob("A", JobRunning, "")
	h.wantJob("A.2", JobQueued, "")
	h.finish("A.2", true)
	h.wantJob("A", JobSucceeded, "")
	checkIndexes(t, h.f)
}

// Without %PARALLEL at most ArrayQueueAhead tasks wait in the queue; each
// placement makes the next.
func TestArrayQueuesAhead(t *testing.T) {
	h := newHarness(t)
	h.addNode("n1")
	h.submitArray("B", fmt.Sprintf("0-%d", ArrayQueueAhead+9))
	if s := h.job("B").Array; s.Queued != ArrayQueueAhead || s.Next != ArrayQueueAhead {
		t.Fatalf("after submit %+v", s)
	}
	h.place("B.0", "n1")
	if s := h.job("B").Array; s.Queued != ArrayQueueAhead || s.Live != ArrayQueueAhead+1 || s.Next != ArrayQueueAhead+1 {
		t.Fatalf("after a placement %+v", s)
	}
	h.wantJob(TaskID("B", ArrayQueueAhead), JobQueued, "")
}

// Cancelling some indexes cancels the made ones and keeps the others from
// being made; cancelling the array stops it; retry brings both back.
func TestArrayCancel(t *testing.T) {
	h := newHarness(t)
	h.addNode("n1")
	h.submitArray("C", "0-9%3")
	h.place("C.1", "n1")
	h.must(CmdCancelJob, CancelJob{JobID: "C", Indexes: []int{0, 5, 6}})
	h.wantJob("C.0", JobCancelled, "")
	if s := h.job("C").Array; s.Cancelled != 3 || len(s.Excluded) != 2 || s.Live != 3 || s.Next != 4 {
		t.Fatalf("after cancelling indexes %+v", s)
	}
	if r := h.apply(CmdCancelJob, CancelJob{JobID: "C", Indexes: []int{10}}); !errors.Is(r.Err, ErrBadCommand) {
		t.Fatalf("index out of range: %v", r.Err)
	}
	h.must(CmdCancelJob, CancelJob{JobID: "C", Reason: "by me"})
	// The running task is asked to stop; the queued ones end now.
	arr := h.job("C")
	if arr.State != JobRunning || !arr.Array.Stopped || arr.Array.Live != 1 {
		t.Fatalf("cancelling: %s %+v", arr.State, arr.Array)
	}
	at := h.attempt("C.1", 1)
	h.must(CmdReport, ReportAttempt{JobID: "C.1", Attempt: 1, FencingToken: at.FencingToken, Node: "n1", State: AttemptKilled, Reason: ReasonCancelled})
	h.wantJob("C", JobCancelled, "by me")
	if s := h.job("C").Array; s.Cancelled != 10 || s.Live != 0 {
		t.Fatalf("cancelled %+v", s)
	}
	if r := h.apply(CmdRetryJob, RetryJob{JobID: "C", Indexes: []int{9}}); !errors.Is(r.Err, ErrConflict) {
		t.Fatalf("retry of an index never made: %v", r.Err)
	}
	h.must(CmdRetryJob, RetryJob{JobID: "C"})
	arr = h.job("C")
	if arr.State != JobRunning || arr.Array.Stopped || arr.Array.Live != 3 || arr.Array.Cancelled != 3 {
		t.Fatalf("retried: %s %+v", arr.State, arr.Array)
	}
	checkIndexes(t, h.f)
	// The retry runs every index that did not succeed again, in order and
	// within %3; the excluded ones (5, 6, then 9) stay cancelled.
	h.must(CmdCancelJob, CancelJob{JobID: "C", Indexes: []int{9}})
	for _, i := range []int{0, 1, 2, 3, 4, 7, 8} {
		if s := h.job("C").Array; s.Live > 3 {
			t.Fatalf("more than %%3 live: %+v", s)
		}
		h.finish(TaskID("C", i), true)
	}
	arr = h.job("C")
	if arr.State != JobCancelled || arr.Array.Succeeded != 7 || arr.Array.Cancelled != 3 || arr.Array.Live != 0 {
		t.Fatalf("end: %s %+v %v", arr.State, arr.Array, h.tasks("C"))
	}
	h.must(CmdRetryJob, RetryJob{JobID: "C", Indexes: []int{5, 6, 9}})
	for _, i := range []int{5, 6, 9} {
		h.finish(TaskID("C", i), true)
	}
	if arr = h.job("C"); arr.State != JobSucceeded || arr.Array.Succeeded != 10 || len(arr.Array.Excluded) != 0 {
		t.Fatalf("excluded indexes retried: %s %+v", arr.State, arr.Array)
	}
	checkIndexes(t, h.f)
}

// A workflow's retry runs its failed array again, every index that did not
// succeed; a task collected by GC is left as it ended.
func TestArrayRerunAndGC(t *testing.T) {
	h := newHarness(t)
	h.addNode("n1")
	a := ArraySpec{Start: 0, End: 3}
	h.must(CmdSubmitWorkflow, SubmitWorkflow{ID: "W", Name: "w", Jobs: []NewJob{
		{ID: "W-arr", Spec: JobSpec{Name: "arr", Command: []string{"true"}, MaxAttempts: 1, Array: &a}},
	}})
	for i, ok := range []bool{true, false, true, true} {
		h.finish(TaskID("W-arr", i), ok)
	}
	h.wantJob("W-arr", JobFailed, "1 of 4 tasks failed")
	h.must(CmdRetryWorkflow, RetryWorkflow{ID: "W"})
	h.wantJob("W-arr", JobRunning, "")
	if ts := h.tasks("W-arr"); ts["W-arr.1"] != JobQueued || ts["W-arr.0"] != JobSucceeded {
		t.Fatalf("after the workflow's retry: %v", ts)
	}
	h.finish("W-arr.1", true)
	h.wantJob("W-arr", JobSucceeded, "")

	// GC collects the tasks that ended an hour before their array's end.
	h.submitArray("X", "0-3")
	h.finish("X.0", false)
	h.now = h.now.Add(time.Hour)
	for i := 1; i < 4; i++ {
		h.finish(TaskID("X", i), true)
	}
	h.wantJob("X", JobFailed, "1 of 4 tasks failed")
	h.must(CmdGC, GC{Before: h.now.Add(-time.Minute)})
	if ts := h.tasks("X"); len(ts) != 3 {
		t.Fatalf("after GC: %v", ts)
	}
	if r := h.apply(CmdRetryJob, RetryJob{JobID: "X", Indexes: []int{0}}); !errors.Is(r.Err, ErrConflict) || !strings.Contains(r.Err.Error(), "collected") {
		t.Fatalf("retry of a collected task: %v", r.Err)
	}
	h.must(CmdRetryJob, RetryJob{JobID: "X"})
	h.wantJob("X", JobFailed, "1 of 4 tasks failed") // nothing left to rerun
	if s := h.job("X").Array; s.Succeeded != 3 || s.Failed != 1 || s.Live != 0 {
		t.Fatalf("a retry with the failed task collected: %+v", s)
	}
	checkIndexes(t, h.f)
}

// An array waits for its parents like any job and starts when released;
// its children wait for the whole array.
func TestArrayDependencies(t *testing.T) {
	h := newHarness(t)
	h.addNode("n1")
	h.submit("P")
	a := ArraySpec{Start: 0, End: 1}
	h.must(CmdSubmitJobs, SubmitJobs{Jobs: []NewJob{{ID: "D", Spec: JobSpec{Command: []string{"true"}, MaxAttempts: 1, Array: &a, DependsOn: []string{"P"}}}}})
	h.wantJob("D", JobWaiting, "")
	if r := h.submitAfter("E", "D:ok"); r.Err != nil {
		t.Fatal(r.Err)
	}
	if len(h.tasks("D")) != 0 {
		t.Fatal("tasks made before the array was released")
	}
	h.finish("P", true)
	h.wantJob("D", JobRunning, "")
	h.finish("D.0", true)
	h.wantJob("E", JobWaiting, "")
	h.finish("D.1", true)
	h.wantJob("D", JobSucceeded, "")
	h.wantJob("E", JobQueued, "")
	checkIndexes(t, h.f)
}

func TestArrayBadInput(t *testing.T) {
	h := newHarness(t)
	for _, bad := range []ArraySpec{{Start: 5, End: 1}, {Start: 0, End: MaxArraySize}, {Start: 0, End: 3, Parallel: -1}} {
		r := h.apply(CmdSubmitJobs, SubmitJobs{Jobs: []NewJob{{ID: "X", Spec: JobSpec{Command: []string{"true"}, Array: &bad}}}})
		if !errors.Is(r.Err, ErrBadCommand) || !strings.Contains(r.Err.Error(), "jobs[0].spec.array") {
			t.Errorf("%+v: %v", bad, r.Err)
		}
	}
	a := ArraySpec{Start: 0, End: 3}
	r := h.apply(CmdSubmitJobs, SubmitJobs{Jobs: []NewJob{{ID: "X", Spec: JobSpec{Command: []string{"true"}, Array: &a, Gang: &GangSpec{Size: 2}}}}})
	if !errors.Is(r.Err, ErrBadCommand) {
		t.Errorf("gang array: %v", r.Err)
	}
	h.submit("J")
	if r := h.apply(CmdCancelJob, CancelJob{JobID: "J", Indexes: []int{1}}); !errors.Is(r.Err, ErrBadCommand) {
		t.Errorf("indexes of a plain job: %v", r.Err)
	}
	if n := len(h.tasks("X")); n != 0 {
		t.Fatalf("a refused array made %d tasks", n)
	}
}

// The job list shows an array as one job, newest first as ever, and lists
// its tasks when asked; with a state filter too.
func TestListJobsShowsArraysAsOne(t *testing.T) {
	h := newHarness(t)
	h.addNode("n1")
	h.submit("01A")
	h.submitArray("01B", "0-11")
	h.submit("01C")
	ids := func(q JobQuery) (out []string) {
		for {
			jobs, next, err := h.f.ListJobs(q)
			if err != nil {
				t.Fatal(err)
			}
			for _, j := range jobs {
				out = append(out, j.ID)
			}
			if next == "" {
				return out
			}
			q.Cursor = next
		}
	}
	if got := fmt.Sprint(ids(JobQuery{Limit: 1})); got != "[01C 01B 01A]" {
		t.Fatalf("list: %s", got)
	}
	if got := fmt.Sprint(ids(JobQuery{State: JobQueued, Limit: 2})); got != "[01C 01A]" {
		t.Fatalf("queued: %s", got)
	}
	got := ids(JobQuery{Array: "01B", Limit: 5})
	if len(got) != 12 || got[0] != "01B.0" || got[10] != "01B.10" || got[11] != "01B.11" {
		t.Fatalf("tasks: %v", got)
	}
	if got := ids(JobQuery{Array: "01B", State: JobQueued}); len(got) != 12 {
		t.Fatalf("queued tasks: %v", got)
	}
}

func TestIndexes(t *testing.T) {
	got, err := ParseIndexes("9,3, 7-8,8")
	if err != nil || fmt.Sprint(got) != "[3 7 8 9]" || FormatIndexes(got) != "3,7-9" {
		t.Fatalf("%v %v %q", got, err, FormatIndexes(got))
	}
	for _, bad := range []string{"", "a", "5-1", "-1", "0-100000"} {
		if _, err := ParseIndexes(bad); err == nil {
			t.Errorf("ParseIndexes(%q): no error", bad)
		}
	}
	h := newHarness(t)
	h.addNode("n1")
	h.submitArray("F", "0-11")
	for _, i := range []int{2, 10, 11} {
		h.finish(TaskID("F", i), false)
	}
	var failed []int
	_ = h.f.View(func(tx *Tx) error { failed = tx.ArrayIndexes("F", JobFailed); return nil })
	if FormatIndexes(failed) != "2,10-11" {
		t.Fatalf("failed indexes %v", failed)
	}
}
