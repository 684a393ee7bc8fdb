package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/foreman-sched/foreman/api"
	"github.com/foreman-sched/foreman/fsm"
)

// MaxCatchUp bounds max_catch_up: the leader enumerates at most this many
// missed ticks of one schedule per wake.
const MaxCatchUp = 10000

// ScheduleInput is a schedule as a client writes it (POST /v1/schedules,
// PUT /v1/schedules/{name}, `foreman schedule create -f`). Normalize turns
// it into an fsm.ScheduleSpec with every default filled in.
type ScheduleInput struct {
	Name string `json:"name"`
	// Namespace of the schedule and its jobs ("" = ?namespace=, else default).
	Namespace string        `json:"namespace,omitempty"`
	Cron      string        `json:"cron"`
	TimeZone  string        `json:"time_zone,omitempty"` // IANA; default UTC
	Job       *JobSpecInput `json:"job,omitempty"`
	// Workflow, instead of Job, fires a whole workflow at each tick (its
	// jobs' depends_on name other jobs of it).
	Workflow   *WorkflowInput  `json:"workflow,omitempty"`
	StartAt    json.RawMessage `json:"start_at,omitempty"`
	EndAt      json.RawMessage `json:"end_at,omitempty"`
	Overlap    string          `json:"overlap,omitempty"`      // allow (default) | forbid | replace
	CatchUp    string          `json:"catch_up,omitempty"`     // skip | latest (default) | all
	MaxCatchUp *int            `json:"max_catch_up,omitempty"` // default 100
	Paused     bool            `json:"paused,omitempty"`
}

// Schedule defaults filled in by Normalize.
const (
	DefaultOverlap = fsm.OverlapAllow
	DefaultCatchUp = fsm.CatchUpLatest
)

// CheckScheduleName refuses names that cannot be a key or a URL segment.
func CheckScheduleName(field, name string) error {
	switch {
	case name == "":
		return invalid(field, "is required")
	case utf8.RuneCountInString(name) > MaxNameLen:
		return invalid(field, "must be at most %d characters", MaxNameLen)
	case !queueNameRe().MatchString(name):
		return invalid(field, "%q: use letters, digits, '.', '_' and '-', starting with a letter or digit", name)
	}
	return nil
}

// Normalize validates the schedule and returns the spec to commit. The
// job template goes through the same checks as a submit (prefixed
// "job."), minus run_at and deadline, which a template cannot have: every
// fire would share them. Errors wrap ErrInvalid and name the field.
func (in *ScheduleInput) Normalize() (fsm.ScheduleSpec, error) {
	var out fsm.ScheduleSpec
	if err := CheckScheduleName("name", in.Name); err != nil {
		return out, err
	}
	if _, err := fsm.ParseCron(in.Cron, in.TimeZone); err != nil {
		var ce *fsm.CronError
		if errors.As(err, &ce) {
			return out, invalid(ce.Field, "%s", ce.Reason)
		}
		return out, invalid("cron", "%v", err)
	}
	var job fsm.JobSpec
	var wf *fsm.WorkflowTemplate
	var err error
	switch {
	case in.Job == nil && in.Workflow == nil:
		return out, invalid("job", "is required (the job each tick submits), or a workflow")
	case in.Job != nil && in.Workflow != nil:
		return out, invalid("workflow", "a schedule fires a job or a workflow, not both")
	case in.Job != nil:
		if job, err = normalizeTemplateJob("job", in.Job); err != nil {
			return out, err
		}
	default:
		if wf, err = normalizeWorkflowTemplate(in.Workflow); err != nil {
			return out, err
		}
	}
	var start, end *time.Time
	if start, err = parseTime("start_at", in.StartAt); err != nil {
		return out, err
	}
	if end, err = parseTime("end_at", in.EndAt); err != nil {
		return out, err
	}
	if start != nil && end != nil && end.Before(*start) {
		return out, invalid("end_at", "%s is before start_at %s", end.Format(time.RFC3339), start.Format(time.RFC3339))
	}
	overlap := fsm.OverlapPolicy(strings.ToLower(in.Overlap))
	if overlap == "" {
		overlap = DefaultOverlap
	}
	if !overlap.Valid() {
		return out, invalid("overlap", "unknown policy %q (want allow, forbid or replace)", in.Overlap)
	}
	catchUp := fsm.CatchUpPolicy(strings.ToLower(in.CatchUp))
	if catchUp == "" {
		catchUp = DefaultCatchUp
	}
	if !catchUp.Valid() {
		return out, invalid("catch_up", "unknown policy %q (want skip, latest or all)", in.CatchUp)
	}
	maxCatchUp := fsm.DefaultMaxCatchUp
	if in.MaxCatchUp != nil {
		maxCatchUp = *in.MaxCatchUp
	}
	if maxCatchUp < 1 || maxCatchUp > MaxCatchUp {
		return out, invalid("max_catch_up", "must be between 1 and %d (got %d)", MaxCatchUp, maxCatchUp)
	}
	zone := in.TimeZone
	if zone == "UTC" {
		zone = ""
	}
	return fsm.ScheduleSpec{Name: in.Name, Cron: strings.TrimSpace(in.Cron), TimeZone: zone, Job: job, Workflow: wf,
		StartAt: start, EndAt: end, Overlap: overlap, CatchUp: catchUp, MaxCatchUp: maxCatchUp, Paused: in.Paused}, nil
}

