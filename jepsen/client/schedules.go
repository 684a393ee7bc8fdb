package client

import (
	"context"
	"net/http"
	"net/url"
	"time"

	"github.com/foreman-sched/foreman/api"
)

// CreateSchedule posts a schedule (POST /v1/schedules).
func (c *Client) CreateSchedule(ctx context.Context, spec any) (*api.ScheduleInfo, error) {
	var out api.ScheduleInfo
	if _, err := c.do(ctx, http.MethodPost, "/v1/schedules", nil, spec, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// GetSchedule reads a schedule, through the leader when consistent.
func (c *Client) GetSchedule(ctx context.Context, name string, consistent bool) (*api.ScheduleInfo, error) {
	p := "/v1/schedules/" + url.PathEscape(name)
	if consistent {
		p += "?consistent=true"
	}
	var out api.ScheduleInfo
	if _, err := c.do(ctx, http.MethodGet, p, nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// PauseSchedule pauses a schedule.
func (c *Client) PauseSchedule(ctx context.Context, name string) error {
	_, err := c.do(ctx, http.MethodPost, "/v1/schedules/"+url.PathEscape(name)+"/pause", nil, nil, nil)
	return err
}

// ScheduledJob is a job a schedule fired.
type ScheduledJob struct {
	ID          string
	State       string
	Schedule    string
	ScheduledAt time.Time
	SubmittedAt time.Time
}

// ListScheduledJobs pages through every job (through the leader) and
// returns those a schedule fired.
func (c *Client) ListScheduledJobs(ctx context.Context) ([]ScheduledJob, error) {
	var all []ScheduledJob
	// Consistent: a node restarted by the nemesis may still be replaying
	// its log, and a local listing would miss fires.
	err := c.eachJob(ctx, true, func(j *api.Job) {
		if j.Spec.Schedule != "" && j.Spec.ScheduledAt != nil {
			all = append(all, ScheduledJob{ID: j.ID, State: string(j.State), Schedule: j.Spec.Schedule,
				ScheduledAt: *j.Spec.ScheduledAt, SubmittedAt: j.SubmittedAt})
		}
	})
	if err != nil {
		return nil, err
	}
	return all, nil
}
