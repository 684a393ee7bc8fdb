package httpapi

import (
	"context"
	"net/http"
	"net/url"
)

// CreateSchedule creates a schedule and returns it as stored.
func (c *Client) CreateSchedule(ctx context.Context, in ScheduleInput) (*ScheduleInfo, error) {
	var out ScheduleInfo
	if _, err := c.do(ctx, http.MethodPost, "/v1/schedules", nil, in, &out, nil); err != nil {
		return nil, err
	}
	return &out, nil
}

// UpdateSchedule replaces a schedule's spec.
func (c *Client) UpdateSchedule(ctx context.Context, name string, in ScheduleInput) (*ScheduleInfo, error) {
	var out ScheduleInfo
	if _, err := c.do(ctx, http.MethodPut, schedulePath(name), nil, in, &out, nil); err != nil {
		return nil, err
	}
	return &out, nil
}

// GetSchedule returns one schedule with its next tick and recent fires.
func (c *Client) GetSchedule(ctx context.Context, name string, consistent bool) (*ScheduleInfo, error) {
	var out ScheduleInfo
	if _, err := c.do(ctx, http.MethodGet, schedulePath(name), consistentQuery(consistent), nil, &out, nil); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListSchedules returns every schedule in name order.
func (c *Client) ListSchedules(ctx context.Context, consistent bool) ([]ScheduleInfo, error) {
	var out ScheduleList
	if _, err := c.do(ctx, http.MethodGet, "/v1/schedules", consistentQuery(consistent), nil, &out, nil); err != nil {
		return nil, err
	}
	return out.Schedules, nil
}

// DeleteSchedule removes a schedule (the jobs it fired stay).
func (c *Client) DeleteSchedule(ctx context.Context, name string) error {
	_, err := c.do(ctx, http.MethodDelete, schedulePath(name), nil, nil, nil, nil)
	return err
}

// PauseSchedule pauses (paused) or resumes a schedule.
func (c *Client) PauseSchedule(ctx context.Context, name string, paused bool) (*ScheduleInfo, error) {
	op := "/resume"
	if paused {
		op = "/pause"
	}
	var out ScheduleInfo
	if _, err := c.do(ctx, http.MethodPost, schedulePath(name)+op, nil, nil, &out, nil); err != nil {
		return nil, err
	}
	return &out, nil
}

// TriggerSchedule fires a schedule once now (a manual run) and returns
// the job's ID.
func (c *Client) TriggerSchedule(ctx context.Context, name string) (string, error) {
	var out TriggerResponse
	if _, err := c.do(ctx, http.MethodPost, schedulePath(name)+"/trigger", nil, nil, &out, nil); err != nil {
		return "", err
	}
	return out.JobID, nil
}

func schedulePath(name string) string { return "/v1/schedules/" + url.PathEscape(name) }

// TriggerScheduleFire is TriggerSchedule that also says whether the ID is
// a workflow's (a schedule with a workflow template).
func (c *Client) TriggerScheduleFire(ctx context.Context, name string) (id string, workflow bool, err error) {
	var out TriggerResponse
	if _, err := c.do(ctx, http.MethodPost, schedulePath(name)+"/trigger", nil, nil, &out, nil); err != nil {
		return "", false, err
	}
	return out.JobID, out.Workflow, nil
}
