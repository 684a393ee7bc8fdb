package workload

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/foreman-sched/foreman/api"
	"github.com/foreman-sched/foreman/jepsen/checker"
	"github.com/foreman-sched/foreman/jepsen/client"
)

// Cron is the schedule workload: it creates schedules at the start (every
// second and a few cron specs in other zones, with every overlap and
// catch-up policy), lets them fire through the nemesis, and in the drain
// waits until every catch_up all schedule has decided every tick up to the
// end of the run. Its jobs are probes, so their executions are recorded.
type Cron struct {
	Schedules []CronSpec

	mu      sync.Mutex
	created map[string]*api.ScheduleInfo
	end     time.Time
	fires   []checker.CronFire
	noFinal bool
}

// CronSpec is one schedule of the workload; Sleep is its probe's duration.
type CronSpec struct {
	Name, Cron, Zone, Overlap, CatchUp, Sleep string
}

// NewCron returns the workload with its default schedules.
func NewCron() *Cron {
	return &Cron{Schedules: []CronSpec{
		{Name: "every-all", Cron: "@every 1s", Overlap: "allow", CatchUp: "all", Sleep: "0.2"},
		{Name: "every-latest", Cron: "@every 1s", Overlap: "allow", CatchUp: "latest", Sleep: "0.2"},
		{Name: "every-forbid", Cron: "@every 1s", Overlap: "forbid", CatchUp: "latest", Sleep: "2.5"},
		{Name: "kathmandu-skip", Cron: "* * * * * *", Zone: "Asia/Kathmandu", Overlap: "allow", CatchUp: "skip", Sleep: "0.2"},
		{Name: "stjohns-all", Cron: "*/2 * * * * *", Zone: "America/St_Johns", Overlap: "allow", CatchUp: "all", Sleep: "0.2"},
		{Name: "lordhowe-replace", Cron: "*/3 * * * * *", Zone: "Australia/Lord_Howe", Overlap: "replace", CatchUp: "latest", Sleep: "5"},
	}, created: map[string]*api.ScheduleInfo{}}
}

func (c *Cron) Name() string { return "cron" }

// Run creates the schedules (retrying through faults; a 409 means an
// earlier indeterminate create applied) and then just lets them fire.
func (c *Cron) Run(ctx context.Context, env *Env) {
	for i, s := range c.Schedules {
		spec := map[string]any{
			"name": s.Name, "cron": s.Cron, "time_zone": s.Zone, "overlap": s.Overlap, "catch_up": s.CatchUp,
			"max_catch_up": 10000, "job": ProbeSpec("cron-"+s.Name, env.Dir, s.Sleep),
		}
		for try := 0; ctx.Err() == nil; try++ {
			cl := env.Clients[(i+try)%len(env.Clients)]
			sc, err := cl.CreateSchedule(ctx, spec)
			var he *client.Error
			if errors.As(err, &he) && he.Status == http.StatusConflict {
				sc, err = cl.GetSchedule(ctx, s.Name, true)
			}
			if err == nil {
				c.mu.Lock()
				c.created[s.Name] = sc
				c.mu.Unlock()
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	<-ctx.Done()
}

// Drain waits (at most d) until every catch_up all schedule's cursor has
// passed the end of the run, pauses every schedule and lists the jobs they
// fired.
func (c *Cron) Drain(ctx context.Context, env *Env, d time.Duration) error {
	c.end = time.Now()
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	pick := func(i int) *client.Client {
		for k := range env.Clients {
			if j := (i + k) % len(env.Clients); env.Alive(j) {
				return env.Clients[j]
			}
		}
		return env.Clients[0]
	}
	var waitErr error
	for _, s := range c.Schedules {
		if s.CatchUp != "all" {
			continue
		}
		for try := 0; ; try++ {
			sc, err := pick(try).GetSchedule(ctx, s.Name, true)
			if err == nil && !sc.Cursor.Before(c.end.Add(-3*time.Second)) {
				break
			}
			if ctx.Err() != nil {
				waitErr = fmt.Errorf("drain: schedule %s did not catch up to the end of the run within %v", s.Name, d)
				break
			}
			time.Sleep(500 * time.Millisecond)
		}
	}
	for i, s := range c.Schedules {
		for try := 0; try < 20; try++ {
			if err := pick(i+try).PauseSchedule(ctx, s.Name); err == nil || ctx.Err() != nil {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	lctx, lcancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer lcancel()
	jobs, err := firstAlive(env, func(cl *client.Client) ([]client.ScheduledJob, error) { return cl.ListScheduledJobs(lctx) })
	if err != nil {
		c.noFinal = true
		return errors.Join(waitErr, fmt.Errorf("final listing: %w", err))
	}
	for _, j := range jobs {
		c.fires = append(c.fires, checker.CronFire{Job: j.ID, Schedule: j.Schedule, Tick: j.ScheduledAt})
	}
	sort.Slice(c.fires, func(i, j int) bool { return c.fires[i].Job < c.fires[j].Job })
	return waitErr
}

// Check runs the cron checkers. Ticks up to 3 s before the drain started
// must have fired under catch_up all (the drain waited for them).
func (c *Cron) Check(env *Env, opt CheckOptions) []checker.Result {
	r := checker.Result{Name: "cron-setup", Valid: true, Stats: map[string]int{}}
	var scheds []checker.CronSchedule
	c.mu.Lock()
	for _, s := range c.Schedules {
		sc := c.created[s.Name]
		if sc == nil {
			r.Valid = false
			r.Errors = append(r.Errors, "schedule "+s.Name+" was never created")
			continue
		}
		r.Stats["schedules"]++
		scheds = append(scheds, checker.CronSchedule{Name: s.Name, Cron: sc.Spec.Cron, Zone: sc.Spec.TimeZone,
			CatchUp: sc.Spec.CatchUp, Overlap: sc.Spec.Overlap, Anchor: sc.Anchor, Cursor: sc.Cursor})
	}
	c.mu.Unlock()
	if c.noFinal {
		r.Valid = false
		r.Errors = append(r.Errors, "no final listing of the fired jobs")
		return []checker.Result{r}
	}
	exec, torn, err := checker.ReadRecordFiles(filepath.Join(env.Dir, "exec-*.log"))
	if err != nil {
		r.Valid = false
		r.Errors = append(r.Errors, "reading records: "+err.Error())
	}
	r.Stats["torn_records"] = torn
	res := checker.Cron(scheds, c.fires, exec, checker.CronOptions{End: c.end.Add(-3 * time.Second), Ahead: opt.ClockAhead,
		ClockBound: opt.ClockBound, TickBound: TickEvery + 500*time.Millisecond})
	return append([]checker.Result{r}, res...)
}
