package systest

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
)

// usageJSON is what `foreman usage --json` prints, as far as read here.
type usageJSON struct {
	Enabled bool `json:"enabled"`
	Rows    []struct {
		Key   string `json:"key"`
		Usage struct {
			Attempts  int64 `json:"attempts"`
			CPUUsedMs int64 `json:"cpu_used_ms"`
		} `json:"usage"`
		CPUSeconds float64 `json:"cpu_seconds"`
	} `json:"rows"`
}

// TestSystemUsage (issue 39): after a known workload on three real
// agents, `foreman usage --since 1h --by namespace --json` counts every
// attempt once and gives CPU-seconds within 10% of what the jobs' own
// measurements (the attempts' cpu_time_ns) add up to; the figures stay the
// same after the leader is killed and after the jobs' GC dropped them; bad
// input exits non-zero with one line.
func TestSystemUsage(t *testing.T) {
	c := newSysCluster(t, 3, "--retention", "20s", "--gc-interval", "1s")
	lead := c.leader()
	// A busy loop of about two seconds: sh and the date processes it runs
	// are the attempt's CPU time.
	burn := []string{"sh", "-c", `end=$(( $(date +%s) + 2 )); while [ "$(date +%s)" -lt "$end" ]; do :; done`}
	want := map[string]int{"alpha": 3, "beta": 2}
	ids := map[string][]string{}
	for ns, n := range want {
		for range n {
			ids[ns] = append(ids[ns], submitJob(t, lead, map[string]any{
				"command": burn, "namespace": ns, "driver": "process", "resources": map[string]any{"cpu": "1", "memory": 64},
			}))
		}
	}
	measured := map[string]float64{}
	for ns, list := range ids {
		for _, id := range list {
			j := waitJobState(t, lead, id, "succeeded")
			var full struct {
				Attempts []struct {
					CPUTimeNs int64 `json:"cpu_time_ns"`
				} `json:"attempts"`
			}
			if err := getJSON(lead.url("/v1/jobs/"+id), &full); err != nil || len(full.Attempts) != 1 {
				t.Fatalf("job %s: %v (%s)", id, err, j)
			}
			measured[ns] += float64(full.Attempts[0].CPUTimeNs) / 1e9
		}
	}
	for ns, s := range measured {
		if s < 0.5 {
			t.Fatalf("namespace %s: the attempts measured only %.3f CPU-seconds; the workload did not burn CPU", ns, s)
		}
	}
	check := func(a *agentProc, when string) {
		t.Helper()
		eventually(t, systemTimeout, "usage "+when, func() error {
			r := runForeman(t, c.bin, strings.TrimSuffix(a.url(""), "/"), "usage", "--since", "1h", "--by", "namespace", "--json")
			if r.code != 0 {
				return fmt.Errorf("exit %d: %s", r.code, r.stderr)
			}
			var u usageJSON
			if err := json.Unmarshal([]byte(r.stdout), &u); err != nil {
				return fmt.Errorf("decode %q: %v", r.stdout, err)
			}
			got := map[string]int64{}
			for _, row := range u.Rows {
				got[row.Key] = row.Usage.Attempts
				if m, ok := measured[row.Key]; ok && math.Abs(row.CPUSeconds-m) > 0.1*m {
					t.Fatalf("%s: namespace %s: %.3f CPU-seconds accounted, the attempts measured %.3f (more than 10%% apart)", when, row.Key, row.CPUSeconds, m)
				}
			}
			for ns, n := range want {
				if got[ns] != int64(n) {
					return fmt.Errorf("attempts by namespace %v, want %v", got, want)
				}
			}
			if len(got) != len(want) {
				return fmt.Errorf("rows for %v, want only %v", got, want)
			}
			return nil
		})
	}
	check(lead, "after the workload")
	t.Logf("measured CPU-seconds by namespace: %v", measured)

	// Failover: kill the leader; the new one reads the same.
	lead.kill9()
	lead = c.leader()
	check(lead, "after a leader failover")

	// The jobs' GC drops every job; their usage stays.
	eventually(t, systemTimeout, "the jobs dropped by GC", func() error {
		for _, list := range ids {
			for _, id := range list {
				if _, err := getJob(lead, id); err == nil {
					return fmt.Errorf("job %s still there", id)
				}
			}
		}
		return nil
	})
	check(lead, "after the jobs' GC")

	// The README's other forms.
	addr := strings.TrimSuffix(lead.url(""), "/")
	if r := runForeman(t, c.bin, addr, "usage"); r.code != 0 || !strings.Contains(r.stdout, "NAMESPACE") || !strings.Contains(r.stdout, "alpha") {
		t.Errorf("usage: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if r := runForeman(t, c.bin, addr, "usage", "--by", "user", "--step", "day", "--csv"); r.code != 0 || !strings.HasPrefix(r.stdout, "start,key,attempts,cpu_seconds") {
		t.Errorf("usage --csv: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}

	// Bad input: one line naming the field, a non-zero exit.
	for _, tc := range []struct {
		args  []string
		field string
	}{
		{[]string{"--by", "colour"}, "by"},
		{[]string{"--since", "yesterday"}, "since"},
		{[]string{"--since", "400d"}, "since"},
		{[]string{"--step", "week"}, "step"},
	} {
		r := runForeman(t, c.bin, addr, append([]string{"usage"}, tc.args...)...)
		if r.code == 0 || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 || !strings.Contains(r.stderr, tc.field+":") {
			t.Errorf("usage %v: exit %d, stderr %q: want a non-zero exit and one line naming %s", tc.args, r.code, r.stderr, tc.field)
		}
	}
}
