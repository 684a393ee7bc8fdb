package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"os"
	"sort"
	"strconv"
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/foreman-sched/foreman/api"
	"github.com/foreman-sched/foreman/cli"
	"github.com/foreman-sched/foreman/httpapi"
)

// Command is `foreman bench`: it measures a running cluster through the public API only, so
// the numbers are what any client sees. Every job it submits carries the
// label bench=<run id>; progress goes to stderr, results to stdout.
func Command() *ucli.Command {
	driver := &ucli.StringFlag{Name: "driver", Usage: "driver for the jobs (process or container; default: the node's)"}
	return &ucli.Command{
		Name:  "bench",
		Usage: "measure a running cluster: submit rate, latency, throughput, waves of sleeps",
		Description: "Runs against the agent at --addr / $FOREMAN_ADDR. Times are taken on the client's clock only\n" +
			"(never compared with a node's clock). See docs/benchmarks.md for what each number means.",
		Subcommands: []*ucli.Command{
			benchCommand("submit", "accepted (durable, replicated) submits per second",
				"Jobs carry run_at one hour ahead, so they are accepted and stored but do not run\n"+
					"during the measurement (use --runnable to let them run).",
				benchSubmit, driver,
				&ucli.IntFlag{Name: "jobs", Value: 20000, Usage: "jobs to submit"},
				&ucli.IntFlag{Name: "concurrency", Aliases: []string{"c"}, Value: 64, Usage: "concurrent clients"},
				&ucli.IntFlag{Name: "batch", Value: 1, Usage: "jobs per request (1 = single-job submits)"},
				&ucli.BoolFlag{Name: "runnable", Usage: "submit runnable no-op jobs instead of delayed ones"}),
			benchCommand("latency", "submit → start and submit → finish of no-op jobs, one at a time", "", withClient(4, benchLatency), driver,
				&ucli.IntFlag{Name: "jobs", Value: 200, Usage: "jobs to run (sequentially)"},
				&ucli.DurationFlag{Name: "poll", Value: time.Millisecond, Usage: "interval between GETs of the job"},
				&ucli.IntFlag{Name: "gpus", Usage: "whole GPUs each job asks for (the leader picks the devices; the node isolates them)"},
				&ucli.StringFlag{Name: "gpu-memory", Usage: "a VRAM share of one GPU each job asks for, e.g. 20GiB"}),
			benchCommand("throughput", "completed no-op jobs per second", "", benchThroughput, driver,
				&ucli.IntFlag{Name: "jobs", Value: 5000, Usage: "jobs to run"},
				&ucli.IntFlag{Name: "batch", Value: 1000, Usage: "jobs per submit request"},
				timeoutFlag(10*time.Minute)),
			benchCommand("sleep", "jobs × sleep D, one per node slot, run in waves; reports efficiency = ideal/actual",
				"Each job asks for the smallest node's CPU divided by --per-node, so every node runs\n"+
					"--per-node jobs at a time and the cluster runs (sum over nodes) slots at once.\n"+
					"ideal = ceil(jobs/slots) × duration.",
				timed(benchSleep), driver,
				&ucli.IntFlag{Name: "jobs", Value: 20, Usage: "jobs to run"},
				&ucli.DurationFlag{Name: "duration", Value: 2 * time.Second, Usage: "how long each job sleeps"},
				&ucli.IntFlag{Name: "per-node", Value: 1, Usage: "jobs each node runs at once"},
				timeoutFlag(10*time.Minute)),
			cronCommand(),
			artifactsCommand(driver),
			dagCommand(driver),
			arrayCommand(driver),
			execCommand(driver),
			eventsCommand(driver),
			gangCommand(driver),
			preemptCommand(driver),
			fairshareCommand(driver),
			nodesCommand(driver),
			usageCommand(driver),
		},
	}
}

// benchCommand is one bench: --json, its flags plus the connection flags,
// and its action's error made one line.
func benchCommand(name, usage, description string, action ucli.ActionFunc, flags ...ucli.Flag) *ucli.Command {
	cmd := cli.ClientCommand(name, usage, "", action, append([]ucli.Flag{cli.JSONFlag}, flags...)...)
	cmd.Description = description
	return cmd
}

