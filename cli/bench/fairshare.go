package bench

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/foreman-sched/foreman/api"
	"github.com/foreman-sched/foreman/cli"
	"github.com/foreman-sched/foreman/fsm"
	"github.com/foreman-sched/foreman/httpapi"
)

// fairshareCommand is `foreman bench fairshare`: two namespaces with the
// given shares flood the cluster with short sleep jobs; each one's
// fraction of the slot-seconds over the window is measured from its
// attempts' start and finish times.
func fairshareCommand(driver ucli.Flag) *ucli.Command {
	return benchCommand("fairshare", "two namespaces flood the cluster: each one's fraction of the slot-seconds vs its share",
		"Sets the shares of two namespaces (--namespaces), keeps --backlog jobs of each queued (topping up every\n"+
			"200 ms from GET /v1/namespaces) for --warmup + --window, then measures each namespace's slot-seconds\n"+
			"inside the window from its attempts' started/finished times (the nodes' clocks; the window starts\n"+
			"--warmup after the run's first start). With --alone D, the second namespace then stops and the first\n"+
			"floods alone for D: its fraction of the cluster's slot-seconds over the last D/2 is reported.\n"+
			"Every job asks for the smallest node's CPU / --per-node, so the cluster has (sum over nodes) slots.",
		timed(benchFairShare), driver,
		&ucli.StringFlag{Name: "shares", Value: "1:1", Usage: "the two namespaces' shares, A:B"},
		&ucli.StringFlag{Name: "namespaces", Value: "bench-fs-a,bench-fs-b", Usage: "the two namespaces (their share is set; their other settings are kept)"},
		&ucli.DurationFlag{Name: "window", Value: 2 * time.Minute, Usage: "measured window"},
		&ucli.DurationFlag{Name: "warmup", Value: 10 * time.Second, Usage: "flooding before the window starts"},
		&ucli.DurationFlag{Name: "job-time", Value: time.Second, Usage: "how long each job sleeps"},
		&ucli.IntFlag{Name: "per-node", Value: 6, Usage: "jobs each node runs at once"},
		&ucli.DurationFlag{Name: "alone", Usage: "then flood the first namespace alone for this long (0: skip)"},
		timeoutFlag(30*time.Minute))
}

// FairShareResult is what foreman bench fairshare reports.
type FairShareResult struct {
	Namespaces    [2]string  `json:"namespaces"`
	Shares        [2]int64   `json:"shares"`
	Target        [2]float64 `json:"target"`   // share / sum
	Fraction      [2]float64 `json:"fraction"` // of the window's slot-seconds used by the two
	Error         [2]float64 `json:"error"`    // fraction − target (points of 1)
	Nodes         int        `json:"nodes"`
	Slots         int        `json:"slots"`
	CPUPerJob     int64      `json:"cpu_per_job"`
	JobSeconds    float64    `json:"job_seconds"`
	WindowSeconds float64    `json:"window_seconds"`
	Utilization   float64    `json:"utilization"` // slot-seconds used / (slots × window)
	Jobs          int        `json:"jobs"`        // jobs submitted
	// AloneFraction is the first namespace's fraction of the cluster's
	// slot-seconds while it flooded alone (0 without --alone).
	AloneFraction float64 `json:"alone_fraction,omitempty"`
	// AloneOfUsed is its fraction of the slot-seconds both namespaces
	// used then (1: the other's last attempts were over).
	AloneOfUsed float64 `json:"alone_of_used,omitempty"`
}

// fairRun is one namespace's flood.
type fairRun struct {
	ns   string
	ids  []string
	spec httpapi.JobSpecInput
}

