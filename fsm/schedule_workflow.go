package fsm

import (
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"
)

// A schedule may fire a whole workflow instead of one job (issue 15): its
// spec then carries a WorkflowTemplate, whose jobs name their parents by
// name. A fire is still keyed by (schedule, tick) and carries one ID
// minted by the leader (Fire.JobID, a ULID); Apply makes it the
// workflow's ID and derives the jobs' IDs from it (idPlus: the next ULIDs
// in order), so the fire stays one small command whatever the template's
// size, and the IDs are the same on every replica.

// MaxScheduleWorkflowJobs bounds a schedule's workflow template: the
// template is stored in the schedule record, which every fire rewrites.
const MaxScheduleWorkflowJobs = 1000

// WorkflowTemplate is the workflow a schedule fires at each tick.
type WorkflowTemplate struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace,omitempty"`
	// Jobs are full job specs with unique names; DependsOn holds names of
	// jobs of this template.
	Jobs []JobSpec `json:"jobs"`
}

// checkWorkflowTemplate refuses a template whose fire could not be
// applied: names, dependencies, cycles (the API checks the same, with
// friendlier messages).
func checkWorkflowTemplate(t *WorkflowTemplate) error {
	switch n := len(t.Jobs); {
	case n == 0:
		return fmt.Errorf("%w: schedule.workflow.jobs: a workflow needs at least one job", ErrBadCommand)
	case n > MaxScheduleWorkflowJobs:
		return fmt.Errorf("%w: schedule.workflow.jobs: %d jobs (max %d in a schedule's workflow)", ErrBadCommand, n, MaxScheduleWorkflowJobs)
	}
	if len(t.Name) > maxKeyLen {
		return fmt.Errorf("%w: schedule.workflow.name: %d bytes (max %d)", ErrBadCommand, len(t.Name), maxKeyLen)
	}
	byName := make(map[string]bool, len(t.Jobs))
	nj := make([]NewJob, len(t.Jobs))
	for i, j := range t.Jobs {
		if err := ValidJobName(j.Name); err != nil {
			return fmt.Errorf("%w: schedule.workflow.jobs[%d].name: %v", ErrBadCommand, i, err)
		}
		if byName[j.Name] {
			return fmt.Errorf("%w: schedule.workflow.jobs[%d].name: %q is not unique", ErrBadCommand, i, j.Name)
		}
		byName[j.Name] = true
		nj[i] = NewJob{ID: j.Name, Spec: j}
	}
	for i, j := range t.Jobs {
		for _, d := range j.DependsOn {
			if !byName[d] || d == j.Name {
				return fmt.Errorf("%w: schedule.workflow.jobs[%d].depends_on: %q is not another job of the template", ErrBadCommand, i, d)
			}
		}
	}
	if cyc := FindCycle(nj); cyc != nil {
		names := make([]string, len(cyc))
		for k, i := range cyc {
			names[k] = t.Jobs[i].Name
		}
		return fmt.Errorf("%w: schedule.workflow: cycle %s", ErrBadCommand, strings.Join(names, " -> "))
	}
	return nil
}

// crockford is the ULID alphabet.
const crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

// idPlus returns the ULID k after id (id read as a 130-bit base-32
// number), or false when id is not a 26-character ULID or would overflow.
// A ULID's last 80 bits are random, so the next few are as unique as id.
func idPlus(id string, k int) (string, bool) {
	if len(id) != 26 || k < 0 {
		return "", false
	}
	b := []byte(id)
	carry := k
	for i := len(b) - 1; i >= 0; i-- {
		v := strings.IndexByte(crockford, b[i])
		if v < 0 {
			return "", false
		}
		v += carry
		b[i], carry = crockford[v%32], v/32
	}
	if carry != 0 || b[0] > '7' { // a ULID's first character is at most 7
		return "", false
	}
	return string(b), true
}

// fireWorkflow builds the workflow command of a fire: the template's jobs
// with their derived IDs, parents resolved to IDs, and the schedule's
// environment. The reason is non-empty when the fire cannot create it.
func fireWorkflow(s *Schedule, f *Fire, at time.Time) (*SubmitWorkflow, string) {
	t := s.Spec.Workflow
	tick := f.Tick.UTC()
	if f.Manual {
		tick = at.UTC()
	}
	p := &SubmitWorkflow{ID: f.JobID, Name: t.Name, Namespace: t.Namespace, Jobs: make([]NewJob, len(t.Jobs))}
	if p.Name == "" {
		p.Name = s.Spec.Name
	}
	ids := make(map[string]string, len(t.Jobs))
	for i, tj := range t.Jobs {
		id, ok := idPlus(f.JobID, i+1)
		if !ok {
			return nil, fmt.Sprintf("fire ID %q is not a ULID (a workflow's job IDs are derived from it)", f.JobID)
		}
		ids[tj.Name] = id
	}
	for i, tj := range t.Jobs {
		spec := tj
		env := make(map[string]string, len(spec.Env)+2)
		maps.Copy(env, spec.Env)
		env[EnvSchedule] = s.Spec.Name
		env[EnvScheduledTime] = tick.Format(time.RFC3339Nano)
		spec.Env, spec.Schedule, spec.ScheduledAt = env, s.Spec.Name, &tick
		if len(tj.DependsOn) > 0 {
			spec.DependsOn = make([]string, len(tj.DependsOn))
			for k, d := range tj.DependsOn {
				spec.DependsOn[k] = ids[d]
			}
		}
		p.Jobs[i] = NewJob{ID: ids[tj.Name], Spec: spec}
	}
	return p, ""
}

// idsFree says why a workflow fire's IDs are taken, or "".
func (a *applier) idsFree(p *SubmitWorkflow) string {
	if _, err := a.getWorkflow(p.ID); err == nil {
		return "workflow ID exists"
	}
	for _, nj := range p.Jobs {
		if a.jobs.Get([]byte(nj.ID)) != nil {
			return "job ID " + nj.ID + " exists"
		}
	}
	return ""
}

// overlapWorkflow is overlap for a workflow schedule: the last workflow
// still running forbids the tick, or is cancelled under replace.
func (a *applier) overlapWorkflow(s *Schedule, f *Fire) (string, error) {
	if s.LastJob == "" || s.Spec.Overlap == OverlapAllow || s.Spec.Overlap == "" {
		return "", nil
	}
	w, err := a.getWorkflow(s.LastJob)
	if err != nil || w.State != WorkflowRunning {
		return "", nil // gone (GC), finished, or the last fire was a job
	}
	if s.Spec.Overlap == OverlapForbid {
		return fmt.Sprintf("overlap forbid: workflow %s is %s", w.ID, w.State), nil
	}
	reason := "replaced by schedule " + s.Spec.Name + " at " + f.Tick.UTC().Format(time.RFC3339)
	return "", a.cancelWorkflow(&CancelWorkflow{ID: w.ID, Reason: reason}, &Result{})
}

// createFiredWorkflow applies the workflow command of a fire. A refusal
// (which checkWorkflowTemplate should have prevented) skips the tick
// rather than failing the entry: it happens before anything is written.
func (a *applier) createFiredWorkflow(p *SubmitWorkflow) (skipped string, err error) {
	err = a.submitWorkflow(p, &Result{})
	if errors.Is(err, ErrBadCommand) || errors.Is(err, ErrConflict) {
		return err.Error(), nil
	}
	return "", err
}
