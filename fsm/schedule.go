package fsm

import "time"

// A schedule fires a job from its template at every tick of a cron spec.
// The ticks themselves are computed by the leader (sched, which parses the
// spec); Apply only sees fires keyed by (schedule, tick) and keeps each
// schedule's Cursor, the last tick it decided. A fire at or before the
// cursor is refused, so a tick fires at most once whoever proposes it, a
// new leader, a retried command or a leader with a skewed clock.

// OverlapPolicy says what a tick does while the schedule's previous job is
// still live.
type OverlapPolicy string

const (
	OverlapAllow   OverlapPolicy = "allow"   // start another job
	OverlapForbid  OverlapPolicy = "forbid"  // skip the tick, recorded with a reason
	OverlapReplace OverlapPolicy = "replace" // cancel the live job, then start the new one
)

// Valid reports whether p is a known policy.
func (p OverlapPolicy) Valid() bool {
	return p == OverlapAllow || p == OverlapForbid || p == OverlapReplace
}

// CatchUpPolicy says which missed ticks (downtime, lost leadership) fire.
type CatchUpPolicy string

const (
	CatchUpSkip   CatchUpPolicy = "skip"   // fire none of them
	CatchUpLatest CatchUpPolicy = "latest" // fire the most recent one once
	CatchUpAll    CatchUpPolicy = "all"    // fire each, oldest first, up to MaxCatchUp
)

// Valid reports whether p is a known policy.
func (p CatchUpPolicy) Valid() bool {
	return p == CatchUpSkip || p == CatchUpLatest || p == CatchUpAll
}

// Defaults the API fills in before a schedule reaches a command.
const (
	DefaultMaxCatchUp = 100
	// ScheduleHistoryMax bounds the fires a schedule record keeps.
	ScheduleHistoryMax = 20
)

// Environment variables a fired job receives.
const (
	EnvSchedule      = "FOREMAN_SCHEDULE"
	EnvScheduledTime = "FOREMAN_SCHEDULED_TIME" // the tick, RFC 3339 in UTC
)

// ScheduleSpec is what a user sets. The API validates and normalises it
// (the cron spec parses, the zone exists, the template passes the submit
// checks, defaults are filled) before it goes into a command.
type ScheduleSpec struct {
	// Name is the schedule's key: the name the user gave in the default
	// namespace, "NAMESPACE:name" in another (names are unique per
	// namespace; ':' is not allowed in a name, so keys cannot collide).
	Name string `json:"name"`
	// Namespace is where the schedule and its jobs live ("" = default).
	Namespace  string        `json:"namespace,omitempty"`
	Cron       string        `json:"cron"`
	TimeZone   string        `json:"time_zone,omitempty"` // IANA name; "" = UTC
	Job        JobSpec       `json:"job"`
	StartAt    *time.Time    `json:"start_at,omitempty"`
	EndAt      *time.Time    `json:"end_at,omitempty"`
	Overlap    OverlapPolicy `json:"overlap"`
	CatchUp    CatchUpPolicy `json:"catch_up"`
	MaxCatchUp int           `json:"max_catch_up"`
	Paused     bool          `json:"paused,omitempty"`
	// Workflow, when set, is fired instead of Job (schedule_workflow.go).
	Workflow *WorkflowTemplate `json:"workflow,omitempty"`
}

// Schedule is the replicated record of one schedule.
type Schedule struct {
	Spec ScheduleSpec `json:"spec"`
	// Anchor is where "@every" intervals count from: the start of the
	// schedule (start_at, else the time it was created or its spec last
	// changed), truncated to the second.
	Anchor time.Time `json:"anchor"`
	// Cursor is the last tick decided (fired or skipped); only later ticks
	// may fire. Creating, changing and resuming a schedule move it to the
	// command's time, so ticks from before then never fire.
	Cursor time.Time `json:"cursor"`
	// LastJob is the job of the last fire, for the overlap policy.
	LastJob     string       `json:"last_job,omitempty"`
	Fired       int64        `json:"fired"`   // jobs created
	Skipped     int64        `json:"skipped"` // ticks not fired
	History     []FireRecord `json:"history,omitempty"`
	CreatedAt   time.Time    `json:"created_at"`
	UpdatedAt   time.Time    `json:"updated_at"`
	CreateIndex uint64       `json:"create_index"`
	ModifyIndex uint64       `json:"modify_index"`
}

// DecidedThrough is the instant up to which the schedule's ticks are
// decided: its cursor, or just before start_at when that is later (a tick
// at start_at is still to fire).
func (s *Schedule) DecidedThrough() time.Time {
	if sa := s.Spec.StartAt; sa != nil && sa.Add(-time.Nanosecond).After(s.Cursor) {
		return sa.Add(-time.Nanosecond)
	}
	return s.Cursor
}

// FireRecord is one decided tick (or, with Count > 1, a run of skipped
// ticks ending at Tick).
type FireRecord struct {
	Tick    time.Time `json:"tick"`
	At      time.Time `json:"at"` // when the fire was applied (leader's clock)
	JobID   string    `json:"job_id,omitempty"`
	Manual  bool      `json:"manual,omitempty"`
	Skipped string    `json:"skipped,omitempty"` // why no job was created
	Count   int       `json:"count,omitempty"`   // skipped ticks this record stands for (0 = 1)
	// Workflow says JobID is the ID of the workflow the fire created.
	Workflow bool `json:"workflow,omitempty"`
}

// Schedule commands.
const (
	CmdPutSchedule    CommandType = "put_schedule"    // PutSchedule
	CmdDeleteSchedule CommandType = "delete_schedule" // DeleteSchedule
	CmdPauseSchedule  CommandType = "pause_schedule"  // PauseSchedule
	CmdFireSchedules  CommandType = "fire_schedules"  // FireSchedules
)

// PutSchedule creates (Create: refused with ErrConflict if the name
// exists) or replaces (ErrNotFound if it does not) a schedule's spec. A
// replaced spec keeps the history; ticks before At never fire.
type PutSchedule struct {
	Schedule ScheduleSpec `json:"schedule"`
	Create   bool         `json:"create,omitempty"`
}

// DeleteSchedule removes a schedule. Jobs it fired are left alone.
type DeleteSchedule struct {
	Name string `json:"name"`
}

// PauseSchedule pauses or resumes a schedule. Ticks that fall while it is
// paused are never fired: resuming moves the cursor to At.
type PauseSchedule struct {
	Name   string `json:"name"`
	Paused bool   `json:"paused"`
}

// FireSchedules decides ticks of many schedules in one entry. Each fire is
// applied on its own: a refused one (unknown schedule, tick at or before
// the cursor, outside start_at/end_at, after At, paused) is reported in
// Result.Skipped under FireKey and changes nothing.
type FireSchedules struct {
	Fires []Fire `json:"fires"`
}

// Fire is one tick of one schedule: a job to create (JobID), or with Skip
// set, ticks recorded as skipped (Count of them, the last at Tick). A
// Manual fire (trigger) is an extra run at At that leaves the cursor alone.
type Fire struct {
	Schedule string    `json:"schedule"`
	Tick     time.Time `json:"tick"`
	JobID    string    `json:"job_id,omitempty"`
	Manual   bool      `json:"manual,omitempty"`
	Skip     string    `json:"skip,omitempty"`
	Count    int       `json:"count,omitempty"`
}

// FireKey names a fire in Result.Skipped.
func FireKey(schedule string, tick time.Time) string {
	return schedule + "@" + tick.UTC().Format(time.RFC3339Nano)
}