// timeoutFlag is --timeout: how long a bench runs before it gives up
// (benchClientFor).
func timeoutFlag(d time.Duration) ucli.Flag {
	return &ucli.DurationFlag{Name: "timeout", Value: d, Usage: "give up after"}
}

// benchFunc is a bench's action given its client and the context it runs
// in.
type benchFunc func(ctx context.Context, c *ucli.Context, cl *api.Client) error

// withClient is a bench's action run with a benchClient for conc requests
// at once, in the command's context.
func withClient(conc int, run benchFunc) ucli.ActionFunc {
	return func(c *ucli.Context) error {
		cl, err := benchClient(c, conc)
		if err != nil {
			return err
		}
		return run(c.Context, c, cl)
	}
}

// timed is a bench's action run with a benchClient for 4 requests at
// once and a context that ends after --timeout (timeoutFlag).
func timed(run benchFunc) ucli.ActionFunc {
	return withClient(4, func(ctx context.Context, c *ucli.Context, cl *api.Client) error {
		ctx, cancel := context.WithTimeout(ctx, c.Duration("timeout"))
		defer cancel()
		return run(ctx, c, cl)
	})
}

// benchClient is an API client whose connection pool fits conc concurrent
// requests (the default client keeps 32 idle connections).
func benchClient(c *ucli.Context, conc int) (*api.Client, error) {
	cl, _, err := benchClientHTTP(c, conc)
	return cl, err
}

// benchClientHTTP is benchClient and the HTTP client under it (its TLS
// from the flags), for requests the API client has no method for.
func benchClientHTTP(c *ucli.Context, conc int) (*api.Client, *http.Client, error) {
	addr := ""
	for _, x := range c.Lineage() {
		for _, n := range x.LocalFlagNames() {
			if n == "addr" && addr == "" {
				addr = x.String("addr")
			}
		}
	}
	tlsCfg, err := cli.ClientTLS(c)
	if err != nil {
		return nil, nil, err
	}
	hc := &http.Client{Transport: &http.Transport{
		TLSClientConfig:     tlsCfg,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        conc + 8,
		MaxIdleConnsPerHost: conc + 8,
		IdleConnTimeout:     90 * time.Second,
	}}
	// The token, namespace and TLS files of --token/--namespace/--ca-cert
	// (or FOREMAN_TOKEN...): a bench against a cluster with ACL and TLS on.
	opts := cli.ClientOptions(c)
	opts.HTTPClient = hc
	cl, err := cli.NewClient(addr, opts)
	if err != nil {
		return nil, nil, cli.Exitf(1, "%v", err)
	}
	return cl, hc, nil
}

// benchRunID names one run; its jobs carry the label bench=<id>.
func benchRunID() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return time.Now().UTC().Format("150405") + "-" + hex.EncodeToString(b[:])
}

// noopSpec is a job running `true` once.
func noopSpec(run, driver string) httpapi.JobSpecInput {
	one := 1
	return httpapi.JobSpecInput{
		Name:        "bench",
		Command:     httpapi.Argv("true"),
		Labels:      map[string]string{"bench": run},
		Driver:      driver,
		MaxAttempts: &one,
	}
}

// progress prints a line to stderr at most every interval.
type progress struct {
	every time.Duration
	last  time.Time
}

func (p *progress) printf(format string, args ...any) {
	if time.Since(p.last) < p.every {
		return
	}
	p.last = time.Now()
	note(format, args...)
}

// note prints a line to stderr, every time: progress that is one line per
// step of a slow bench.
func note(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench: "+format+"\n", args...)
}

// percentile of sorted durations in milliseconds (nearest rank).
func percentileMS(sorted []time.Duration, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p/100*float64(len(sorted)))) - 1
	i = max(0, min(i, len(sorted)-1))
	return float64(sorted[i].Microseconds()) / 1000
}

// roundTrips is a bench's round trips, one at a time, summed up: the
// nearest-rank p50 and p99 and the largest, in milliseconds.
type roundTrips struct {
	P50MS float64 `json:"p50_ms"`
	P99MS float64 `json:"p99_ms"`
	MaxMS float64 `json:"max_ms"`
}

