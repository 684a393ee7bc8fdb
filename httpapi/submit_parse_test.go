package httpapi

import (
	"fmt"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestParseSubmitPathsAgree: the one-pass decode gives exactly what the
// step-by-step one gives (jobs, batch flag, error message) for every body,
// and it does handle the ordinary bodies itself.
func TestParseSubmitPathsAgree(t *testing.T) {
	s := &server{cfg: DefaultConfig()}
	s.cfg.MaxBatchJobs = 3
	tests := []struct {
		name, body, header string
		fast               bool // the fast path must decide this one
	}{
		{"single", `{"name":"a","command":"echo hi","labels":{"t":"x"},"resources":{"cpu":"250m","memory":"1GiB"}}`, "", true},
		{"single argv", `{"command":["sleep","1"],"priority":0,"max_attempts":1,"timeout":"5m","run_at":"2030-01-01T00:00:00Z"}`, "", true},
		{"single with header key", `{"command":"true"}`, "k1", true},
		{"single key and header agree", `{"command":"true","idempotency_key":"k1"}`, "k1", true},
		{"single key and header differ", `{"command":"true","idempotency_key":"k2"}`, "k1", true},
		{"single invalid", `{"command":"true","priority":101}`, "", true},
		{"single array", `{"command":"true","array":"0-9:3%2"}`, "", false},
		{"single array object", `{"command":"true","array":{"start":1,"end":5,"parallel":2}}`, "", false},
		{"single array invalid", `{"command":"true","array":"5-1"}`, "", false},
		{"single array wrong type", `{"command":"true","array":7}`, "", false},
		{"single no command", `{"name":"x"}`, "", true},
		{"batch", `{"jobs":[{"command":"a","idempotency_key":"x"},{"command":["b"],"resources":{"cpu":2}}]}`, "", true},
		{"batch invalid job", `{"jobs":[{"command":"a"},{"command":"b","priority":-1}]}`, "", true},
		{"batch key case", `{"JOBS":[{"command":"a"}]}`, "", true},
		{"batch with header", `{"jobs":[{"command":"a"}]}`, "k", false},
		{"batch too big", `{"jobs":[{"command":"a"},{"command":"a"},{"command":"a"},{"command":"a"}]}`, "", false},
		{"batch empty", `{"jobs":[]}`, "", false},
		{"batch null", `{"jobs":null}`, "", false},
		{"batch null spelled in caps", `{"Jobs":null,"command":"x"}`, "", false},
		{"batch null escaped", `{"jo\u0062s":null,"command":"x"}`, "", false},
		{"batch null element", `{"jobs":[{"command":"a"},null]}`, "", false},
		{"batch empty element", `{"jobs":[{}]}`, "", false},
		{"batch mixed with spec", `{"jobs":[{"command":"a"}],"name":"x"}`, "", false},
		{"batch unknown field", `{"jobs":[{"command":"a","nope":1}]}`, "", false},
		{"batch wrong type", `{"jobs":[{"command":"a","priority":"high"}]}`, "", false},
		{"unknown field", `{"command":"a","nope":1}`, "", false},
		{"wrong type", `{"command":"a","labels":[]}`, "", false},
		{"trailing data", `{"command":"a"} {}`, "", false},
		{"malformed", `{"command":`, "", false},
		{"empty", ``, "", false},
		{"not an object", `[1,2]`, "", false},
		{"null", `null`, "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			jobs, batch, err := s.parseSubmit([]byte(tc.body), tc.header)
			wantJobs, wantBatch, wantErr := s.parseSubmitExact([]byte(tc.body), tc.header)
			if fmt.Sprint(err) != fmt.Sprint(wantErr) {
				t.Fatalf("error %v, want %v", err, wantErr)
			}
			if err == nil && (batch != wantBatch || !reflect.DeepEqual(jobs, wantJobs)) {
				t.Fatalf("got batch=%v %+v\nwant batch=%v %+v", batch, jobs, wantBatch, wantJobs)
			}
			_, _, ok, _ := s.parseSubmitFast([]byte(tc.body), tc.header)
			if tc.fast && !ok {
				t.Fatal("an ordinary body took the slow path")
			}
		})
	}
}

func batchBody(n int) string {
	var b strings.Builder
	b.WriteString(`{"jobs":[`)
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"name":"job-%d","command":["sleep","1"],"resources":{"cpu":"250m","memory":"64MiB"},"labels":{"batch":"b1"},"idempotency_key":"k-%d"}`, i, i)
	}
	b.WriteString(`]}`)
	return b.String()
}

// BenchmarkParseSubmit measures decoding and normalising POST /v1/jobs
// bodies: one job, and a batch of 1000.
func BenchmarkParseSubmit(b *testing.B) {
	s := &server{cfg: DefaultConfig()}
	for _, bc := range []struct {
		name string
		body string
		jobs int
	}{
		{"jobs=1", `{"name":"hello","command":["sleep","1"],"resources":{"cpu":"250m","memory":"64MiB"},"labels":{"team":"a"},"idempotency_key":"k-1"}`, 1},
		{"jobs=1000", batchBody(1000), 1000},
	} {
		b.Run(bc.name, func(b *testing.B) {
			body := []byte(bc.body)
			b.SetBytes(int64(len(body)))
			n := 0
			c0 := cpuTime()
			for b.Loop() {
				jobs, _, err := s.parseSubmit(body, "")
				if err != nil || len(jobs) != bc.jobs {
					b.Fatalf("%d jobs, %v", len(jobs), err)
				}
				n += len(jobs)
			}
			b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "jobs/s")
			// CPU time is steadier than wall time on a shared machine.
			b.ReportMetric(float64(n)/(cpuTime()-c0).Seconds(), "jobs/cpu-s")
		})
	}
}

// cpuTime is the CPU time (user + system) this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
