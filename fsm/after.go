package fsm

import (
	"fmt"
	"strings"
)

// Dependencies on jobs submitted earlier, one requirement per parent
// (`foreman submit --after ID[:ok|any|failed|cancelled]`, Slurm's
// --dependency=afterok/afterany/afternotok). They ride on the edges of
// dag.go: a job with After has the same parents in DependsOn (in the same
// order), so job_children, the counts and the release in the parent's own
// transition are the workflows'. Only the decision differs: each parent is
// held to its own requirement rather than all of them to one condition,
// and a requirement that can no longer be met ends the job cancelled with
// the reason (Slurm's kill_invalid_depend), not skipped: nothing upstream
// of a workflow failed, the job's own dependency did.

// AfterOn is what an After parent must end as.
type AfterOn string

const (
	AfterOK        AfterOn = "ok"        // succeeded (afterok)
	AfterAny       AfterOn = "any"       // any terminal state (afterany)
	AfterFailed    AfterOn = "failed"    // failed (afternotok)
	AfterCancelled AfterOn = "cancelled" // cancelled
)

// AfterOns lists the valid requirements, for messages.
var AfterOns = []AfterOn{AfterOK, AfterAny, AfterFailed, AfterCancelled}

// AfterDep is one parent of a job and what it must end as.
type AfterDep struct {
	Job string  `json:"job"`
	On  AfterOn `json:"on"`
}

// String is the form `--after` takes: ID:ON.
func (d AfterDep) String() string { return d.Job + ":" + string(d.On) }

// ParseAfter reads ID[:ok|any|failed|cancelled] (ok when ON is left out).
func ParseAfter(s string) (AfterDep, error) {
	id, on, found := strings.Cut(s, ":")
	d := AfterDep{Job: id, On: AfterOn(on)}
	if !found {
		d.On = AfterOK
	}
	switch {
	case id == "":
		return d, fmt.Errorf("%q: a job ID is missing (want ID[:ok|any|failed|cancelled])", s)
	case !d.On.Valid():
		return d, fmt.Errorf("%q: %q is not a requirement (want one of %v)", s, on, AfterOns)
	}
	return d, nil
}

// Valid reports whether o is a known requirement.
func (o AfterOn) Valid() bool {
	switch o {
	case AfterOK, AfterAny, AfterFailed, AfterCancelled:
		return true
	}
	return false
}

// met says whether a parent in state s meets o (true), can no longer
// meet it (false, with done), or may still (done false).
func (o AfterOn) met(s JobState) (met, done bool) {
	if !s.Terminal() {
		return false, false
	}
	switch o {
	case AfterOK:
		return s == JobSucceeded, true
	case AfterFailed:
		return s == JobFailed, true
	case AfterCancelled:
		return s == JobCancelled, true
	}
	return true, true // AfterAny
}

// checkAfter validates a new job's After against its DependsOn.
func checkAfter(spec *JobSpec) error {
	if len(spec.After) == 0 {
		return nil
	}
	if spec.Condition != "" {
		return fmt.Errorf("after: set with condition %q (each parent has its own requirement)", spec.Condition)
	}
	if len(spec.After) != len(spec.DependsOn) {
		return fmt.Errorf("after: %d entries for %d parents in depends_on (one each, in the same order)", len(spec.After), len(spec.DependsOn))
	}
	for i, d := range spec.After {
		switch {
		case d.Job != spec.DependsOn[i]:
			return fmt.Errorf("after[%d].job: %q differs from depends_on[%d] %q", i, d.Job, i, spec.DependsOn[i])
		case !d.On.Valid():
			return fmt.Errorf("after[%d].on: %q (want one of %v)", i, d.On, AfterOns)
		}
	}
	return nil
}

// decideAfter applies c's After requirements; p is the parent whose
// outcome is being counted (the others are read). It changes only c.
func (a *applier) decideAfter(c *Job, p *Job) {
	open := false
	for _, d := range c.Spec.After {
		st := p.State
		if d.Job != p.ID {
			q, err := a.getJob(d.Job)
			if err != nil {
				// Gone (GC'd after it ended): its end was counted when it
				// ended, and it decided nothing then, so it met its
				// requirement.
				continue
			}
			st = q.State
		}
		met, done := d.On.met(st)
		switch {
		case done && !met:
			c.Deps.Decision, c.Deps.DecidedBy = DecisionCancelled, d.Job
			c.State = JobCancelled
			c.Reason = fmt.Sprintf("dependency after %s cannot be met: job %s is %s", d, d.Job, st)
			return
		case !done:
			open = true
		}
	}
	if open {
		return
	}
	c.Deps.Decision, c.Deps.DecidedBy = DecisionReleased, p.ID
	c.State, c.Reason = JobQueued, ""
	if rt := c.Spec.RunAt; rt != nil && rt.After(a.at) {
		c.State, c.NextRunAt = JobWaiting, *rt
	}
}
