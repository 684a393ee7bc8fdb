package fsm

import (
	"errors"
	"fmt"
	"slices"
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
			if errors.Is(err, ErrNotFound) {
				// Gone (GC'd after it ended): its end was counted when it
				// ended, and it decided nothing then, so it met its
				// requirement.
				continue
			}
			if err != nil {
				open = true // unreadable now: decided by a later change
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

// Singleton jobs (Spec.Singleton; Slurm's --dependency=singleton): a job
// waits for the singleton job of its name submitted before it in its
// namespace, so such jobs run one at a time in submit order. Each new one
// gets the previous as an After parent with requirement any, resolved at
// submit from bucketSingletons (namespace, name → the latest one's ID): a
// previous one already ended, or gone, adds nothing. Only singleton jobs
// queue on a name; a plain job of the same name does not wait, and is not
// waited for. A singleton job retried after it ended does not queue again.

// checkSingleton validates a new job's Singleton.
func checkSingleton(spec *JobSpec) error {
	switch {
	case !spec.Singleton:
		return nil
	case spec.Name == "":
		return errors.New("singleton: needs a name (the singleton jobs of one name run one at a time)")
	case spec.Condition != "" || len(spec.DependsOn) > 0 && len(spec.After) == 0:
		return errors.New("singleton: set with depends_on or condition; give the job's other parents in after")
	}
	return nil
}

func singletonKey(spec *JobSpec) []byte {
	ns := NamespaceOf(spec.Namespace)
	k := make([]byte, 0, len(ns)+1+len(spec.Name))
	return append(append(append(k, ns...), 0), spec.Name...)
}

// chainSingleton adds the previous live singleton job of spec's name as a
// parent (any), and reports whether it did.
func (a *applier) chainSingleton(spec *JobSpec) (bool, error) {
	b := a.tx.Bucket(bucketSingletons)
	if b == nil {
		return false, nil
	}
	prev := b.Get(singletonKey(spec))
	if prev == nil {
		return false, nil
	}
	p, err := a.getJob(string(prev))
	if errors.Is(err, ErrNotFound) || err == nil && p.State.Terminal() {
		return false, nil
	} else if err != nil {
		return false, err
	}
	if slices.Contains(spec.DependsOn, p.ID) {
		return false, nil // already a parent, with the user's requirement
	}
	spec.DependsOn = append(slices.Clone(spec.DependsOn), p.ID)
	spec.After = append(slices.Clone(spec.After), AfterDep{Job: p.ID, On: AfterAny})
	return true, nil
}

// recordSingleton makes id the latest singleton job of its name.
func (a *applier) recordSingleton(id string, spec *JobSpec) error {
	b, err := a.bucket(bucketSingletons)
	if err != nil {
		return err
	}
	return a.put(b, singletonKey(spec), []byte(id))
}