func benchFairShare(ctx context.Context, c *ucli.Context, cl *api.Client) error {
	var shares [2]int64
	a, b, ok := strings.Cut(c.String("shares"), ":")
	var errA, errB error
	shares[0], errA = strconv.ParseInt(a, 10, 64)
	shares[1], errB = strconv.ParseInt(b, 10, 64)
	if !ok || errA != nil || errB != nil || shares[0] < 1 || shares[1] < 1 {
		return cli.Exitf(2, "--shares %q: want A:B, two positive integers", c.String("shares"))
	}
	names := strings.Split(c.String("namespaces"), ",")
	if len(names) != 2 || names[0] == "" || names[1] == "" || names[0] == names[1] {
		return cli.Exitf(2, "--namespaces %q: want two different names A,B", c.String("namespaces"))
	}
	window, warmup, jobTime, perNode, alone := c.Duration("window"), c.Duration("warmup"), c.Duration("job-time"), c.Int("per-node"), c.Duration("alone")
	if window <= 0 || warmup < 0 || jobTime <= 0 || perNode < 1 || alone < 0 {
		return cli.Exitf(2, "--window and --job-time must be positive, --per-node at least 1, --warmup and --alone not negative")
	}
	usable, cpu, slots, err := cpuSlots(ctx, c, cl, perNode)
	if err != nil {
		return err
	}
	for i, ns := range names {
		cur, err := cl.GetNamespace(ctx, ns)
		if err != nil {
			return err
		}
		mr := cur.MaxRunning
		spec := api.NamespaceSpec{MaxRunning: &mr, MaxCPU: cur.MaxCPU, MaxMemory: cur.MaxMemory, Drivers: cur.Drivers,
			AllowRoot: cur.AllowRoot, Volumes: cur.Volumes, Share: shares[i]}
		if _, err := cl.SetNamespace(ctx, ns, spec); err != nil {
			return fmt.Errorf("namespace %s: %w", ns, err)
		}
	}
	run := benchRunID()
	runs := [2]*fairRun{}
	for i, ns := range names {
		spec := slotSpec(run, c.String("driver"), jobTime, cpu)
		spec.Namespace = ns
		runs[i] = &fairRun{ns: ns, spec: spec}
	}
	total := shares[0] + shares[1]
	cli.Stderrf("bench fairshare: namespaces %s:%s with shares %d:%d, %d slots of %dm on %d nodes, jobs of %s; warm-up %s, window %s",
		names[0], names[1], shares[0], shares[1], slots, cpu, len(usable), jobTime, warmup, window)
	// Flood both for warm-up + window (+ a margin for the nodes' clocks),
	// then the first alone.
	end := time.Now().Add(warmup + window + 2*time.Second)
	if err := flood(ctx, cl, runs[:], slots, end); err != nil {
		return err
	}
	var aloneFrom time.Time
	if alone > 0 {
		if err := cancelQueued(ctx, cl, runs[1]); err != nil {
			return err
		}
		aloneFrom = time.Now()
		if err := flood(ctx, cl, runs[:1], slots, aloneFrom.Add(alone)); err != nil {
			return err
		}
	}
	for _, r := range runs {
		if err := cancelQueued(ctx, cl, r); err != nil {
			return err
		}
	}
	// Measure from the attempts: the window starts warmup after the run's
	// first start.
	spans := [2][][2]time.Time{}
	var first time.Time
	for i, r := range runs {
		for _, id := range r.ids {
			d, err := waitTerminal(ctx, cl, id, 50*time.Millisecond)
			if err != nil {
				return err
			}
			for _, at := range d.Attempts {
				if at.StartedAt.IsZero() {
					continue
				}
				fin := at.FinishedAt
				if fin.IsZero() {
					fin = time.Now()
				}
				spans[i] = append(spans[i], [2]time.Time{at.StartedAt, fin})
				if first.IsZero() || at.StartedAt.Before(first) {
					first = at.StartedAt
				}
			}
		}
	}
	w0 := first.Add(warmup)
	w1 := w0.Add(window)
	var used [2]float64
	for i := range spans {
		used[i] = slotSeconds(spans[i], w0, w1)
	}
	res := FairShareResult{Namespaces: [2]string{names[0], names[1]}, Shares: shares, Nodes: len(usable), Slots: slots, CPUPerJob: cpu,
		JobSeconds: jobTime.Seconds(), WindowSeconds: window.Seconds(), Jobs: len(runs[0].ids) + len(runs[1].ids)}
	sum := used[0] + used[1]
	for i := range 2 {
		res.Target[i] = round3(float64(shares[i]) / float64(total))
		if sum > 0 {
			res.Fraction[i] = round3(used[i] / sum)
		}
		res.Error[i] = round3(res.Fraction[i] - res.Target[i])
	}
	res.Utilization = round3(sum / (float64(slots) * window.Seconds()))
	if alone > 0 {
		// The second half of the alone phase: the other's last attempts
		// are over by then.
		a0 := aloneFrom.Add(alone / 2)
		a1 := aloneFrom.Add(alone)
		mine, other := slotSeconds(spans[0], a0, a1), slotSeconds(spans[1], a0, a1)
		res.AloneFraction = round3(mine / (float64(slots) * (a1.Sub(a0)).Seconds()))
		if mine+other > 0 {
			res.AloneOfUsed = round3(mine / (mine + other))
		}
	}
	return printResult(c, res, func(w io.Writer) error {
		var rows [][]any
		for i := range 2 {
			rows = append(rows, []any{names[i], shares[i], fmt.Sprintf("%.1f%%", 100*res.Target[i]), fmt.Sprintf("%.1f%%", 100*res.Fraction[i]),
				fmt.Sprintf("%+.1f points", 100*res.Error[i])})
		}
		if err := writeTable(w, []string{"NAMESPACE", "SHARE", "TARGET", "FRACTION", "ERROR"}, rows...); err != nil {
			return err
		}
		fmt.Fprintf(w, "%d slots, window %s, utilization %.1f%%, %d jobs\n", slots, window, 100*res.Utilization, res.Jobs)
		if alone > 0 {
			fmt.Fprintf(w, "%s alone: %.1f%% of the slots (%.1f%% of the slot-seconds used)\n", names[0], 100*res.AloneFraction, 100*res.AloneOfUsed)
		}
		return nil
	})
}