// roundTripsHeader heads a table of roundTrips rows.
var roundTripsHeader = []string{"", "P50", "P99", "MAX"}

// roundTripsOf sorts d and sums it up.
func roundTripsOf(d []time.Duration) roundTrips {
	sortDurations(d)
	return roundTrips{P50MS: percentileMS(d, 50), P99MS: percentileMS(d, 99), MaxMS: percentileMS(d, 100)}
}

// row is a table row of r named what.
func (r roundTrips) row(what string) []any {
	return []any{what, ms(r.P50MS), ms(r.P99MS), ms(r.MaxMS)}
}

func sortDurations(d []time.Duration) []time.Duration {
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return d
}

// round3 keeps JSON numbers readable.
func round3(f float64) float64 { return math.Round(f*1000) / 1000 }

// benchRun is one bench's set of jobs: its label and the oldest of the IDs
// the submits returned. Job IDs are ULIDs and lists run newest first, so a
// scan that stops at the oldest ID reads the run's jobs (and any submitted
// after them) whatever the cluster retains from before.
type benchRun struct {
	label  string
	oldest string
	total  int
}

// add records the IDs a submit returned.
func (r *benchRun) add(subs []api.SubmitResponse) {
	for _, s := range subs {
		if r.oldest == "" || s.ID < r.oldest {
			r.oldest = s.ID
		}
		r.total++
	}
}

// submit submits n copies of spec in requests of batch jobs and records
// them. Each job is keyed <label>-<its index>: the keys make a request
// safe to send again after an election that left its outcome unknown
// (retryTransient), the retry returning the jobs the first try created.
func (r *benchRun) submit(ctx context.Context, cl *api.Client, spec httpapi.JobSpecInput, n, batch int) error {
	specs := make([]httpapi.JobSpecInput, min(batch, n))
	for done := 0; done < n; done += batch {
		k := min(batch, n-done)
		for i := range k {
			specs[i] = spec
			specs[i].IdempotencyKey = r.label + "-" + strconv.Itoa(done+i)
		}
		subs, err := retryTransient(ctx, "submit", func() ([]api.SubmitResponse, error) { return submitJobs(ctx, cl, specs[:k]) })
		if err != nil {
			return err
		}
		r.add(subs)
	}
	return nil
}

// count returns how many of the run's jobs are in each state, as the node
// the client talks to sees them; a job not visible there yet is absent.
func (r *benchRun) count(ctx context.Context, cl *api.Client) (map[api.JobState]int, error) {
	out := map[api.JobState]int{}
	cursor := ""
	for {
		page, err := cl.ListJobs(ctx, api.JobQuery{Limit: 1000, Cursor: cursor})
		if err != nil {
			return nil, err
		}
		for _, j := range page.Jobs {
			if j.ID < r.oldest {
				return out, nil
			}
			if j.Spec.Labels["bench"] == r.label {
				out[j.State]++
			}
		}
		if page.NextCursor == "" {
			return out, nil
		}
		cursor = page.NextCursor
	}
}

// outstanding is how many of the run's jobs are not seen terminal yet.
func (r *benchRun) outstanding(ctx context.Context, cl *api.Client) (int, error) {
	counts, err := r.count(ctx, cl)
	if err != nil {
		return 0, err
	}
	left := r.total
	for st, n := range counts {
		if st.Terminal() {
			left -= n
		}
	}
	return left, nil
}

// pendingStates are the job states a run's job may still leave, in the
// order anyPending looks at them: the order a job moves through them
// (waiting → queued → running), so a job that moves on while one pass
// looks is found in a later state or is terminal by then. A retry moves a
// job back (running → retrying → queued), so a pass that finds none is
// confirmed by a full count before the run counts as finished.
var pendingStates = []api.JobState{api.JobWaiting, api.JobRetrying, api.JobQueued, api.JobRunning}

