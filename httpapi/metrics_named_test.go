package httpapi

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// familiesOf parses a text exposition into family name → series count.
func familiesOf(t *testing.T, body string) map[string]int {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("parse: %v\n%s", err, body)
	}
	out := map[string]int{}
	for name, mf := range mfs {
		out[name] = len(mf.GetMetric())
	}
	return out
}

func TestMetricsNamed(t *testing.T) {
	a := newTestAPI(t)
	a.addNode("n1", "127.0.0.1:1", 1000, 1000)
	a.addNode("n2", "127.0.0.1:2", 1000, 1000)
	a.place(a.submit(`{"command":["true"]}`), "n1")
	_, whole := a.do("GET", "/v1/metrics", "")
	all := familiesOf(t, whole)

	for _, names := range [][]string{
		{"process_cpu_seconds_total"},
		{"process_cpu_seconds_total", "foreman_raft_last_index", "foreman_events_total"},
		{"foreman_node_alive", "go_goroutines"},
		{"foreman_node_capacity", "foreman_jobs", "foreman_node_capacity"},
	} {
		q := "?name=" + strings.Join(names, "&name=")
		code, body := a.do("GET", "/v1/metrics"+q, "")
		if code != http.StatusOK {
			t.Fatalf("%s: %d %s", q, code, body)
		}
		got := familiesOf(t, body)
		want := map[string]int{}
		for _, n := range names {
			if all[n] == 0 {
				t.Fatalf("the whole scrape has no %s", n)
			}
			want[n] = all[n]
		}
		if len(got) != len(want) {
			t.Errorf("%s: families %v, want %v", q, got, want)
		}
		for n, c := range want {
			// Counters may move between the two scrapes; the series do not.
			if got[n] != c {
				t.Errorf("%s: %s has %d series, the whole scrape %d", q, n, got[n], c)
			}
		}
	}
	if _, b := a.do("GET", "/v1/metrics?name=foreman_node_alive", ""); familiesOf(t, b)["foreman_node_alive"] != 2 {
		t.Errorf("foreman_node_alive: %v, want one series per node", familiesOf(t, b))
	}
	if code, b := a.do("GET", "/v1/metrics?name=no_such_family", ""); code != http.StatusOK || len(familiesOf(t, b)) != 0 {
		t.Errorf("unknown name: %d %q, want 200 and no family", code, b)
	}
	for _, bad := range []string{"", "9lives", "a-b", "a%20b"} {
		code, b := a.do("GET", "/v1/metrics?name=process_cpu_seconds_total&name="+bad, "")
		if code != http.StatusBadRequest || !strings.Contains(errorOf(t, b).Error, "name") {
			t.Errorf("name=%q: %d %s, want 400 naming the field", bad, code, b)
		}
	}
}

// A named scrape stops at the first sources that hold every name: the
// per-node series, last, are not built for a scrape that needs none.
func TestGatherNamedStopsWhenFound(t *testing.T) {
	var called []string
	source := func(name string, families ...string) prometheus.Gatherer {
		return prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
			called = append(called, name)
			var out []*dto.MetricFamily
			for _, f := range families {
				out = append(out, &dto.MetricFamily{Name: &f})
			}
			return out, nil
		})
	}
	sources := prometheus.Gatherers{source("process", "a", "b"), source("state", "c"), source("nodes", "d")}
	for _, tc := range []struct {
		want   []string
		called []string
		got    []string
	}{
		{[]string{"a"}, []string{"process"}, []string{"a"}},
		{[]string{"a", "b"}, []string{"process"}, []string{"a", "b"}},
		{[]string{"c", "a"}, []string{"process", "state"}, []string{"a", "c"}},
		{[]string{"d"}, []string{"process", "state", "nodes"}, []string{"d"}},
		{[]string{"zz"}, []string{"process", "state", "nodes"}, nil},
	} {
		called = nil
		want := map[string]bool{}
		for _, n := range tc.want {
			want[n] = true
		}
		mfs, err := gatherNamed(sources, want)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, mf := range mfs {
			got = append(got, mf.GetName())
		}
		if !slices.Equal(called, tc.called) || !slices.Equal(got, tc.got) {
			t.Errorf("want %v: gathered %v and got %v; want %v and %v", tc.want, called, got, tc.called, tc.got)
		}
	}
}
