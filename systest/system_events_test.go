package systest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"

	"github.com/foreman-sched/foreman/api"
	"github.com/foreman-sched/foreman/cli"
	"github.com/foreman-sched/foreman/fsm"
)

// eventFollower follows GET /v1/events on one node at a time, resuming
// from its last event ID whenever it (re)connects, as a client should.
type eventFollower struct {
	mu      sync.Mutex
	target  *agentProc
	cancel  context.CancelFunc
	events  []fsm.Event
	resets  int
	streams int // connections made
	lastErr error
}

func (f *eventFollower) run(ctx context.Context, t *testing.T) {
	for ctx.Err() == nil {
		f.mu.Lock()
		target := f.target
		after := ""
		if n := len(f.events); n > 0 {
			after = f.events[n-1].ID().String()
		}
		sctx, cancel := context.WithCancel(ctx)
		f.cancel = cancel
		f.streams++
		f.mu.Unlock()
		cl, err := cli.NewClient(target.url(""), cli.ClientConfig{})
		if err == nil {
			err = cl.StreamEvents(sctx, api.EventQuery{Topics: []string{"job", "leader"}, After: after}, func(ae api.Event) error {
				e, err := cli.AsServer[fsm.Event](ae, nil)
				if err != nil {
					return err
				}
				f.mu.Lock()
				defer f.mu.Unlock()
				if e.Type == fsm.EventReset {
					f.resets++
					return nil
				}
				f.events = append(f.events, *e)
				return nil
			})
		}
		cancel()
		f.mu.Lock()
		f.lastErr = err
		f.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// moveTo makes the follower reconnect to a, from its last event ID.
func (f *eventFollower) moveTo(a *agentProc) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.target = a
	if f.cancel != nil {
		f.cancel()
	}
}

func (f *eventFollower) snapshot() []fsm.Event {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.events)
}

// submitBatch submits n `true` jobs in one request to any of agents.
func submitBatch(t *testing.T, agents []*agentProc, n int) []string {
	t.Helper()
	jobs := make([]map[string]any, n)
	for i := range jobs {
		jobs[i] = map[string]any{"command": []string{"true"}}
	}
	var ids []string
	eventually(t, systemTimeout, "a batch submit", func() error {
		var errs []error
		for _, a := range agents {
			var out struct {
				Jobs []struct {
					ID string `json:"id"`
				} `json:"jobs"`
			}
			if err := postJSON(a.url("/v1/jobs"), map[string]any{"jobs": jobs}, &out); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", a.name, err))
				continue
			}
			ids = ids[:0]
			for _, j := range out.Jobs {
				ids = append(ids, j.ID)
			}
			return nil
		}
		return errors.Join(errs...)
	})
	return ids
}

