package bench

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/procfs"
	ucli "github.com/urfave/cli/v2"

	"github.com/foreman-sched/foreman/api"
	"github.com/foreman-sched/foreman/cli"
	"github.com/foreman-sched/foreman/httpapi"
)

// cronCommand is `foreman bench cron`.
func cronCommand() *ucli.Command {
	return benchCommand("cron", "N schedules '@every 10s' sharing their ticks: fire lateness, job start lateness, agent CPU between ticks",
		"Creates N schedules whose ticks coincide (one start_at on a 10 s boundary), so each tick is a\n"+
			"burst of N fires and the time between is quiet. All but --probes have a job no node can take (the\n"+
			"agent's CPU is the schedules', not N process starts); the probes run `true` to time job start.\n"+
			"Fire lateness is each fire's time on the leader's clock minus its tick. CPU between ticks (2 s to\n"+
			"9 s after each) needs --pid of the leader's agent on this host. The schedules are deleted at the end.",
		withClient(16, benchCron),
		&ucli.IntFlag{Name: "schedules", Value: 10000, Usage: "schedules to create"},
		&ucli.IntFlag{Name: "probes", Value: 50, Usage: "schedules whose job runs (to time job start)"},
		&ucli.IntFlag{Name: "ticks", Value: 3, Usage: "ticks to measure"},
		&ucli.IntFlag{Name: "pid", Usage: "the leader agent's PID on this host, for its CPU between ticks"})
}

// cronResult is bench cron's JSON output.
type cronResult struct {
	Schedules       int       `json:"schedules"`
	Fires           int       `json:"fires"`
	FireP50MS       float64   `json:"fire_lateness_p50_ms"`
	FireP99MS       float64   `json:"fire_lateness_p99_ms"`
	StartP50MS      float64   `json:"start_lateness_p50_ms"`
	StartP99MS      float64   `json:"start_lateness_p99_ms"`
	CPUBetweenTicks []float64 `json:"cpu_between_ticks_percent,omitempty"` // per tick, of one core
	CreateSeconds   float64   `json:"create_seconds"`
}

func benchCron(ctx context.Context, c *ucli.Context, cl *api.Client) error {
	const every = 10 * time.Second
	n, probes, ticks, pid := c.Int("schedules"), c.Int("probes"), c.Int("ticks"), c.Int("pid")
	if n < 1 || probes < 0 || probes > n || ticks < 1 {
		return fmt.Errorf("--schedules >= 1, 0 <= --probes <= --schedules, --ticks >= 1")
	}
	run := benchRunID()
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("bench-%s-%05d", run, i)
	}
	defer func() { // best effort: the schedules would fire forever
		dctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		parallel(16, n, func(i int) error { return cl.DeleteSchedule(dctx, names[i]) })
	}()
	startAt := httpapi.JSONString(time.Now().Truncate(every).Add(every).UTC().Format(time.RFC3339))
	created := time.Now()
	var done atomic.Int64
	p := &progress{every: 2 * time.Second}
	err := parallel(16, n, func(i int) error {
		job := &httpapi.JobSpecInput{Command: httpapi.Argv("true"), Labels: map[string]string{"bench": run},
			Constraints: []string{"bench == none"}, AllowUnplaceable: true}
		if i < probes {
			job = &httpapi.JobSpecInput{Command: httpapi.Argv("true"), Labels: map[string]string{"bench": run}}
		}
		_, err := createSchedule(ctx, cl, httpapi.ScheduleInput{Name: names[i], Cron: "@every 10s", StartAt: startAt, Job: job})
		p.printf("%d of %d schedules created", done.Add(1), n)
		return err
	})
	if err != nil {
		return err
	}
	res := cronResult{Schedules: n, CreateSeconds: round3(time.Since(created).Seconds())}
	first := time.Now().Truncate(every).Add(every)
	for k := range ticks {
		tick := first.Add(time.Duration(k) * every)
		time.Sleep(time.Until(tick.Add(2 * time.Second)))
		c0, w0 := procCPU(pid), time.Now()
		time.Sleep(time.Until(tick.Add(9 * time.Second)))
		c1, w1 := procCPU(pid), time.Now()
		if pid > 0 && c0 >= 0 && c1 >= 0 {
			res.CPUBetweenTicks = append(res.CPUBetweenTicks, round3(100*(c1-c0)/w1.Sub(w0).Seconds()))
		}
		cli.Stderrf("bench cron: tick %d of %d measured", k+1, ticks)
	}
	last := first.Add(time.Duration(ticks-1) * every)
	list, err := cl.ListSchedules(ctx)
	if err != nil {
		return err
	}
	var fire, started []time.Duration
	for _, s := range list {
		if !strings.HasPrefix(s.Spec.Name, "bench-"+run+"-") {
			continue
		}
		probe := s.Spec.Name < names[min(probes, n-1)] || probes == n
		for _, f := range s.Fires {
			if f.Tick.Before(first) || f.Tick.After(last) || f.JobID == "" {
				continue
			}
			fire = append(fire, f.At.Sub(f.Tick))
			if !probe {
				continue
			}
			d, err := waitStarted(ctx, cl, f.JobID)
			if err != nil {
				return err
			}
			started = append(started, d.Attempts[0].StartedAt.Sub(f.Tick))
		}
	}
	res.Fires = len(fire)
	sortDurations(fire)
	sortDurations(started)
	res.FireP50MS, res.FireP99MS = percentileMS(fire, 50), percentileMS(fire, 99)
	res.StartP50MS, res.StartP99MS = percentileMS(started, 50), percentileMS(started, 99)
	return printTable(c, res, []string{"SCHEDULES", "FIRES", "FIRE P50", "FIRE P99", "START P50", "START P99", "CPU BETWEEN TICKS"},
		[]any{n, res.Fires, fmt.Sprintf("%.2f ms", res.FireP50MS), fmt.Sprintf("%.2f ms", res.FireP99MS),
			fmt.Sprintf("%.1f ms", res.StartP50MS), fmt.Sprintf("%.1f ms", res.StartP99MS), fmt.Sprint(res.CPUBetweenTicks)})
}

// waitStarted polls a job until its first attempt has started.
func waitStarted(ctx context.Context, cl *api.Client, id string) (*httpapi.JobDetail, error) {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		d, err := jobDetail(ctx, cl, id)
		if err == nil && len(d.Attempts) > 0 && !d.Attempts[0].StartedAt.IsZero() {
			return d, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("job %s not started after 2m (last error %v)", id, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// procCPU is a local process's user+system CPU seconds, or -1.
func procCPU(pid int) float64 {
	if pid <= 0 {
		return -1
	}
	p, err := procfs.NewProc(pid)
	if err != nil {
		return -1
	}
	st, err := p.Stat()
	if err != nil {
		return -1
	}
	return st.CPUTime()
}
