package api

import (
	"context"
	"net/http"
	"net/url"
)

// CreateSchedule creates a schedule (spec.Name is required) and returns it
// as stored.
func (c *Client) CreateSchedule(ctx context.Context, spec ScheduleSpec) (*ScheduleInfo, error) {
	return call[ScheduleInfo](ctx, c, Request{Method: http.MethodPost, Path: "/v1/schedules", Body: spec})
}

// UpdateSchedule replaces the spec of the schedule name. Sending the same
// spec twice leaves the same schedule, so it is retried like a read.
func (c *Client) UpdateSchedule(ctx context.Context, name string, spec ScheduleSpec) (*ScheduleInfo, error) {
	spec.Name = ""
	return call[ScheduleInfo](ctx, c, Request{Method: http.MethodPut, Path: schedulePath(name), Body: spec, Idempotent: true})
}

// GetSchedule returns one schedule with its next tick and recent fires.
func (c *Client) GetSchedule(ctx context.Context, name string) (*ScheduleInfo, error) {
	return call[ScheduleInfo](ctx, c, Request{Method: http.MethodGet, Path: schedulePath(name), read: true})
}

// ListSchedules returns every schedule, in name order.
func (c *Client) ListSchedules(ctx context.Context) ([]ScheduleInfo, error) {
	return callList[ScheduleInfo](ctx, c, Request{Method: http.MethodGet, Path: "/v1/schedules", read: true}, "schedules")
}

// DeleteSchedule removes a schedule (the jobs it fired stay).
func (c *Client) DeleteSchedule(ctx context.Context, name string) error {
	return c.do(ctx, Request{Method: http.MethodDelete, Path: schedulePath(name)}, nil)
}

// PauseSchedule pauses (paused) or resumes a schedule.
func (c *Client) PauseSchedule(ctx context.Context, name string, paused bool) (*ScheduleInfo, error) {
	op := "/resume"
	if paused {
		op = "/pause"
	}
	return call[ScheduleInfo](ctx, c, Request{Method: http.MethodPost, Path: schedulePath(name) + op, Idempotent: true})
}

// TriggerResponse is what a manual fire made: a job, or a workflow when
// the schedule's template is one.
type TriggerResponse struct {
	JobID    string `json:"job_id"`
	Workflow bool   `json:"workflow,omitempty"` // JobID is a workflow's ID
}

// TriggerSchedule fires a schedule once now.
func (c *Client) TriggerSchedule(ctx context.Context, name string) (*TriggerResponse, error) {
	return call[TriggerResponse](ctx, c, Request{Method: http.MethodPost, Path: schedulePath(name) + "/trigger"})
}

func schedulePath(name string) string { return "/v1/schedules/" + url.PathEscape(name) }
