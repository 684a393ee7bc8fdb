package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/foreman-sched/foreman/api"
	"github.com/foreman-sched/foreman/cli"
)

// eventsResult is the outcome of foreman bench events: the submit and
// throughput figures with no event stream open and with --subscribers
// streams reading every event, alternating in one run (medians over the
// rounds), and the events those streams received per second meanwhile.
type eventsResult struct {
	Subscribers int `json:"subscribers"`
	Rounds      int `json:"rounds"`
	// Medians, jobs per second.
	Submit0           float64 `json:"submit_jobs_per_second_0"`
	SubmitN           float64 `json:"submit_jobs_per_second_n"`
	Throughput0       float64 `json:"throughput_jobs_per_second_0"`
	ThroughputN       float64 `json:"throughput_jobs_per_second_n"`
	SubmitCostPct     float64 `json:"submit_cost_percent"`     // (0 - n) / 0
	ThroughputCostPct float64 `json:"throughput_cost_percent"` // (0 - n) / 0
	// Events received by all the streams together per second, median.
	DeliveredPerSecond float64       `json:"events_delivered_per_second"`
	Runs               []eventsRound `json:"runs"`
}

type eventsRound struct {
	Round       int     `json:"round"`
	Subscribers int     `json:"subscribers"`
	Submit      float64 `json:"submit_jobs_per_second"`
	Throughput  float64 `json:"throughput_jobs_per_second"`
	Delivered   float64 `json:"events_delivered_per_second,omitempty"`
}

func eventsCommand(driver *ucli.StringFlag) *ucli.Command {
	return benchCommand("events", "what open event streams cost: bench submit and bench throughput with 0 and N subscribers, alternating",
		"Each round runs `foreman bench submit` and `foreman bench throughput` (this binary, as child\n"+
			"processes) once with no stream open and once with --subscribers streams of GET /v1/events that\n"+
			"read every event (counting them, not decoding them). The streams run in this process: on a\n"+
			"shared machine they compete with the node for the same cores, so the cost includes theirs.",
		benchEvents, driver,
		&ucli.IntFlag{Name: "subscribers", Value: 100, Usage: "event streams open in the second half of each round"},
		&ucli.IntFlag{Name: "rounds", Value: 3, Usage: "rounds (each: 0 streams, then --subscribers)"},
		&ucli.IntFlag{Name: "jobs", Value: 5000, Usage: "jobs of each bench submit"},
		&ucli.IntFlag{Name: "throughput-jobs", Value: 2000, Usage: "jobs of each bench throughput"})
}

func benchEvents(c *ucli.Context) error {
	subs, rounds := c.Int("subscribers"), c.Int("rounds")
	if subs < 1 || rounds < 1 || c.Int("jobs") < 1 || c.Int("throughput-jobs") < 1 {
		return fmt.Errorf("--subscribers, --rounds, --jobs and --throughput-jobs must be at least 1")
	}
	cl, err := benchClient(c, subs)
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	child := func(v any, args ...string) error {
		args = append([]string{"bench"}, args...)
		args = append(args, "--json")
		if a := clientAddr(c); a != "" {
			args = append(args, "--addr", a)
		}
		if d := c.String("driver"); d != "" {
			args = append(args, "--driver", d)
		}
		cmd := exec.CommandContext(c.Context, self, args...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return fmt.Errorf("foreman %v: %v: %s", args, err, bytes.TrimSpace(stderr.Bytes()))
		}
		return json.Unmarshal(out, v)
	}
	res := eventsResult{Subscribers: subs, Rounds: rounds}
	var submit, thr [2][]float64
	var delivered []float64
	for r := 1; r <= rounds; r++ {
		// Alternate which goes first: a round's first measurement pays for
		// what the previous one left (the store grew by its jobs).
		order := []int{0, 1}
		if r%2 == 0 {
			order = []int{1, 0}
		}
		for _, i := range order {
			k := []int{0, subs}[i]
			var streams *eventStreams
			if k > 0 {
				if streams, err = openStreams(c.Context, cl, k); err != nil {
					return err
				}
			}
			var s struct {
				JobsPerSecond float64 `json:"jobs_per_second"`
			}
			var th struct {
				CompletedPerSecond float64 `json:"completed_per_second"`
			}
			err := drain(c.Context, cl)
			if err == nil {
				err = child(&s, "submit", "--jobs", fmt.Sprint(c.Int("jobs")))
			}
			if err == nil {
				// The submitted jobs run now; throughput is measured on an
				// idle executor, not behind them.
				err = drain(c.Context, cl)
			}
			var got int64
			t0 := time.Now()
			if err == nil {
				if streams != nil {
					got = streams.events.Load()
				}
				err = child(&th, "throughput", "--jobs", fmt.Sprint(c.Int("throughput-jobs")))
			}
			run := eventsRound{Round: r, Subscribers: k, Submit: s.JobsPerSecond, Throughput: th.CompletedPerSecond}
			if streams != nil {
				run.Delivered = round3(float64(streams.events.Load()-got) / time.Since(t0).Seconds())
				streams.close()
			}
			if err != nil {
				return err
			}
			res.Runs = append(res.Runs, run)
			submit[i] = append(submit[i], run.Submit)
			thr[i] = append(thr[i], run.Throughput)
			if k > 0 {
				delivered = append(delivered, run.Delivered)
			}
			cli.Stderrf("bench events: round %d, %d streams: submit %.0f jobs/s, throughput %.0f jobs/s", r, k, run.Submit, run.Throughput)
		}
	}
	res.Submit0, res.SubmitN = median(submit[0]), median(submit[1])
	res.Throughput0, res.ThroughputN = median(thr[0]), median(thr[1])
	res.SubmitCostPct, res.ThroughputCostPct = costPct(res.Submit0, res.SubmitN), costPct(res.Throughput0, res.ThroughputN)
	res.DeliveredPerSecond = median(delivered)
	return printTable(c, res, []string{"STREAMS", "SUBMIT JOBS/S", "THROUGHPUT JOBS/S", "EVENTS DELIVERED/S"},
		[]any{0, fmt.Sprintf("%.0f", res.Submit0), fmt.Sprintf("%.0f", res.Throughput0), "-"},
		[]any{subs, fmt.Sprintf("%.0f", res.SubmitN), fmt.Sprintf("%.0f", res.ThroughputN), fmt.Sprintf("%.0f", res.DeliveredPerSecond)},
		[]any{"cost", fmt.Sprintf("%.1f%%", res.SubmitCostPct), fmt.Sprintf("%.1f%%", res.ThroughputCostPct), ""})
}

