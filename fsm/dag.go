package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
)

// Dependencies (DESIGN.md invariant 4: a child never starts before its
// parents reach the states its condition needs).
//
// A job with Spec.DependsOn starts waiting with Deps set. Its parents'
// outcomes are counted on the child (Deps), so a parent's finish costs
// one read and one write per child whatever the fan-in. The counts change
// in saveJob, the one place every transition goes through: when a job
// moves between outcome classes (pending, succeeded, failed, other
// terminal), each child in job_children is re-counted and, while it is
// still undecided, its condition is evaluated in the same transaction. So
// a release (waiting → queued) costs no raft round trip of its own and the
// scheduler sees the queued child in the wake-up the parent's finish
// causes; a skip (terminal) cascades to the grandchildren the same way.

// Condition says which parent outcomes let a job run.
type Condition string

const (
	// ConditionSuccess (the default): every parent succeeded.
	ConditionSuccess Condition = "success"
	// ConditionFailure: at least one parent failed (state failed; a
	// cancelled or skipped parent is not a failure).
	ConditionFailure Condition = "failure"
	// ConditionAlways: every parent is terminal, whatever its state.
	ConditionAlways Condition = "always"
	// ConditionOneSuccess: at least one parent succeeded.
	ConditionOneSuccess Condition = "one_success"
)

// Conditions lists the valid conditions, for messages.
var Conditions = []Condition{ConditionSuccess, ConditionFailure, ConditionAlways, ConditionOneSuccess}

// Valid reports whether c is a known condition ("" is success).
func (c Condition) Valid() bool {
	switch c {
	case "", ConditionSuccess, ConditionFailure, ConditionAlways, ConditionOneSuccess:
		return true
	}
	return false
}

// Decisions recorded in Deps.Decision.
const (
	DecisionReleased  = "released"
	DecisionSkipped   = "skipped"
	DecisionCancelled = "cancelled" // an After requirement can no longer be met (after.go)
)

// Deps is a dependent job's view of its parents.
type Deps struct {
	Parents   int `json:"parents"`             // len(Spec.DependsOn)
	Succeeded int `json:"succeeded,omitempty"` // parents now succeeded
	Failed    int `json:"failed,omitempty"`    // parents now failed
	Terminal  int `json:"terminal,omitempty"`  // parents now in any terminal state
	// Decision is "" while the condition is open, then released or
	// skipped; DecidedBy is the parent whose outcome decided it (the
	// edge that released or skipped the job).
	Decision  string `json:"decision,omitempty"`
	DecidedBy string `json:"decided_by,omitempty"`
}

// outcome is the class of a job state that a child's condition sees.
type outcome uint8

const (
	outcomePending outcome = iota
	outcomeSucceeded
	outcomeFailed
	outcomeOther // cancelled or skipped
)

func outcomeOf(s JobState) outcome {
	switch s {
	case JobSucceeded:
		return outcomeSucceeded
	case JobFailed:
		return outcomeFailed
	case JobCancelled, JobSkipped:
		return outcomeOther
	}
	return outcomePending // "" (a new job) and every live state
}

// count moves one parent from outcome from to outcome to.
func (d *Deps) count(from, to outcome) {
	add := func(o outcome, n int) {
		switch o {
		case outcomeSucceeded:
			d.Succeeded += n
		case outcomeFailed:
			d.Failed += n
		}
		if o != outcomePending {
			d.Terminal += n
		}
	}
	add(from, -1)
	add(to, 1)
}

// Decide says what the parents' counts mean for a job with condition c:
// DecisionReleased, DecisionSkipped, or "" (not yet known). It is monotone:
// a parent finishing never turns a decision back, and one returning to
// pending (a retry) never makes an open condition decided.
func Decide(c Condition, d Deps) string {
	allDone := d.Terminal >= d.Parents
	switch c {
	case ConditionFailure:
		if d.Failed > 0 {
			return DecisionReleased
		}
		if allDone {
			return DecisionSkipped
		}
	case ConditionAlways:
		if allDone {
			return DecisionReleased
		}
	case ConditionOneSuccess:
		if d.Succeeded > 0 {
			return DecisionReleased
		}
		if allDone {
			return DecisionSkipped
		}
	default: // success
		if d.Terminal > d.Succeeded {
			return DecisionSkipped
		}
		if d.Succeeded >= d.Parents {
			return DecisionReleased
		}
	}
	return ""
}

// blocked reports whether j waits on its parents (not on a time).
func (j *Job) blocked() bool {
	return j.State == JobWaiting && j.Deps != nil && j.Deps.Decision == ""
}

// childKey is parent ID + "/" + child ID in job_children.
func childKey(parent, child string) []byte {
	k := make([]byte, 0, len(parent)+1+len(child))
	k = append(append(k, parent...), '/')
	return append(k, child...)
}

