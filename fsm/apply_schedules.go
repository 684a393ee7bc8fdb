package fsm

import (
	"fmt"
	"maps"
	"time"
)

func (a *applier) getSchedule(name string) (*Schedule, error) {
	v := a.schedules.Get([]byte(name))
	return record[Schedule](v, "schedule", name)
}

// saveSchedule writes s and emits an event for it (state says what
// happened: created, updated, paused, resumed, fired, skipped; a fire's
// event carries its job, so it is also in the job's timeline).
func (a *applier) saveSchedule(s *Schedule, state string) error {
	return a.saveScheduleJob(s, state, "")
}

func (a *applier) saveScheduleJob(s *Schedule, state, jobID string) error {
	s.ModifyIndex, s.UpdatedAt = a.index, a.at
	if err := a.putRecord(a.schedules, []byte(s.Spec.Name), s); err != nil {
		return err
	}
	a.emit(Event{Type: EventSchedule, Name: state, Schedule: s.Spec.Name, JobID: jobID, State: state, Namespace: s.Spec.Namespace})
	return nil
}

// checkScheduleSpec refuses what the API should have refused already, so a
// command from elsewhere cannot store a schedule the leader cannot run.
func checkScheduleSpec(sp *ScheduleSpec) error {
	if err := validKey("schedule.name", sp.Name, maxKeyLen); err != nil {
		return err
	}
	switch {
	case sp.Cron == "":
		return fmt.Errorf("%w: schedule.cron: empty", ErrBadCommand)
	case !sp.Overlap.Valid():
		return fmt.Errorf("%w: schedule.overlap: %q (want allow, forbid or replace)", ErrBadCommand, sp.Overlap)
	case !sp.CatchUp.Valid():
		return fmt.Errorf("%w: schedule.catch_up: %q (want skip, latest or all)", ErrBadCommand, sp.CatchUp)
	case sp.MaxCatchUp < 0:
		return fmt.Errorf("%w: schedule.max_catch_up: %d (want >= 0)", ErrBadCommand, sp.MaxCatchUp)
	case sp.StartAt != nil && sp.EndAt != nil && sp.EndAt.Before(*sp.StartAt):
		return fmt.Errorf("%w: schedule.end_at: before start_at", ErrBadCommand)
	}
	if sp.Workflow != nil {
		return checkWorkflowTemplate(sp.Workflow)
	}
	return nil
}

// anchorFor is where @every intervals count from (see Schedule.Anchor).
func anchorFor(sp *ScheduleSpec, at time.Time) time.Time {
	if sp.StartAt != nil {
		return sp.StartAt.UTC().Truncate(time.Second)
	}
	return at.UTC().Truncate(time.Second)
}

