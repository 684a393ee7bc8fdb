package httpapi

import (
	"fmt"
	"testing"

	"github.com/foreman-sched/foreman/fsm"
)

// The namespace label is bounded: namespaces past MaxMetricNamespaces (by
// name) add up under OtherNamespace, and no job is lost from the sums.
func TestNamespaceJobsLabelBounded(t *testing.T) {
	var counts []fsm.NamespaceCount
	for i := range fsm.MaxMetricNamespaces + 20 {
		counts = append(counts, fsm.NamespaceCount{Namespace: fmt.Sprintf("ns%03d", i), State: fsm.JobQueued, Jobs: 2})
	}
	counts = append(counts, fsm.NamespaceCount{Namespace: "", State: fsm.JobRunning, Jobs: 1})
	labels := map[string]bool{}
	total := 0
	namespaceJobs(counts, func(ns string, st fsm.JobState, n int) {
		labels[ns] = true
		total += n
	})
	if len(labels) != fsm.MaxMetricNamespaces+1 || !labels[fsm.OtherNamespace] || !labels["default"] {
		t.Fatalf("%d labels (want %d, with %s and default): %v", len(labels), fsm.MaxMetricNamespaces+1, fsm.OtherNamespace, labels)
	}
	if want := 2*(fsm.MaxMetricNamespaces+20) + 1; total != want {
		t.Fatalf("jobs summed over labels = %d, want %d", total, want)
	}
}
