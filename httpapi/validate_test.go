package httpapi

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/foreman-sched/foreman/fsm"
)

// TestSubmitValidation: every bad input is a 400 naming the field and the
// reason, and nothing reaches the state machine.
func TestSubmitValidation(t *testing.T) {
	a := newTestAPI(t)
	a.addNode("n1", "", 4000, 8192)
	tests := []struct {
		name, body, want string
	}{
		{"missing command", `{"name":"x"}`, "command: must not be empty"},
		{"empty string command", `{"command":"  "}`, "command: must not be empty"},
		{"empty argv", `{"command":[]}`, "command: must not be empty"},
		{"blank program", `{"command":[""]}`, "command[0]: must name a program"},
		{"command object", `{"command":{"a":1}}`, "command: must be an array of strings or a string"},
		{"unknown field", `{"command":"true","colour":"red"}`, `colour: unknown field`},
		{"wrong type", `{"command":"true","priority":"high"}`, "priority: must be an integer"},
		{"malformed json", `{"command":"true",`, "body:"},
		{"trailing data", `{"command":"true"} {}`, "body: unexpected data"},
		{"empty body", ``, "body: empty"},
		{"priority high", `{"command":"true","priority":101}`, "priority: must be between 0 and 100"},
		{"priority negative", `{"command":"true","priority":-1}`, "priority: must be between 0 and 100"},
		{"max attempts zero", `{"command":"true","max_attempts":0}`, "max_attempts: must be between 1 and 100"},
		{"long name", `{"command":"true","name":"` + strings.Repeat("n", 201) + `"}`, "name: must be at most 200 characters"},
		{"bad label key", `{"command":"true","labels":{"-x":"1"}}`, "labels.-x: label keys"},
		{"long label value", `{"command":"true","labels":{"k":"` + strings.Repeat("v", 256) + `"}}`, "labels.k: label values are at most 255"},
		{"reserved env", `{"command":"true","env":{"FOREMAN_JOB_ID":"x"}}`, "env.FOREMAN_JOB_ID: names starting with FOREMAN_"},
		{"bad env name", `{"command":"true","env":{"1X":"x"}}`, "env.1X: variable names"},
		{"negative cpu", `{"command":"true","resources":{"cpu":-5}}`, "resources.cpu: must be between 0"},
		{"absurd cpu", `{"command":"true","resources":{"cpu":2000000}}`, "resources.cpu: must be between 0 and 1000000"},
		{"bad cpu unit", `{"command":"true","resources":{"cpu":"lots"}}`, "resources.cpu:"},
		{"absurd memory", `{"command":"true","resources":{"memory":"17TiB"}}`, "resources.memory:"},
		{"fractional memory number", `{"command":"true","resources":{"memory":1.5}}`, "resources.memory: a bare number is whole MiB"},
		{"negative timeout", `{"command":"true","timeout":"-1s"}`, "timeout: must not be negative"},
		{"bad timeout", `{"command":"true","timeout":"soon"}`, "timeout: invalid duration"},
		{"bad driver", `{"command":"true","driver":"docker"}`, `driver: must be "container", "process" or "http"`},
		{"image with process", `{"command":"true","driver":"process","image":"alpine"}`, "image: the process driver cannot run an image"},
		{"bad network", `{"command":"true","network":"bridge"}`, `network: must be "none" or "host"`},
		{"bad signal", `{"command":"true","kill_signal":"SIGNOPE"}`, `kill_signal: unknown signal "SIGNOPE"`},
		{"bad run_at", `{"command":"true","run_at":"tomorrow"}`, "run_at: must be an RFC 3339 time"},
		{"deadline before run_at", `{"command":"true","run_at":"2030-01-02T00:00:00Z","deadline":"2030-01-01T00:00:00Z"}`, "deadline: must be after run_at"},
		{"bad constraint", `{"command":"true","constraints":["zone ~ a"]}`, "constraints[0]:"},
		{"bad queue", `{"command":"true","queue":"a b"}`, "queue: queue names"},
		{"bad placement", `{"command":"true","placement":"random"}`, `placement: must be "binpack" or "spread"`},
		{"backoff multiplier", `{"command":"true","backoff":{"multiplier":0.5}}`, "backoff.multiplier: must be between 1 and 100"},
		{"backoff max below initial", `{"command":"true","backoff":{"initial":"1m","max":"10s"}}`, "backoff.max: must be at least backoff.initial"},
		{"backoff jitter", `{"command":"true","backoff":{"jitter":2}}`, "backoff.jitter: must be a fraction"},
		{"exit code", `{"command":"true","no_retry_exit_codes":[300]}`, "no_retry_exit_codes[0]: must be an exit code"},
		{"too big for any node", `{"command":"true","resources":{"cpu":"8"}}`, "resources.cpu: 8000m is more than any node has (largest: n1 with 4000m)"},
		{"memory too big", `{"command":"true","resources":{"memory":"16GiB"}}`, "resources.memory: 16GiB is more than any node has (largest: n1 with 8GiB)"},
		{"unknown named resource", `{"command":"true","resources":{"named":{"fpga":1}}}`, `resources.named.fpga: no node has "fpga"`},
		{"no gpus", `{"command":"true","resources":{"gpus":1}}`, `resources.gpus: no node has GPUs`},
		{"gpus as named", `{"command":"true","resources":{"named":{"gpu":1}}}`, `resources.gpus: no node has GPUs`},
		{"negative gpus", `{"command":"true","resources":{"gpus":-1}}`, "resources.gpus: must be between 0 and 1000000 (got -1)"},
		{"gpus conflict", `{"command":"true","resources":{"gpus":2,"named":{"gpu":1}}}`, "resources.gpus: 2 conflicts with resources.named.gpu 1"},
		{"on_gpu_error", `{"command":"true","on_gpu_error":"retry"}`, `on_gpu_error: must be keep or requeue (got "retry")`},
		{"unknown gpu attribute", `{"command":"true","constraints":["gpu.vram >= 40GiB"]}`, "constraints[0]: invalid constraint \"gpu.vram >= 40GiB\": unknown GPU attribute gpu.vram"},
		{"key conflict", `{"command":"true","idempotency_key":"a"}`, "idempotency_key: differs from the Idempotency-Key header"},
		{"after requirement", `{"command":"true","after":["01JX:sometimes"]}`, `after[0]: "01JX:sometimes": "sometimes" is not a requirement (want one of [ok any failed cancelled])`},
		{"after object", `{"command":"true","after":[{"job":"01JX","on":"notok"}]}`, `"notok" is not a requirement`},
		{"after no id", `{"command":"true","after":[":ok"]}`, `a job ID is missing`},
		{"after with depends_on", `{"command":"true","after":["01JX"],"depends_on":["01JY"]}`, "after: set with other parents in depends_on"},
		{"after with condition", `{"command":"true","after":["01JX"],"condition":"always"}`, "after: set with condition"},
		{"after twice", `{"command":"true","after":["01JX","01JX:any"]}`, `after[1]: "01JX" is listed twice`},
		{"singleton without a name", `{"command":"true","singleton":true}`, "singleton: needs a name"},
		{"singleton with condition", `{"command":"true","name":"n","singleton":true,"depends_on":["01JX"],"condition":"always"}`, "singleton: set with depends_on or condition"},
		{"singleton with depends_on", `{"command":"true","name":"n","singleton":true,"depends_on":["01JX"]}`, "singleton: set with depends_on or condition"},
		{"batch empty", `{"jobs":[]}`, "jobs: must contain at least one job"},
		{"batch bad job", `{"jobs":[{"command":"true"},{"command":"true"},{"command":"true","priority":500}]}`, "jobs[2].priority: must be between 0 and 100"},
		{"batch unknown field", `{"jobs":[{"command":"true","nmae":"x"}]}`, "jobs[0].nmae: unknown field"},
		{"batch null job", `{"jobs":[null]}`, "jobs[0]: must be a job spec"},
		{"batch extra field", `{"jobs":[{"command":"true"}],"x":1}`, "x: unknown field"},
		{"batch too big", `{"jobs":[{"command":"true","resources":{"cpu":"5"}}]}`, "jobs[0].resources.cpu: 5000m is more than any node has"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := a.f.AppliedIndex()
			hdr := []string{}
			if tc.name == "key conflict" {
				hdr = []string{HeaderIdempotencyKey, "b"}
			}
			code, body := a.do("POST", "/v1/jobs", tc.body, hdr...)
			if code != http.StatusBadRequest {
				t.Fatalf("status %d, want 400; body %s", code, body)
			}
			e := errorOf(t, body)
			if !strings.Contains(e.Error, tc.want) || e.Code != CodeInvalid {
				t.Fatalf("error %+v, want code %q and message containing %q", e, CodeInvalid, tc.want)
			}
			if got := a.f.AppliedIndex(); got != before {
				t.Fatalf("applied index moved from %d to %d: a refused submit changed state", before, got)
			}
		})
	}
}