// normalizeTemplateJob checks a job a schedule fires: a submit's checks
// (fields prefixed with field), minus run_at, deadline and idempotency_key.
func normalizeTemplateJob(field string, in *JobSpecInput) (fsm.JobSpec, error) {
	if !isNull(in.RunAt) {
		return fsm.JobSpec{}, invalid(field+".run_at", "is not allowed in a schedule's job (the tick is its start time)")
	}
	if !isNull(in.Deadline) {
		return fsm.JobSpec{}, invalid(field+".deadline", "is not allowed in a schedule's job (every fire would share it)")
	}
	if in.IdempotencyKey != "" {
		return fsm.JobSpec{}, invalid(field+".idempotency_key", "is not allowed in a schedule's job (each tick is already fired once)")
	}
	if len(in.After) > 0 {
		return fsm.JobSpec{}, invalid(field+".after", "is not allowed in a schedule's job (every fire would wait on the same jobs)")
	}
	if in.Singleton {
		return fsm.JobSpec{}, invalid(field+".singleton", "is not allowed in a schedule's job (the schedule's overlap policy says what a fire does while the last one runs)")
	}
	job, err := in.Normalize()
	if err != nil {
		return job, prefixField(field, err)
	}
	return job, nil
}

// normalizeWorkflowTemplate checks a schedule's workflow as a workflow
// submit is checked (names, depends_on, cycles; each job as a schedule's
// job), keeping depends_on as names: Apply resolves them at each fire.
func normalizeWorkflowTemplate(in *WorkflowInput) (*fsm.WorkflowTemplate, error) {
	if err := checkWorkflowName(in.Name); err != nil {
		return nil, prefixField("workflow", err)
	}
	if in.Namespace != "" {
		if err := CheckNamespace("workflow.namespace", in.Namespace); err != nil {
			return nil, err
		}
	}
	if in.IdempotencyKey != "" {
		return nil, invalid("workflow.idempotency_key", "is not allowed in a schedule's workflow (each tick is already fired once)")
	}
	switch n := len(in.Jobs); {
	case n == 0:
		return nil, invalid("workflow.jobs", "a workflow needs at least one job")
	case n > fsm.MaxScheduleWorkflowJobs:
		return nil, invalid("workflow.jobs", "at most %d jobs in a schedule's workflow (got %d)", fsm.MaxScheduleWorkflowJobs, n)
	}
	for i := range in.Jobs {
		if _, err := normalizeTemplateJob(fmt.Sprintf("workflow.jobs[%d]", i), &in.Jobs[i]); err != nil {
			return nil, err
		}
	}
	jobs, err := normalizeWorkflowJobs(in.Jobs, "workflow.", fsm.StoredNamespace(in.Namespace), func(i int) string { return in.Jobs[i].Name })
	if err != nil {
		return nil, err
	}
	t := &fsm.WorkflowTemplate{Name: in.Name, Namespace: fsm.StoredNamespace(in.Namespace), Jobs: make([]fsm.JobSpec, len(jobs))}
	for i, nj := range jobs {
		t.Jobs[i] = nj.Spec
	}
	return t, nil
}

// ScheduleInfo is a schedule as the API shows it: the record, its next
// tick (in its zone and in UTC) and its recent fires with their jobs'
// outcomes.
type ScheduleInfo struct {
	fsm.Schedule
	// NextFire is the next tick in the schedule's zone, NextFireUTC the
	// same instant in UTC; both empty when it will not fire again (paused,
	// past end_at, or a spec such as Feb 30 that never matches).
	NextFire    string      `json:"next_fire,omitempty"`
	NextFireUTC string      `json:"next_fire_utc,omitempty"`
	Fires       []FireState `json:"fires"`
}

// FireState is one recent fire with the state of the job it created.
type FireState struct {
	fsm.FireRecord
	// Outcome is the job's state (empty for a skipped tick, "gone" once
	// the job was garbage-collected).
	Outcome string `json:"outcome,omitempty"`
}

// TriggerResponse is the reply to POST /v1/schedules/{name}/trigger.
type TriggerResponse = api.TriggerResponse

// ScheduleList is the reply to GET /v1/schedules.
type ScheduleList struct {
	Schedules []ScheduleInfo `json:"schedules"`
}