// TestSystemEventStream: a client following /v1/events on a follower sees
// every transition of N jobs in raft order with no gap, through a kill -9
// of the leader, moving to another node with its last event ID. "Every
// transition" is checked against each job's timeline, which is replicated
// state: the stream's events of a job must be exactly its timeline.
func TestSystemEventStream(t *testing.T) {
	const perBatch, batches = 250, 4 // half before the kill, half after
	c := newSysCluster(t, 3)
	leader := c.leader()
	fs := c.followers()
	f := &eventFollower{target: fs[0]}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); f.run(ctx, t) }()
	t.Cleanup(func() { cancel(); wg.Wait() })
	eventually(t, systemTimeout, "the stream to open", func() error {
		resp, err := http.Get(fs[0].url("/v1/metrics"))
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return err
		}
		body := string(b)
		if !strings.Contains(body, "foreman_event_subscribers 1") {
			return fmt.Errorf("no subscriber yet")
		}
		return nil
	})

	var ids []string
	for range batches / 2 {
		ids = append(ids, submitBatch(t, []*agentProc{fs[1], fs[0]}, perBatch)...)
	}
	leader.kill9()
	t.Logf("killed the leader %s; moving the stream from %s to %s", leader.name, fs[0].name, fs[1].name)
	f.moveTo(fs[1])
	for range batches / 2 {
		ids = append(ids, submitBatch(t, []*agentProc{fs[1], fs[0]}, perBatch)...)
	}
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	eventually(t, 90*time.Second, fmt.Sprintf("%d jobs succeeded on the stream", len(ids)), func() error {
		done := 0
		for _, e := range f.snapshot() {
			if e.Kind() == "job.succeeded" && want[e.JobID] {
				done++
			}
		}
		if done < len(ids) {
			return fmt.Errorf("%d of %d succeeded", done, len(ids))
		}
		return nil
	})
	evs := f.snapshot()
	f.mu.Lock()
	resets, streams := f.resets, f.streams
	f.mu.Unlock()
	if resets != 0 {
		t.Errorf("%d reset events: the stream lost its place", resets)
	}
	for i := 1; i < len(evs); i++ {
		if !evs[i-1].ID().Less(evs[i].ID()) {
			t.Fatalf("event %d (%s %s) does not follow %s: not in raft order", i, evs[i].ID(), evs[i].Kind(), evs[i-1].ID())
		}
	}
	leaders := 0
	byJob := map[string][]fsm.Event{}
	for _, e := range evs {
		if e.Type == fsm.EventLeader {
			leaders++
		}
		if want[e.JobID] {
			byJob[e.JobID] = append(byJob[e.JobID], e)
		}
	}
	if leaders == 0 {
		t.Errorf("no leader.changed event after the kill")
	}
	cl := apiClient(t, fs[1].url(""), cli.ClientConfig{})
	total := 0
	for _, id := range ids {
		reply, err := cl.JobEvents(context.Background(), id)
		if err != nil {
			t.Fatalf("timeline of %s: %v", id, err)
		}
		tl, err := cli.AsServer[[]fsm.Event](reply, nil)
		if err != nil {
			t.Fatal(err)
		}
		got := byJob[id]
		total += len(*tl)
		if !slices.EqualFunc(got, *tl, func(a, b fsm.Event) bool { return a.ID() == b.ID() && a.Kind() == b.Kind() }) {
			t.Fatalf("job %s: the stream saw\n  %v\nits timeline is\n  %v", id, eventNames(got), eventNames(*tl))
		}
	}
	checkDashboard(t, fs[1])
	t.Logf("%d jobs, %d job events in raft order with no gap over %d connections; %d leader change(s)", len(ids), total, streams, leaders)
}

func eventNames(evs []fsm.Event) string {
	var b strings.Builder
	for _, e := range evs {
		fmt.Fprintf(&b, "%s %s; ", e.ID(), e.Kind())
	}
	return b.String()
}

// checkDashboard: a real agent's /v1/metrics passes promlint, and
// contrib/grafana.json uses only metrics it serves (after running jobs, so
// every vector has been observed).
func checkDashboard(t *testing.T, a *agentProc) {
	t.Helper()
	body, err := httpGet(a.url("/v1/metrics"))
	if err != nil {
		t.Fatal(err)
	}
	// What promtool check metrics checks, on everything a real agent
	// serves (every package's metrics, the Go and process collectors).
	problems, err := promlint.New(strings.NewReader(body)).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
	for _, name := range []string{"foreman_schedule_fire_lateness_seconds", "foreman_event_subscribers", "foreman_attempt_start_duration_seconds"} {
		if !strings.Contains(body, "# TYPE "+name+" ") {
			t.Errorf("/v1/metrics lacks %s", name)
		}
	}
	dash, err := os.ReadFile("contrib/grafana.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range regexp.MustCompile(`\b(foreman|go|process)_[a-z_]+`).FindAllString(string(dash), -1) {
		name = strings.TrimSuffix(name, "_bucket")
		if strings.HasPrefix(name, "foreman_node_used_") && !strings.Contains(body, "# TYPE foreman_node_used_") {
			continue // read from the node's jobs cgroup: absent where it has none (docs/api.md)
		}
		if !strings.Contains(body, "# TYPE "+name+" ") {
			t.Errorf("contrib/grafana.json uses %s, which /v1/metrics does not serve", name)
		}
	}
}