// children lists j's children in ID order.
func (a *applier) children(id string) [][]byte {
	b := a.tx.Bucket(bucketJobChildren)
	if b == nil {
		return nil
	}
	prefix := attemptPrefix(id) // id + "/"
	var out [][]byte
	c := b.Cursor()
	for k, _ := c.Seek(prefix); k != nil && hasPrefix(k, prefix); k, _ = c.Next() {
		out = append(out, append([]byte(nil), k[len(prefix):]...))
	}
	return out
}

// parentChanged re-counts p's children after p moved from outcome from to
// outcome to, and decides those still open (unless a workflow cancel is
// in progress: its jobs are all being cancelled).
func (a *applier) parentChanged(p *Job, from, to outcome) error {
	for _, id := range a.children(p.ID) {
		c, err := a.getJob(string(id))
		if err != nil {
			continue // the child was dropped by GC; nothing waits on it
		}
		if c.Deps == nil {
			continue // cannot happen (only linkParents adds edges); never stop Apply for it
		}
		was := c.State
		c.Deps.count(from, to)
		// The hold is for p's own workflow (its jobs are all being
		// cancelled or re-run); a child outside it depends on p alone.
		held := a.holdDecisions && c.Workflow != "" && c.Workflow == p.Workflow
		if c.blocked() && !held {
			a.decide(c, p)
		}
		if err := a.saveJob(c, was); err != nil {
			return err
		}
	}
	return nil
}

// decide applies c's condition to its counts; p is the parent whose
// outcome is being counted. It changes only c (the caller saves it).
func (a *applier) decide(c *Job, p *Job) {
	if len(c.Spec.After) > 0 {
		a.decideAfter(c, p)
		return
	}
	by := p.ID
	switch Decide(c.Spec.Condition, *c.Deps) {
	case DecisionReleased:
		c.Deps.Decision, c.Deps.DecidedBy = DecisionReleased, by
		c.State, c.Reason = JobQueued, ""
		if rt := c.Spec.RunAt; rt != nil && rt.After(a.at) {
			c.State, c.NextRunAt = JobWaiting, *rt
		}
	case DecisionSkipped:
		c.Deps.Decision, c.Deps.DecidedBy = DecisionSkipped, by
		c.State = JobSkipped
		cond := c.Spec.Condition
		if cond == "" {
			cond = ConditionSuccess
		}
		c.Reason = fmt.Sprintf("condition %s cannot be met: parent %s is %s", cond, by, p.State)
	}
}

// countParents sets j's counts from its parents' current states, in
// DependsOn order, deciding at the first parent that settles the
// condition (that parent is the deciding edge). j must be waiting. It is
// used where no single parent just changed: at submit and at retry.
func (a *applier) countParents(j *Job) error {
	j.Deps = &Deps{Parents: len(j.Spec.DependsOn)}
	for _, pid := range j.Spec.DependsOn {
		p, err := a.getJob(pid)
		if err != nil {
			return err
		}
		j.Deps.count(outcomePending, outcomeOf(p.State))
		if j.blocked() {
			a.decide(j, p)
		}
	}
	return nil
}

// linkParents records each new job's edges in job_children, then counts
// and decides every job of jobs that has parents (a parent may already be
// finished). Every job of jobs was just created waiting (or queued).
func (a *applier) linkParents(jobs []*Job) error {
	// Inserted in key order: bbolt keeps a written node as a sorted slice
	// until commit, so random-order inserts into one bucket cost a memmove
	// each (quadratic; most of a 10,000-job workflow's apply before this).
	var edges [][]byte
	for _, j := range jobs {
		for _, pid := range j.Spec.DependsOn {
			edges = append(edges, childKey(pid, j.ID))
		}
	}
	if len(edges) > 0 {
		b, err := a.bucket(bucketJobChildren)
		if err != nil {
			return err
		}
		slices.SortFunc(edges, bytes.Compare)
		for _, k := range edges {
			if err := a.put(b, k, nil); err != nil {
				return err
			}
		}
	}
	// Parents created by this entry are pending, and so decide nothing:
	// a workflow (whose parents are all its own jobs) is done here, its
	// children already waiting with Deps{Parents: n} (createJob).
	created := make(map[string]bool, len(jobs))
	for _, j := range jobs {
		created[j.ID] = true
	}
	external := false
	for _, j := range jobs {
		for _, pid := range j.Spec.DependsOn {
			external = external || !created[pid]
		}
	}
	if !external {
		return nil
	}
	for _, j := range jobs {
		if len(j.Spec.DependsOn) == 0 {
			continue
		}
		// Re-read: a cascade from an earlier job of this entry may have
		// changed it.
		cur, err := a.getJob(j.ID)
		if err != nil {
			return err
		}
		if !cur.blocked() {
			continue
		}
		was := cur.State
		if err := a.countParents(cur); err != nil {
			return err
		}
		if err := a.saveJob(cur, was); err != nil {
			return err
		}
	}
	return nil
}

