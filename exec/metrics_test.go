package exec

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func writeFiles(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for p, body := range files {
		p = filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestNodeUsageMetrics: a node's used CPU and memory come from its jobs
// cgroup, in either cgroup version, and a node with no cgroup has no
// series.
func TestNodeUsageMetrics(t *testing.T) {
	v2, v1 := t.TempDir(), t.TempDir()
	writeFiles(t, v2, map[string]string{
		"cgroup.controllers":        "cpu memory pids\n",
		"foreman/n1/cpu.stat":       "usage_usec 2500000\nuser_usec 2000000\nsystem_usec 500000\n",
		"foreman/n1/memory.current": "10485760\n",
	})
	writeFiles(t, v1, map[string]string{
		"cpuacct/foreman/n2/cpuacct.usage":        "1500000000\n",
		"memory/foreman/n2/memory.usage_in_bytes": "2097152\n",
	})
	for _, tc := range []struct {
		name, root, node string
		want             map[string]float64 // family → value
	}{
		{"v2", v2, "n1", map[string]float64{"foreman_node_used_cpu_seconds_total": 2.5, "foreman_node_used_memory_bytes": 10485760}},
		{"v1", v1, "n2", map[string]float64{"foreman_node_used_cpu_seconds_total": 1.5, "foreman_node_used_memory_bytes": 2097152}},
		{"no cgroup", t.TempDir(), "n3", map[string]float64{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &usageCollector{root: tc.root, nodes: map[string]string{}}
			reg := prometheus.NewPedanticRegistry()
			reg.MustRegister(c)
			stop := c.watch(tc.node, "/foreman/"+tc.node)
			got := gather(t, reg, tc.node)
			if len(got) != len(tc.want) {
				t.Fatalf("series %v, want %v", got, tc.want)
			}
			for name, v := range tc.want {
				if got[name] != v {
					t.Errorf("%s = %v, want %v", name, got[name], v)
				}
			}
			stop()
			if got := gather(t, reg, tc.node); len(got) != 0 {
				t.Fatalf("series after the worker stopped: %v", got)
			}
		})
	}
}

// gather returns each family's value for node.
func gather(t *testing.T, reg *prometheus.Registry, node string) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			if len(m.GetLabel()) != 1 || m.GetLabel()[0].GetValue() != node {
				t.Fatalf("%s: labels %v, want node=%s", mf.GetName(), m.GetLabel(), node)
			}
			out[mf.GetName()] = m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return out
}