// TestNormalizeDefaults: what a minimal spec becomes.
func TestNormalizeDefaults(t *testing.T) {
	in := JobSpecInput{Command: JSONString("echo hi")}
	got, err := in.Normalize()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got.Command, " ") != "/bin/sh -c echo hi" {
		t.Errorf("command %q", got.Command)
	}
	if got.Priority != DefaultPriority || got.MaxAttempts != DefaultMaxAttempts {
		t.Errorf("priority %d max_attempts %d", got.Priority, got.MaxAttempts)
	}
	if got.KillSignal != "SIGTERM" || got.KillTimeout.D() != DefaultKillTimeout || got.Network != "none" || got.Placement != "binpack" {
		t.Errorf("defaults %+v", got)
	}
	if got.Backoff != DefaultBackoff {
		t.Errorf("backoff %+v", got.Backoff)
	}
	zero := 0
	in = JobSpecInput{Command: Argv("true"), Priority: &zero, KillSignal: "int"}
	got, err = in.Normalize()
	if err != nil {
		t.Fatal(err)
	}
	if got.Priority != 0 || got.KillSignal != "SIGINT" {
		t.Errorf("explicit priority 0 → %d, signal %q", got.Priority, got.KillSignal)
	}
}

func TestParseUnits(t *testing.T) {
	cpu := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"500m", 500, true}, {"0.5", 500, true}, {"500", 500, true}, {"2", 2000, true},
		{"1.25", 1250, true}, {"64", 64, true}, {"0", 0, true}, {"-1", 0, false}, {"x", 0, false}, {"", 0, false},
	}
	for _, tc := range cpu {
		got, err := ParseCPU(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseCPU(%q) = %d, %v; want %d ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
	}
	mem := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"256MiB", 256, true}, {"1GiB", 1024, true}, {"256", 256, true}, {"1.5G", 1536, true},
		{"512M", 512, true}, {"1Gi", 1024, true}, {"1TiB", 1 << 20, true}, {"100KiB", 1, true},
		{"17TiB", 0, false}, {"-1", 0, false}, {"lots", 0, false},
	}
	for _, tc := range mem {
		got, err := ParseMemory(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseMemory(%q) = %d, %v; want %d ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

// after: both forms, and a job's spec as returned (depends_on and after
// naming the same parents) submitted again.
func TestNormalizeAfter(t *testing.T) {
	var in JobSpecInput
	if err := decodeStrict([]byte(`{"command":"true","after":["01JA",{"job":"01JB","on":"any"}],"depends_on":["01JA","01JB"]}`), &in); err != nil {
		t.Fatal(err)
	}
	got, err := in.Normalize()
	if err != nil {
		t.Fatal(err)
	}
	want := []fsm.AfterDep{{Job: "01JA", On: fsm.AfterOK}, {Job: "01JB", On: fsm.AfterAny}}
	if !slices.Equal(got.After, want) || !slices.Equal(got.DependsOn, []string{"01JA", "01JB"}) || got.Condition != "" {
		t.Fatalf("after %+v depends_on %v condition %q", got.After, got.DependsOn, got.Condition)
	}
	in.DependsOn = []string{"01JB", "01JA"} // another order: not the returned form
	if _, err := in.Normalize(); err == nil || !strings.Contains(err.Error(), "after: set with other parents in depends_on") {
		t.Fatalf("depends_on in another order: %v", err)
	}
}