// checkDeps validates the dependencies of the jobs about to be created
// (before anything is written): every parent exists or is one of jobs,
// none is listed twice or is the job itself, the condition is known, and
// the new jobs have no cycle. field names a job in errors ("jobs[3]").
func (a *applier) checkDeps(jobs []NewJob, field func(i int) string) error {
	pos := make(map[string]int, len(jobs))
	for i, nj := range jobs {
		pos[nj.ID] = i
	}
	for i, nj := range jobs {
		if !nj.Spec.Condition.Valid() {
			return fmt.Errorf("%w: %s.condition: %q (want one of %v)", ErrBadCommand, field(i), nj.Spec.Condition, Conditions)
		}
		if len(nj.Spec.DependsOn) == 0 && nj.Spec.Condition != "" {
			return fmt.Errorf("%w: %s.condition: set without depends_on", ErrBadCommand, field(i))
		}
		if err := checkAfter(&nj.Spec); err != nil {
			return fmt.Errorf("%w: %s.%v", ErrBadCommand, field(i), err)
		}
		seen := make(map[string]bool, len(nj.Spec.DependsOn))
		for _, pid := range nj.Spec.DependsOn {
			switch {
			case pid == nj.ID:
				return fmt.Errorf("%w: %s.depends_on: the job depends on itself", ErrBadCommand, field(i))
			case seen[pid]:
				return fmt.Errorf("%w: %s.depends_on: %s listed twice", ErrBadCommand, field(i), pid)
			}
			seen[pid] = true
			if _, ok := pos[pid]; ok {
				continue
			}
			p, err := a.getJob(pid)
			if errors.Is(err, ErrNotFound) {
				return fmt.Errorf("%w: %s.depends_on: no job %q", ErrBadCommand, field(i), pid)
			} else if err != nil {
				return err
			}
			// A job sees its parents' results (inputs): only its own
			// namespace's.
			if ns, pns := NamespaceOf(nj.Spec.Namespace), NamespaceOf(p.Spec.Namespace); ns != pns {
				return fmt.Errorf("%w: %s.depends_on: job %s is in namespace %q, not %q", ErrBadCommand, field(i), pid, pns, ns)
			}
		}
	}
	if cyc := FindCycle(jobs); cyc != nil {
		names := make([]string, len(cyc))
		for k, i := range cyc {
			names[k] = jobs[i].Spec.Name
			if names[k] == "" {
				names[k] = jobs[i].ID
			}
		}
		return fmt.Errorf("%w: %s.depends_on: cycle %s", ErrBadCommand, field(cyc[0]), joinArrow(names))
	}
	return nil
}

// FindCycle returns the positions of the jobs on one dependency cycle
// among jobs (the first job repeated at the end), or nil. Dependencies on
// IDs outside jobs are ignored: an existing job cannot depend on a new one.
func FindCycle(jobs []NewJob) []int {
	pos := make(map[string]int, len(jobs))
	for i, nj := range jobs {
		pos[nj.ID] = i
	}
	const (
		unseen = iota
		onPath
		done
	)
	mark := make([]uint8, len(jobs))
	// Iterative DFS (a 10,000-job chain must not recurse 10,000 deep).
	type frame struct{ job, next int }
	for start := range jobs {
		if mark[start] != unseen {
			continue
		}
		stack := []frame{{start, 0}}
		mark[start] = onPath
		for len(stack) > 0 {
			top := &stack[len(stack)-1]
			deps := jobs[top.job].Spec.DependsOn
			if top.next == len(deps) {
				mark[top.job] = done
				stack = stack[:len(stack)-1]
				continue
			}
			p, ok := pos[deps[top.next]]
			top.next++
			if !ok {
				continue
			}
			switch mark[p] {
			case unseen:
				mark[p] = onPath
				stack = append(stack, frame{p, 0})
			case onPath:
				// The cycle is the stack from p to the top, each job
				// depending on the next ("a -> b": a depends on b).
				k := len(stack) - 1
				for stack[k].job != p {
					k--
				}
				var cyc []int
				for ; k < len(stack); k++ {
					cyc = append(cyc, stack[k].job)
				}
				return append(cyc, p)
			}
		}
	}
	return nil
}

func joinArrow(names []string) string {
	s := ""
	for i, n := range names {
		if i > 0 {
			s += " -> "
		}
		s += n
	}
	return s
}

// unlinkJob removes j's edges from job_children (GC).
func (a *applier) unlinkJob(j *Job) error {
	b := a.tx.Bucket(bucketJobChildren)
	if b == nil {
		return nil
	}
	for _, c := range a.children(j.ID) {
		if err := a.del(b, childKey(j.ID, string(c))); err != nil {
			return err
		}
	}
	for _, pid := range j.Spec.DependsOn {
		if err := a.del(b, childKey(pid, j.ID)); err != nil {
			return err
		}
	}
	return nil
}
