package bench

import (
	"bytes"
	"strings"
	"testing"
)

// metricsBefore and metricsAfter are a leader's GET /v1/metrics before and
// after a 1,000-job run, cut to the families the cost map reads and a few
// it must skip (a histogram, labelled gauges).
const metricsBefore = `# HELP foreman_events_total Events this node applied since it started, by type.
# TYPE foreman_events_total counter
foreman_events_total{type="attempt.placed"} 10
foreman_events_total{type="attempt.succeeded"} 10
foreman_events_total{type="job.submitted"} 10
# HELP foreman_jobs Jobs in each state, from this node's replica.
# TYPE foreman_jobs gauge
foreman_jobs{state="queued"} 0
foreman_jobs{state="succeeded"} 10
# HELP foreman_raft_commit_seconds Time from raft.Apply on the leader to the entry committed and applied there.
# TYPE foreman_raft_commit_seconds histogram
foreman_raft_commit_seconds_bucket{le="0.0005"} 1
foreman_raft_commit_seconds_bucket{le="+Inf"} 12
foreman_raft_commit_seconds_sum 0.05
foreman_raft_commit_seconds_count 12
# HELP foreman_raft_last_index Index of the last entry in this node's raft log.
# TYPE foreman_raft_last_index gauge
foreman_raft_last_index 120
# HELP foreman_raft_log_appends_total Appends to this node's raft log.
# TYPE foreman_raft_log_appends_total counter
foreman_raft_log_appends_total 100
# HELP foreman_raft_log_bytes_total Data bytes of the entries appended to this node's raft log.
# TYPE foreman_raft_log_bytes_total counter
foreman_raft_log_bytes_total 20000
# HELP foreman_state_commits_total Write transactions of this node's state file.
# TYPE foreman_state_commits_total counter
foreman_state_commits_total 90
# HELP foreman_state_written_bytes_total Bytes bbolt wrote to the state file for those commits.
# TYPE foreman_state_written_bytes_total counter
foreman_state_written_bytes_total 1.2288e+06
# HELP go_memstats_mallocs_total Total number of heap objects allocated, both live and gc-ed.
# TYPE go_memstats_mallocs_total counter
go_memstats_mallocs_total 5e+06
# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.
# TYPE process_cpu_seconds_total counter
process_cpu_seconds_total 3.5
`

var metricsAfter = strings.NewReplacer(
	`type="attempt.placed"} 10`, `type="attempt.placed"} 1010`,
	`type="attempt.succeeded"} 10`, `type="attempt.succeeded"} 1010`,
	`type="job.submitted"} 10`, `type="job.submitted"} 1010`,
	"foreman_raft_last_index 120", "foreman_raft_last_index 170",
	"foreman_raft_log_appends_total 100", "foreman_raft_log_appends_total 140",
	"foreman_raft_log_bytes_total 20000", "foreman_raft_log_bytes_total 420000",
	"foreman_state_commits_total 90", "foreman_state_commits_total 125",
	"foreman_state_written_bytes_total 1.2288e+06", "foreman_state_written_bytes_total 3.2768e+06",
	"go_memstats_mallocs_total 5e+06", "go_memstats_mallocs_total 7.5e+06",
	"process_cpu_seconds_total 3.5", "process_cpu_seconds_total 4.2345",
).Replace(metricsBefore)

func TestNodeCostOfTwoScrapes(t *testing.T) {
	before, err := parseMetrics(strings.NewReader(metricsBefore))
	if err != nil {
		t.Fatal(err)
	}
	after, err := parseMetrics(strings.NewReader(metricsAfter))
	if err != nil {
		t.Fatal(err)
	}
	if got := before[metricEvents]; got != 30 {
		t.Errorf("events summed over types = %v, want 30", got)
	}
	got, err := nodeCostOf("n1", "leader", before, after, 1000)
	if err != nil {
		t.Fatal(err)
	}
	want := nodeCost{
		Name: "n1", Role: "leader",
		CPUUS:          734.5, // 0.7345 s / 1,000 jobs
		RaftEntries:    0.05,
		RaftLogAppends: 0.04,
		RaftLogBytes:   400,
		StateCommits:   0.04, // 0.035 rounded to 2 decimals
		StateBytes:     2048,
		Events:         3,
		Allocs:         2500,
	}
	if got != want {
		t.Errorf("cost\n got %+v\nwant %+v", got, want)
	}

	// A client: no raft or state families; its figures are 0, not an error.
	client := metricSample{metricCPU: 1, metricMallocs: 10}
	if c, err := nodeCostOf("c1", "client", client, metricSample{metricCPU: 1.5, metricMallocs: 1010}, 100); err != nil ||
		c.CPUUS != 5000 || c.Allocs != 10 || c.RaftEntries != 0 || c.StateCommits != 0 {
		t.Errorf("client cost = %+v, %v", c, err)
	}

	// An agent that restarted between the scrapes has no figure.
	if _, err := nodeCostOf("n1", "leader", after, before, 1000); err == nil {
		t.Error("counters that went down gave a cost")
	}
}

func TestHostCPUPerJob(t *testing.T) {
	for _, tc := range []struct {
		name          string
		before, after hostCPU
		jobs          int
		want          float64
	}{
		{"bench excluded", hostCPU{busy: 100, self: 1}, hostCPU{busy: 103, self: 1.5}, 1000, 2500},
		{"the bench alone", hostCPU{busy: 100, self: 1}, hostCPU{busy: 100.4, self: 1.5}, 100, 0}, // ticks vs rusage: never negative
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := hostCPUPerJob(tc.before, tc.after, tc.jobs); got != tc.want {
				t.Errorf("host CPU per job = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestOnLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:18670":        true,
		"http://127.0.0.1:18670": true,
		"[::1]:4646":             true,
		"localhost:4646":         true,
		"10.0.0.5:4646":          false,
		"":                       false,
	} {
		if got := onLoopback(addr); got != want {
			t.Errorf("onLoopback(%q) = %v, want %v", addr, got, want)
		}
	}
}

func TestPrintCost(t *testing.T) {
	host := 1234.4
	var b bytes.Buffer
	err := printCost(&b, &costMap{HostCPUUSPerJob: &host, Nodes: []nodeCost{
		{Name: "n1", Role: "leader", CPUUS: 734.5, RaftEntries: 0.05, Events: 3},
	}})
	if err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"NODE", "ALLOCS/JOB", "n1", "leader", "0.05", "3.00",
		"host (agents, supervisors, jobs, kernel; bench excluded): 1234 CPU-µs/job"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}
