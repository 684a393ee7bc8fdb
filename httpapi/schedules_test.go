package httpapi

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/foreman-sched/foreman/api"
	"github.com/foreman-sched/foreman/fsm"
)

func TestScheduleCRUD(t *testing.T) {
	a := newTestAPI(t)
	ctx := context.Background()
	code, body := a.do("POST", "/v1/schedules", `{"name":"nightly","cron":"30 2 * * *","time_zone":"America/New_York",
		"job":{"command":"echo hi","env":{"A":"1"}},"overlap":"forbid","catch_up":"all"}`)
	if code != http.StatusCreated {
		t.Fatalf("create: %d %s", code, body)
	}
	var info ScheduleInfo
	mustJSON(t, body, &info)
	sp := info.Spec
	if sp.Overlap != fsm.OverlapForbid || sp.CatchUp != fsm.CatchUpAll || sp.MaxCatchUp != fsm.DefaultMaxCatchUp ||
		sp.Job.Priority != DefaultPriority || sp.Job.MaxAttempts != DefaultMaxAttempts {
		t.Fatalf("defaults not filled: %+v", sp)
	}
	// t0 is 2030-01-02T03:04:05Z = 22:04 EST the day before: next is 02:30 EST on the 2nd = 07:30Z.
	if info.NextFire != "2030-01-02T02:30:00-05:00" || info.NextFireUTC != "2030-01-02T07:30:00Z" {
		t.Fatalf("next fire %q / %q", info.NextFire, info.NextFireUTC)
	}
	if _, err := a.client.PauseSchedule(ctx, "nightly", true); err != nil {
		t.Fatal(err)
	}
	got, err := a.client.GetSchedule(ctx, "nightly")
	if err != nil || !got.Spec.Paused || got.NextFire != "" {
		t.Fatalf("paused: %+v %v", got, err)
	}
	if _, err := a.client.PauseSchedule(ctx, "nightly", false); err != nil {
		t.Fatal(err)
	}
	up, err := a.client.UpdateSchedule(ctx, "nightly", api.ScheduleSpec{Cron: "@every 1m", Job: &api.JobSpec{Command: []string{"true"}}})
	if err != nil || up.Spec.Cron != "@every 1m" || up.Spec.Overlap != string(fsm.OverlapAllow) || up.NextFireUTC != "2030-01-02T03:05:05Z" {
		t.Fatalf("update: %+v %v", up, err)
	}
	trig, err := a.client.TriggerSchedule(ctx, "nightly")
	if err != nil {
		t.Fatal(err)
	}
	j := a.job(trig.JobID)
	if j.Spec.Schedule != "nightly" || j.Spec.Env[fsm.EnvSchedule] != "nightly" || j.Spec.Env[fsm.EnvScheduledTime] != "2030-01-02T03:04:05Z" {
		t.Fatalf("triggered job: %+v", j.Spec)
	}
	list, err := a.client.ListSchedules(ctx)
	if err != nil || len(list) != 1 || len(list[0].Fires) != 1 || !list[0].Fires[0].Manual || list[0].Fires[0].Outcome != "queued" {
		t.Fatalf("list: %+v %v", list, err)
	}
	if err := a.client.DeleteSchedule(ctx, "nightly"); err != nil {
		t.Fatal(err)
	}
	var ae *api.Error
	if _, err := a.client.GetSchedule(ctx, "nightly"); !errors.As(err, &ae) || ae.Status != http.StatusNotFound {
		t.Fatalf("after delete: %v", err)
	}
	if _, err := a.client.TriggerSchedule(ctx, "nightly"); !errors.As(err, &ae) || ae.Status != http.StatusNotFound {
		t.Fatalf("trigger after delete: %v", err)
	}
}

func TestScheduleBadInput(t *testing.T) {
	a := newTestAPI(t)
	a.addNode("n1", "127.0.0.1:1", 4000, 8192)
	if code, body := a.do("POST", "/v1/schedules", `{"name":"dup","cron":"@hourly","job":{"command":"true"}}`); code != http.StatusCreated {
		t.Fatalf("create: %d %s", code, body)
	}
	for _, tc := range []struct{ name, body, field string }{
		{"unparseable spec", `{"name":"x","cron":"61 * * * *","job":{"command":"true"}}`, "cron: \"61 * * * *\""},
		{"too few fields", `{"name":"x","cron":"* *","job":{"command":"true"}}`, "cron:"},
		{"unknown zone", `{"name":"x","cron":"@daily","time_zone":"Mars/Base","job":{"command":"true"}}`, "time_zone:"},
		{"every 0s", `{"name":"x","cron":"@every 0s","job":{"command":"true"}}`, "below the minimum"},
		{"every below 1s", `{"name":"x","cron":"@every 200ms","job":{"command":"true"}}`, "below the minimum"},
		{"no job", `{"name":"x","cron":"@daily"}`, "job:"},
		{"template refused by submit", `{"name":"x","cron":"@daily","job":{"command":"true","priority":500}}`, "job.priority"},
		{"template too big for any node", `{"name":"x","cron":"@daily","job":{"command":"true","resources":{"cpu":64000}}}`, "job."},
		{"template run_at", `{"name":"x","cron":"@daily","job":{"command":"true","run_at":"2031-01-01T00:00:00Z"}}`, "job.run_at"},
		{"unknown overlap", `{"name":"x","cron":"@daily","job":{"command":"true"},"overlap":"sometimes"}`, "overlap:"},
		{"unknown catch_up", `{"name":"x","cron":"@daily","job":{"command":"true"},"catch_up":"most"}`, "catch_up:"},
		{"max_catch_up 0", `{"name":"x","cron":"@daily","job":{"command":"true"},"max_catch_up":0}`, "max_catch_up:"},
		{"end before start", `{"name":"x","cron":"@daily","job":{"command":"true"},"start_at":"2031-01-02T00:00:00Z","end_at":"2031-01-01T00:00:00Z"}`, "end_at:"},
		{"bad name", `{"name":"a/b","cron":"@daily","job":{"command":"true"}}`, "name:"},
		{"unknown field", `{"name":"x","cron":"@daily","job":{"command":"true"},"tz":"UTC"}`, "tz"},
		{"duplicate name", `{"name":"dup","cron":"@daily","job":{"command":"true"}}`, "schedule.name: \"dup\" already exists"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := a.do("POST", "/v1/schedules", tc.body)
			if code/100 != 4 || !strings.Contains(errorOf(t, body).Error, tc.field) {
				t.Fatalf("%d %s, want a 4xx naming %q", code, body, tc.field)
			}
		})
	}
	list, err := a.client.ListSchedules(context.Background())
	if err != nil || len(list) != 1 {
		t.Fatalf("bad input stored something: %+v %v", list, err)
	}
	if code, body := a.do("PUT", "/v1/schedules/missing", `{"cron":"@daily","job":{"command":"true"}}`); code != http.StatusNotFound {
		t.Fatalf("update of a missing schedule: %d %s", code, body)
	}
	if code, body := a.do("PUT", "/v1/schedules/dup", `{"name":"other","cron":"@daily","job":{"command":"true"}}`); code != http.StatusBadRequest {
		t.Fatalf("renaming PUT: %d %s", code, body)
	}
}