// drain waits until the cluster has no queued, running or retrying job
// (the jobs of the previous measurement ran), for at most 5 minutes.
func drain(ctx context.Context, cl *api.Client) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	for {
		n, err := cl.JobCounts(ctx)
		if err != nil {
			return fmt.Errorf("waiting for the previous jobs to finish: %w", err)
		}
		busy := n.Counts[api.JobQueued] + n.Counts[api.JobRunning] + n.Counts[api.JobRetrying]
		if busy == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for the previous jobs to finish: %d still queued, running or retrying", busy)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// clientAddr is the --addr given anywhere on the command line ("" for the
// default).
func clientAddr(c *ucli.Context) string {
	for _, x := range c.Lineage() {
		if slices.Contains(x.LocalFlagNames(), "addr") {
			return x.String("addr")
		}
	}
	return ""
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 0 {
		return round3((s[len(s)/2-1] + s[len(s)/2]) / 2)
	}
	return s[len(s)/2]
}

func costPct(base, with float64) float64 {
	if base == 0 {
		return 0
	}
	return round3((base - with) / base * 100)
}

// eventStreams are open GET /v1/events streams counting what they read.
type eventStreams struct {
	events atomic.Int64
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// openStreams opens n streams and returns once the node has answered
// every one (from then on they receive every event).
func openStreams(ctx context.Context, cl *api.Client, n int) (*eventStreams, error) {
	ctx, cancel := context.WithCancel(ctx)
	s := &eventStreams{cancel: cancel}
	errs := make(chan error, n)
	for range n {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			body, err := cl.OpenEvents(ctx, api.EventQuery{})
			errs <- err
			if err != nil {
				return
			}
			defer body.Close()
			// Count "\nid: " (every event's first line follows a blank
			// line) in large reads, without decoding: the node's cost is
			// what is measured, and these readers share its cores.
			countEventIDs(body, &s.events)
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			s.close()
			return nil, fmt.Errorf("opening an event stream: %w", err)
		}
	}
	return s, nil
}

// countEventIDs adds the events of an SSE body to n as they arrive,
// until the body ends. The last bytes of each read are kept for the next,
// so that a line split between two reads is counted, once.
func countEventIDs(body io.Reader, n *atomic.Int64) {
	sep := []byte("\nid: ")
	buf := make([]byte, len(sep)-1+64<<10)
	kept := 0
	for {
		k, err := body.Read(buf[kept:])
		end := kept + k
		n.Add(int64(bytes.Count(buf[:end], sep)))
		kept = copy(buf, buf[max(0, end-(len(sep)-1)):end])
		if err != nil {
			return
		}
	}
}

func (s *eventStreams) close() {
	s.cancel()
	s.wg.Wait()
}
