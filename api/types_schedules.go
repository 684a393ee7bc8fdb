package api

import "time"

// ScheduleSpec is a schedule as created or updated, and as the server
// returns it (ScheduleInfo.Spec) with defaults filled in. One of Job or
// Workflow is the template each fire submits.
type ScheduleSpec struct {
	Name       string        `json:"name,omitempty"` // required by CreateSchedule; UpdateSchedule takes it from its argument
	Namespace  string        `json:"namespace,omitempty"`
	Cron       string        `json:"cron"`
	TimeZone   string        `json:"time_zone,omitempty"`
	Job        *JobSpec      `json:"job,omitempty"`
	StartAt    *time.Time    `json:"start_at,omitempty"`
	EndAt      *time.Time    `json:"end_at,omitempty"`
	Overlap    string        `json:"overlap,omitempty"`  // allow (default), forbid, replace
	CatchUp    string        `json:"catch_up,omitempty"` // skip (default), latest, all
	MaxCatchUp *int          `json:"max_catch_up,omitempty"`
	Paused     bool          `json:"paused,omitempty"`
	Workflow   *WorkflowSpec `json:"workflow,omitempty"`
}

// FireState is one recent tick of a schedule and what it did.
type FireState struct {
	Tick     time.Time `json:"tick"`
	At       time.Time `json:"at"`
	JobID    string    `json:"job_id,omitempty"`
	Manual   bool      `json:"manual,omitempty"`
	Skipped  string    `json:"skipped,omitempty"`
	Count    int       `json:"count,omitempty"`
	Workflow bool      `json:"workflow,omitempty"` // JobID is a workflow's
	Outcome  string    `json:"outcome,omitempty"`
}

// ScheduleInfo is a schedule with its next tick and recent fires.
type ScheduleInfo struct {
	Spec        ScheduleSpec `json:"spec"`
	Anchor      time.Time    `json:"anchor"`
	Cursor      time.Time    `json:"cursor"`
	LastJob     string       `json:"last_job,omitempty"`
	Fired       int64        `json:"fired"`
	Skipped     int64        `json:"skipped"`
	CreatedAt   time.Time    `json:"created_at"`
	UpdatedAt   time.Time    `json:"updated_at"`
	CreateIndex uint64       `json:"create_index"`
	ModifyIndex uint64       `json:"modify_index"`
	NextFire    string       `json:"next_fire,omitempty"`     // in the schedule's time zone
	NextFireUTC string       `json:"next_fire_utc,omitempty"` // RFC 3339
	Fires       []FireState  `json:"fires"`
}
