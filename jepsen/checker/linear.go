package checker

import (
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/foreman-sched/foreman/jepsen/history"
)

// jobInput is one op on one job: the submit that creates it or a read.
type jobInput struct {
	job  string
	kind string
}

// jobOutput is what a read saw.
type jobOutput struct {
	notFound bool
	state    string
	index    uint64 // modify index, 0 = unknown
}

// jobState is the model's view of one job. The cluster moves a job on its
// own (placement, completion), so the model is a register whose writes are
// unobserved: a read may see any state reachable from the current one at a
// higher modify index, and the same state at the same index.
type jobState struct {
	exists bool
	state  string
	index  uint64
}

// reachable reports whether a job in state a may later be seen in state b:
// terminal states are final, and only a never-started job can be waiting.
func reachable(a, b string) bool {
	if a == "" || a == b {
		return true
	}
	if Terminal(a) || b == "waiting" {
		return false
	}
	return true
}

// JobModel is the per-job porcupine model, partitioned by job ID.
var JobModel = porcupine.Model{
	Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
		by := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range h {
			j := op.Input.(jobInput).job
			if _, ok := by[j]; !ok {
				keys = append(keys, j)
			}
			by[j] = append(by[j], op)
		}
		out := make([][]porcupine.Operation, 0, len(keys))
		for _, k := range keys {
			out = append(out, by[k])
		}
		return out
	},
	Init: func() any { return jobState{} },
	Step: func(s, in, out any) (bool, any) {
		st, i := s.(jobState), in.(jobInput)
		if i.kind == history.Submit {
			if st.exists {
				return true, st // a retried submit of the same key
			}
			return true, jobState{exists: true}
		}
		o := out.(jobOutput)
		if o.notFound {
			return !st.exists, st
		}
		if !reachable(st.state, o.state) {
			return false, st
		}
		switch {
		case o.index == 0 || st.index == 0:
			// Index unknown: only the state order can be checked.
		case o.index < st.index:
			return false, st
		case o.index == st.index && o.state != st.state:
			return false, st
		}
		return true, jobState{exists: true, state: o.state, index: max(o.index, st.index)}
	},
	DescribeOperation: func(in, out any) string {
		i := in.(jobInput)
		if i.kind == history.Submit {
			return "submit " + short(i.job)
		}
		o := out.(jobOutput)
		if o.notFound {
			return "read " + short(i.job) + " -> 404"
		}
		return fmt.Sprintf("read %s -> %s@%d", short(i.job), o.state, o.index)
	},
	DescribeState: func(s any) string {
		st := s.(jobState)
		if !st.exists {
			return "absent"
		}
		return fmt.Sprintf("%s@%d", st.state, st.index)
	},
}

func short(id string) string {
	if len(id) > 8 {
		return "…" + id[len(id)-8:]
	}
	return id
}

// LinearOptions tunes the read checker.
type LinearOptions struct {
	Timeout time.Duration
	// HTMLPath receives porcupine's visualisation when the check fails.
	HTMLPath string
	Events   []history.Event
}

// Reads checks that consistent job reads are linearizable. A job's submit
// spans from the first invocation of its key to its acknowledgement (a
// retried key may have committed on the first try); unacknowledged submits
// never return (Return = MaxInt64). Indeterminate reads are dropped: they
// change nothing.
func Reads(ops []history.Op, opt LinearOptions) Result {
	r := Result{Name: "linearizable-reads", Valid: true, Stats: map[string]int{}}
	firstCall := map[string]int64{}
	for _, op := range ops {
		if op.Kind == history.Submit {
			if c, ok := firstCall[op.Key]; !ok || op.Call < c {
				firstCall[op.Key] = op.Call
			}
		}
	}
	var h []porcupine.Operation
	seen := map[string]bool{}
	for _, op := range ops {
		switch {
		case op.Kind == history.Submit && op.Outcome == history.OK && !seen[op.JobID]:
			seen[op.JobID] = true
			h = append(h, porcupine.Operation{ClientId: op.Process, Input: jobInput{op.JobID, history.Submit},
				Call: firstCall[op.Key], Output: jobOutput{}, Return: op.Return})
		case op.Kind == history.Read && op.Outcome == history.OK:
			r.Stats["reads"]++
			h = append(h, porcupine.Operation{ClientId: op.Process, Input: jobInput{op.JobID, history.Read},
				Call: op.Call, Output: jobOutput{op.NotFound, op.State, op.ModifyIndex}, Return: op.Return})
		}
	}
	// Reads of a job whose submit was never acknowledged in this history
	// cannot be placed; give them a submit that may linearize anywhere.
	for _, op := range h {
		in := op.Input.(jobInput)
		if !seen[in.job] {
			seen[in.job] = true
			h = append(h, porcupine.Operation{Input: jobInput{in.job, history.Submit}, Call: 0, Output: jobOutput{}, Return: math.MaxInt64})
		}
	}
	sort.SliceStable(h, func(i, j int) bool { return h[i].Call < h[j].Call })
	r.Stats["jobs"] = len(seen)
	if opt.Timeout == 0 {
		opt.Timeout = time.Minute
	}
	res, info := porcupine.CheckOperationsVerbose(JobModel, h, opt.Timeout)
	switch res {
	case porcupine.Illegal:
		r.errorf("porcupine: reads are not linearizable")
		if opt.HTMLPath != "" {
			var ann []porcupine.Annotation
			for _, e := range opt.Events {
				ann = append(ann, porcupine.Annotation{Tag: "nemesis", Start: e.Start, End: e.End,
					Description: e.Name, Details: e.Info, BackgroundColor: "#ffd6d6"})
			}
			info.AddAnnotations(ann)
			if err := porcupine.VisualizePath(JobModel, info, opt.HTMLPath); err != nil {
				r.errorf("visualise: %v", err)
			} else {
				r.notef("visualisation: %s", opt.HTMLPath)
			}
		}
	case porcupine.Unknown:
		r.notef("porcupine timed out after %v: no violation found, result unknown", opt.Timeout)
		r.Stats["unknown"] = 1
	}
	return r
}