func laterOf(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func (a *applier) putSchedule(p *PutSchedule, res *Result) error {
	sp := p.Schedule
	if err := checkScheduleSpec(&sp); err != nil {
		return err
	}
	old, err := a.getSchedule(sp.Name)
	switch {
	case err == nil && p.Create:
		return fmt.Errorf("%w: schedule.name: %q already exists", ErrConflict, sp.Name)
	case err != nil && !p.Create:
		return err
	}
	if p.Create {
		s := &Schedule{Spec: sp, Anchor: anchorFor(&sp, a.at), Cursor: a.at, CreatedAt: a.at, CreateIndex: a.index}
		return a.saveSchedule(s, "created")
	}
	s := old
	if s.Spec.Cron != sp.Cron || s.Spec.TimeZone != sp.TimeZone || !sameTime(s.Spec.StartAt, sp.StartAt) {
		s.Anchor = anchorFor(&sp, a.at)
	}
	// The new spec's ticks count from now: none before this entry fires.
	s.Spec, s.Cursor = sp, laterOf(s.Cursor, a.at)
	return a.saveSchedule(s, "updated")
}

func sameTime(x, y *time.Time) bool {
	if x == nil || y == nil {
		return x == y
	}
	return x.Equal(*y)
}

func (a *applier) deleteSchedule(p *DeleteSchedule, res *Result) error {
	old, err := a.getSchedule(p.Name)
	if err != nil {
		return err
	}
	if err := a.del(a.schedules, []byte(p.Name)); err != nil {
		return err
	}
	a.emit(Event{Type: EventSchedule, Name: "deleted", Schedule: p.Name, State: "deleted", Namespace: old.Spec.Namespace})
	return nil
}

func (a *applier) pauseSchedule(p *PauseSchedule, res *Result) error {
	s, err := a.getSchedule(p.Name)
	if err != nil {
		return err
	}
	if s.Spec.Paused == p.Paused {
		return nil
	}
	s.Spec.Paused = p.Paused
	state := "paused"
	if !p.Paused {
		// Ticks that fell while paused are not caught up.
		s.Cursor, state = laterOf(s.Cursor, a.at), "resumed"
	}
	return a.saveSchedule(s, state)
}

// fireSchedules applies each fire on its own (see FireSchedules). A
// schedule fired twice in one entry is read back from this transaction,
// so its cursor already covers the first fire.
func (a *applier) fireSchedules(p *FireSchedules, res *Result) error {
	for i := range p.Fires {
		f := &p.Fires[i]
		s, err := a.getSchedule(f.Schedule)
		if err != nil {
			skip(res, FireKey(f.Schedule, f.Tick), "schedule not found")
			continue
		}
		if why := a.refuseFire(s, f); why != "" {
			skip(res, FireKey(f.Schedule, f.Tick), why)
			continue
		}
		if err := a.fire(s, f, res); err != nil {
			return err
		}
	}
	return nil
}

// refuseFire says why a fire must not be applied, or "".
func (a *applier) refuseFire(s *Schedule, f *Fire) string {
	if f.Manual {
		if f.Skip != "" || f.JobID == "" {
			return "a manual fire needs a job ID"
		}
		return ""
	}
	sp := &s.Spec
	switch {
	case f.Tick.IsZero():
		return "no tick"
	case !f.Tick.After(s.Cursor):
		return fmt.Sprintf("tick already decided (cursor %s)", s.Cursor.UTC().Format(time.RFC3339Nano))
	case f.Tick.After(a.at):
		return "tick is in the future"
	case sp.Paused:
		return "schedule is paused"
	case sp.StartAt != nil && f.Tick.Before(*sp.StartAt):
		return "tick is before start_at"
	case sp.EndAt != nil && f.Tick.After(*sp.EndAt):
		return "tick is after end_at"
	case f.Skip == "" && f.JobID == "":
		return "a fire needs a job ID or a skip reason"
	}
	return ""
}

// fire records one decided tick: a skip, or a job from the template
// (subject to the overlap policy).
func (a *applier) fire(s *Schedule, f *Fire, res *Result) error {
	rec := FireRecord{Tick: f.Tick, At: a.at, Manual: f.Manual, Skipped: f.Skip}
	if f.Skip != "" && f.Count > 1 {
		rec.Count = f.Count
	}
	if !f.Manual {
		s.Cursor = f.Tick
	}
	if rec.Skipped == "" && s.Spec.Workflow != nil {
		return a.fireWorkflowTick(s, f, rec, res)
	}
	if rec.Skipped == "" {
		// Refuse a bad job ID before overlap may cancel anything.
		if err := validKey("job_id", f.JobID, maxIDLen); err != nil {
			skip(res, FireKey(f.Schedule, f.Tick), err.Error())
			return nil
		}
		if a.jobs.Get([]byte(f.JobID)) != nil {
			skip(res, FireKey(f.Schedule, f.Tick), "job ID exists")
			return nil
		}
		why, err := a.overlap(s, f)
		if err != nil {
			return err
		}
		rec.Skipped = why
	}
	state := "skipped"
	if rec.Skipped == "" {
		if err := a.saveJob(firedJob(s, f, a), ""); err != nil {
			return err
		}
		rec.JobID, s.LastJob, state = f.JobID, f.JobID, "fired"
		s.Fired++
	} else {
		s.Skipped += int64(max(1, rec.Count))
	}
	return a.recordFire(s, rec, state)
}

// recordFire appends a decided tick to the schedule's bounded history and
// saves it.
func (a *applier) recordFire(s *Schedule, rec FireRecord, state string) error {
	s.History = append(s.History, rec)
	if n := len(s.History) - ScheduleHistoryMax; n > 0 {
		s.History = append([]FireRecord(nil), s.History[n:]...)
	}
	jobID := rec.JobID
	if rec.Workflow {
		jobID = ""
	}
	return a.saveScheduleJob(s, state, jobID)
}

// fireWorkflowTick is fire for a schedule with a workflow template: the
// IDs are checked before overlap may cancel anything.
func (a *applier) fireWorkflowTick(s *Schedule, f *Fire, rec FireRecord, res *Result) error {
	if err := validKey("job_id", f.JobID, maxIDLen); err != nil {
		skip(res, FireKey(f.Schedule, f.Tick), err.Error())
		return nil
	}
	p, why := fireWorkflow(s, f, a.at)
	if why == "" {
		why = a.idsFree(p)
	}
	if why != "" {
		skip(res, FireKey(f.Schedule, f.Tick), why)
		return nil
	}
	why, err := a.overlapWorkflow(s, f)
	if err != nil {
		return err
	}
	if why == "" {
		if why, err = a.createFiredWorkflow(p); err != nil {
			return err
		}
	}
	state := "fired"
	if rec.Skipped = why; why == "" {
		rec.JobID, rec.Workflow, s.LastJob = p.ID, true, p.ID
		s.Fired++
	} else {
		state = "skipped"
		s.Skipped++
	}
	return a.recordFire(s, rec, state)
}

// overlap applies the overlap policy against the schedule's last job: the
// reason to skip the tick, or "" to fire it (after cancelling the live job
// under replace).
func (a *applier) overlap(s *Schedule, f *Fire) (string, error) {
	if s.LastJob == "" || s.Spec.Overlap == OverlapAllow || s.Spec.Overlap == "" {
		return "", nil
	}
	j, err := a.getJob(s.LastJob)
	if err != nil || j.State.Terminal() {
		return "", nil // gone (GC) or finished
	}
	if s.Spec.Overlap == OverlapForbid {
		return fmt.Sprintf("overlap forbid: job %s is %s", j.ID, j.State), nil
	}
	reason := "replaced by schedule " + s.Spec.Name + " at " + f.Tick.UTC().Format(time.RFC3339)
	return "", a.cancelJob(&CancelJob{JobID: j.ID, Reason: reason}, &Result{})
}

// firedJob builds the job of a fire: the template, plus where it came from
// in its spec and environment.
func firedJob(s *Schedule, f *Fire, a *applier) *Job {
	spec := s.Spec.Job
	tick := f.Tick.UTC()
	if f.Manual {
		tick = a.at.UTC()
	}
	env := make(map[string]string, len(spec.Env)+2)
	maps.Copy(env, spec.Env)
	env[EnvSchedule] = s.Spec.Name
	env[EnvScheduledTime] = tick.Format(time.RFC3339Nano)
	spec.Env, spec.Schedule, spec.ScheduledAt = env, s.Spec.Name, &tick
	return &Job{ID: f.JobID, Spec: spec, State: JobQueued, SubmittedAt: a.at, CreateIndex: a.index}
}