// pendingIn reports whether one of the run's jobs is in state st, from the
// node's state index, newest first, stopping at the run's oldest ID. The
// label is checked here, not by the node: a node filters by label only
// after decoding every job in the state, and a cluster may hold hundreds
// of thousands of older waiting jobs. A job of the run is decoded only
// while it is pending, so a pass near the end of a run costs the node a
// few decodes, not one per job of the run (listing all 5,000 jobs every
// 10 ms was ~8% of the leader's CPU samples during a throughput run).
func (r *benchRun) pendingIn(ctx context.Context, cl *api.Client, st api.JobState) (bool, error) {
	cursor, limit := "", 1
	for {
		page, err := cl.ListJobs(ctx, api.JobQuery{State: st, Limit: limit, Cursor: cursor})
		if err != nil {
			return false, err
		}
		for _, j := range page.Jobs {
			if j.ID < r.oldest {
				return false, nil
			}
			if j.Spec.Labels["bench"] == r.label && j.State == st {
				return true, nil
			}
		}
		if page.NextCursor == "" {
			return false, nil
		}
		cursor, limit = page.NextCursor, 1000 // other clients' newer jobs: page on
	}
}

// anyPending reports whether one of the run's jobs is still pending. It
// looks first in the state where one was found last time (hint), then in
// every pending state in lifecycle order: the first look only saves
// requests, the ordered pass is what makes "none" mean none (pendingStates).
func (r *benchRun) anyPending(ctx context.Context, cl *api.Client, hint *int) (bool, error) {
	if found, err := r.pendingIn(ctx, cl, pendingStates[*hint]); err != nil || found {
		return found, err
	}
	for i, st := range pendingStates {
		found, err := r.pendingIn(ctx, cl, st)
		if err != nil {
			return false, err
		}
		if found {
			*hint = i
			return true, nil
		}
	}
	return false, nil
}

// clusterPending is how many jobs of the whole cluster are pending, from
// the node's state index (GET /v1/jobs/counts: no job is decoded). It is
// for progress lines only: listing the run's pending jobs to count them,
// up to 5,000 jobs in pages every 2 s, was 13% of the CPU of the node the
// bench talks to during a throughput run, and a cluster given to a bench
// runs nothing else.
func clusterPending(ctx context.Context, cl *api.Client) (int, error) {
	counts, err := cl.JobCounts(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, st := range pendingStates {
		n += counts.Counts[st]
	}
	return n, nil
}

// retryTransient runs fn until it succeeds, fails for good (a 4xx), or
// ctx ends. A 5xx or a transport error is transient: a cluster that loses
// its leader under the load being measured elects another within seconds,
// and a bench run that aborts on it measures nothing. Each retry is said on
// stderr, so a run that needed one is visible. It returns what the last
// call of fn returned.
func retryTransient[T any](ctx context.Context, what string, fn func() (T, error)) (T, error) {
	for {
		v, err := fn()
		var ae *api.Error
		if err == nil || (errors.As(err, &ae) && ae.Status < 500) || ctx.Err() != nil {
			return v, err
		}
		cli.Stderrf("bench: %s failed, retrying: %v", what, err)
		select {
		case <-ctx.Done():
			return v, fmt.Errorf("%s: %w (last error: %v)", what, ctx.Err(), err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// waitAllTerminal polls until every job of the run is seen terminal and
// returns when that was first seen. Each poll asks the state index for the
// run's pending jobs only (anyPending) and stops at the first found; a poll
// that finds none is confirmed with a full count of the run.
func waitAllTerminal(ctx context.Context, cl *api.Client, run *benchRun, poll time.Duration) (time.Time, error) {
	p := &progress{every: 2 * time.Second, last: time.Now()}
	hint := 0
	for {
		busy, err := retryTransient(ctx, "poll", func() (bool, error) { return run.anyPending(ctx, cl, &hint) })
		if err != nil {
			return time.Time{}, err
		}
		if !busy {
			end := time.Now()
			left, err := retryTransient(ctx, "count", func() (int, error) { return run.outstanding(ctx, cl) })
			if err != nil {
				return time.Time{}, err
			}
			if left == 0 {
				return end, nil
			}
		}
		if time.Since(p.last) >= p.every {
			if left, err := clusterPending(ctx, cl); err == nil {
				p.printf("%d jobs of the cluster pending (%d submitted)", left, run.total)
			}
		}
		if err := pause(ctx, poll); err != nil {
			return time.Time{}, fmt.Errorf("waiting for the jobs to finish: %w", err)
		}
	}
}