// flood keeps a backlog of slots queued jobs in each namespace of runs
// until end, topping up every 200 ms from GET /v1/namespaces.
func flood(ctx context.Context, cl *api.Client, runs []*fairRun, slots int, end time.Time) error {
	for time.Now().Before(end) {
		list, err := cl.ListNamespaces(ctx)
		if err != nil {
			return err
		}
		queued := map[string]int{}
		for _, n := range list {
			queued[n.Name] = n.Usage.Jobs[api.JobQueued]
		}
		for _, r := range runs {
			if want := slots - queued[r.ns]; want > 0 {
				specs := make([]httpapi.JobSpecInput, want)
				for i := range specs {
					specs[i] = r.spec
				}
				subs, err := submitJobs(ctx, cl, specs)
				if err != nil {
					return err
				}
				for _, s := range subs {
					r.ids = append(r.ids, s.ID)
				}
			}
		}
		if err := pause(ctx, 200*time.Millisecond); err != nil {
			return err
		}
	}
	return nil
}

// cancelQueued cancels the run's jobs that have not started.
func cancelQueued(ctx context.Context, cl *api.Client, r *fairRun) error {
	for cursor := ""; ; {
		page, err := cl.ListJobs(ctx, api.JobQuery{State: api.JobQueued, Labels: map[string]string{"bench": r.spec.Labels["bench"]}, Limit: 1000, Cursor: cursor})
		if err != nil {
			return err
		}
		for _, j := range page.Jobs {
			if fsm.NamespaceOf(j.Spec.Namespace) != r.ns {
				continue
			}
			if _, err := cl.CancelJob(ctx, j.ID, "bench fairshare: done"); err != nil && !isConflict(err) {
				return err
			}
		}
		if page.NextCursor == "" {
			return nil
		}
		cursor = page.NextCursor
	}
}

// isConflict: the job ended (or started and was cancelled) meanwhile.
func isConflict(err error) bool {
	ae, ok := err.(*api.Error)
	return ok && (ae.Status == 409 || ae.Status == 404)
}

// slotSeconds is the time the spans spend inside [w0, w1], summed.
func slotSeconds(spans [][2]time.Time, w0, w1 time.Time) float64 {
	var s float64
	for _, sp := range spans {
		a, b := sp[0], sp[1]
		if a.Before(w0) {
			a = w0
		}
		if b.After(w1) {
			b = w1
		}
		if b.After(a) {
			s += b.Sub(a).Seconds()
		}
	}
	return s
}
