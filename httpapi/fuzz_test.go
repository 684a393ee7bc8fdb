package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/foreman-sched/foreman/fsm"
)

// Fuzz targets of the API's spec decoders and validators (docs/security.md,
// "Fuzzing"). Their seeds run in every plain `go test`; `make fuzz`
// (scripts/fuzz.sh) fuzzes each for longer. A crash the fuzzer finds is
// kept under testdata/fuzz/<FuzzName>/ and replays as a seed from then on.
//
// Besides "never panics", each checks that a refusal is a 4xx naming a
// field (it wraps ErrInvalid) and that whatever the API accepts, Apply
// accepts too: a spec the API let through must never be refused as
// malformed inside raft (the client would get a 500 after the fact).

// fuzzFSM is one real state machine per fuzz process, onto which accepted
// specs are applied.
type fuzzFSM struct {
	mu  sync.Mutex
	f   *fsm.FSM
	idx uint64
}

func newFuzzFSM(f *testing.F) *fuzzFSM {
	st, err := fsm.Open(filepath.Join(f.TempDir(), "state.db"), fsm.Options{NoSync: true})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = st.Close() })
	return &fuzzFSM{f: st}
}

// apply applies one command and fails the test if Apply calls it
// malformed. Other refusals (an unknown parent, a duplicate) are state.
func (z *fuzzFSM) apply(t *testing.T, typ fsm.CommandType, payload any) {
	t.Helper()
	cmd, err := fsm.NewCommand(typ, t0, payload)
	if err != nil {
		t.Fatalf("an accepted spec does not encode: %v", err)
	}
	b, err := cmd.Encode()
	if err != nil {
		t.Fatalf("an accepted spec does not encode: %v", err)
	}
	z.mu.Lock()
	defer z.mu.Unlock()
	z.idx++
	r := z.f.Apply(&raft.Log{Index: z.idx, Term: 1, Type: raft.LogCommand, Data: b}).(*fsm.Result)
	if errors.Is(r.Err, fsm.ErrBadCommand) {
		t.Fatalf("the API accepted what Apply refuses as malformed: %v\npayload: %+v", r.Err, payload)
	}
}

// checkRefusal: a refused body is a 4xx that names a field.
func checkRefusal(t *testing.T, err error) {
	t.Helper()
	var fe *fieldError
	switch {
	case errors.As(err, &fe):
		if fe.Field == "" {
			t.Fatalf("refusal names no field: %v", err)
		}
	case errors.Is(err, ErrBatchTooLarge):
	default:
		t.Fatalf("refusal %v (%T) is not a field error", err, err)
	}
	if st, _ := statusFor(err); st < 400 || st > 499 {
		t.Fatalf("refusal %v maps to HTTP %d", err, st)
	}
}

// addSpecSeeds adds the repository's example specs (testdata/) as seeds,
// as JSON when asJSON.
func addSpecSeeds(f *testing.F, dir string, asJSON bool, add func([]byte)) {
	files, _ := filepath.Glob(filepath.Join("..", "testdata", dir, "*"))
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		if asJSON && (strings.HasSuffix(p, ".yaml") || strings.HasSuffix(p, ".yml")) {
			if b, err = YAMLToJSON(b); err != nil {
				f.Fatalf("%s: %v", p, err)
			}
		}
		add(b)
	}
}

// hostileJSON are bodies that have broken decoders elsewhere.
var hostileJSON = []string{
	``, `null`, `[]`, `{}`, `"x"`, `1e999`, `{"command":null}`, `{"command":[]}`, `{"command":[""]}`, `{"command":"\u0000"}`,
	`{"command":"x","resources":{"cpu":1e308,"memory":-0}}`, `{"command":"x","resources":{"cpu":"NaN","memory":"Inf"}}`,
	`{"command":"x","resources":{"cpu":"9223372036854775807m","memory":"9223372036854775807TiB"}}`,
	`{"command":"x","resources":{"cpu":"-0.0001","memory":"0x10"}}`, `{"command":"x","resources":{"named":{"":1,"a/b":-1}}}`,
	`{"command":"x","timeout":"-1s","kill_timeout":1e300,"run_at":"0000-01-01T00:00:00Z","deadline":"9999-12-31T23:59:59Z"}`,
	`{"command":"x","backoff":{"initial":"1ns","multiplier":1e308,"max":"2562047h","jitter":-1}}`,
	`{"command":"x","priority":9223372036854775807,"max_attempts":-9223372036854775808}`,
	`{"command":"x","kill_signal":"SIGKILL","no_retry_exit_codes":[-1,256,2147483648]}`,
	`{"command":"x","constraints":["zone == a","has","x in ()"],"labels":{"":"", "k":"\n"}}`,
	`{"command":"x","env":{"A=B":"1","":"x","PATH":"\u0000"}}`,
	`{"command":"x","http":{"method":"GET","url":"http://127.0.0.1:7070/v1/acl"},"driver":"http"}`,
	`{"command":"x","notify":[{"url":"file:///etc/passwd","events":["nope"]}]}`,
	`{"command":"x","depends_on":["a","a"],"condition":"sometimes"}`,
	`{"command":"x","after":["a:ok",{"job":"b","on":"any"},"c"]}`,
	`{"command":"x","after":[null,1,{"job":"d","on":"x","z":1}],"depends_on":["a"]}`,
	`{"command":"x","idempotency_key":"` + strings.Repeat("k", 300) + `"}`,
	`{"jobs":[{"command":"a"},{"command":"b","jobs":[]}]}`, `{"jobs":{}}`, `{"jobs":[[]]}`, `{"Jobs":[{"command":"a"}]}`,
	`{"command":"x","name":"` + strings.Repeat("é", 300) + `"}`, `{"command":"x"}` + "\x00",
	strings.Repeat(`{"a":`, 10000) + strings.Repeat(`}`, 10000),
}

// FuzzParseSubmit: POST /v1/jobs bodies (single and batch). The one-pass
// and the step-by-step decoders agree on every body (the same jobs or the
// same error), refusals are field errors, and what is accepted applies.
func FuzzParseSubmit(f *testing.F) {
	addSpecSeeds(f, "jobs", true, func(b []byte) { f.Add(b, "") })
	addSpecSeeds(f, "batches", true, func(b []byte) { f.Add(b, "") })
	for _, b := range hostileJSON {
		f.Add([]byte(b), "")
	}
	f.Add([]byte(`{"command":"true"}`), "key-1")
	f.Add([]byte(`{"jobs":[{"command":"a"}]}`), "k")
	f.Add([]byte(`{"command":"true"}`), "bad\nkey")
	z := newFuzzFSM(f)
	s := &server{cfg: DefaultConfig()}
	s.cfg.MaxBatchJobs = 5
	f.Fuzz(func(t *testing.T, body []byte, header string) {
		jobs, batch, err := s.parseSubmit(body, header)
		wantJobs, wantBatch, wantErr := s.parseSubmitExact(body, header)
		if fmt.Sprint(err) != fmt.Sprint(wantErr) {
			t.Fatalf("fast path: %v\nexact path: %v", err, wantErr)
		}
		if err != nil {
			checkRefusal(t, err)
			return
		}
		if batch != wantBatch || !reflect.DeepEqual(jobs, wantJobs) {
			t.Fatalf("fast path: batch=%v %+v\nexact path: batch=%v %+v", batch, jobs, wantBatch, wantJobs)
		}
		for i := range jobs {
			jobs[i].ID = fmt.Sprintf("01FUZZ%020d", i)
			jobs[i].Spec.DependsOn, jobs[i].Spec.Condition, jobs[i].Spec.After = nil, "", nil // parents are IDs of existing jobs
		}
		z.apply(t, fsm.CmdSubmitJobs, fsm.SubmitJobs{Jobs: jobs})
	})
}

// FuzzParseWorkflow: POST /v1/workflows bodies, JSON or YAML.
func FuzzParseWorkflow(f *testing.F) {
	addSpecSeeds(f, "workflows", false, func(b []byte) { f.Add(b, "application/yaml") })
	addSpecSeeds(f, "workflows", true, func(b []byte) { f.Add(b, "application/json") })
	for _, b := range hostileJSON {
		f.Add([]byte(b), "")
	}
	for _, b := range []string{
		`{"name":"w","jobs":[{"name":"a","command":"x","depends_on":["b"]},{"name":"b","command":"x","depends_on":["a"]}]}`,
		`{"name":"w","jobs":[{"name":"a","command":"x","depends_on":["a"]}]}`,
		`{"name":"w","jobs":[{"name":"a","command":"x"},{"name":"a","command":"x"}]}`,
		`{"name":"w","jobs":[{"name":"../x","command":"x"}]}`,
		`{"name":"w","namespace":"a/b","jobs":[{"name":"a","command":"x","idempotency_key":"k"}]}`,
		"name: w\njobs:\n  - &a {name: a, command: x}\n  - *a\n",
		"a: &a [*a]\n", "name: [w]\n", "{name: w, jobs: [{name: a, command: x, run_at: 2030-01-01}]}\n",
		"name: w\njobs: !!binary aGVsbG8=\n", "name: w\n? [a]\n: b\n", "name: .nan\njobs: [{command: .inf}]\n",
		"lol: &a [x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b]\nd: [*c,*c,*c,*c,*c,*c,*c,*c]\n",
		"%YAML 1.1\n---\nname: w\n...\n---\nname: x\n", "\t", "- \n-", "{", "name: 'w\n",
	} {
		f.Add([]byte(b), "")
	}
	z := newFuzzFSM(f)
	s := &server{cfg: DefaultConfig(), ids: NewULIDs(fixedClock{t0})}
	f.Fuzz(func(t *testing.T, body []byte, contentType string) {
		p, err := s.parseWorkflow(body, contentType, "", "")
		if err != nil {
			checkRefusal(t, err)
			return
		}
		z.apply(t, fsm.CmdSubmitWorkflow, p)
	})
}

// FuzzScheduleInput: schedule specs as `foreman schedule create -f` and
// POST /v1/schedules read them (YAML or JSON, strict fields, Normalize).
func FuzzScheduleInput(f *testing.F) {
	addSpecSeeds(f, "schedules", false, func(b []byte) { f.Add(b) })
	addSpecSeeds(f, "schedules", true, func(b []byte) { f.Add(b) })
	for _, b := range hostileJSON {
		f.Add([]byte(b))
	}
	for _, b := range []string{
		`{"name":"s","cron":"@every 1s","job":{"command":"x"},"max_catch_up":0}`,
		`{"name":"s","cron":"0 0 30 2 *","time_zone":"Local","job":{"command":"x"}}`,
		`{"name":"s","cron":"* * * * *","time_zone":"Europe/Berlin","job":{"command":"x","run_at":"2030-01-01T00:00:00Z"}}`,
		`{"name":"s","cron":"* * * * *","job":{"command":"x"},"start_at":"2031-01-01T00:00:00Z","end_at":"2030-01-01T00:00:00Z"}`,
		`{"name":"s","cron":"TZ=UTC * * * * *","job":{"command":"x"},"overlap":"REPLACE","catch_up":"All"}`,
		`{"name":"-s","cron":"* * * * *","job":{"command":"x","depends_on":["a"]}}`,
		"name: s\ncron: '@every 90s'\njob: {command: [x], idempotency_key: k}\n",
	} {
		f.Add([]byte(b))
	}
	z := newFuzzFSM(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		if len(body) > 0 && body[0] != '{' {
			var err error
			if body, err = YAMLToJSON(body); err != nil {
				return
			}
		}
		var in ScheduleInput
		if err := decodeStrict(body, &in); err != nil {
			checkRefusal(t, err)
			return
		}
		sp, err := in.Normalize()
		if err != nil {
			checkRefusal(t, err)
			return
		}
		c, err := fsm.ParseCron(sp.Cron, sp.TimeZone)
		if err != nil {
			t.Fatalf("normalised cron %q in %q does not parse: %v", sp.Cron, sp.TimeZone, err)
		}
		_ = c.Next(t0, t0)
		sp.Job.DependsOn, sp.Job.Condition = nil, ""
		z.apply(t, fsm.CmdPutSchedule, fsm.PutSchedule{Schedule: sp})
	})
}

// FuzzYAMLToJSON: any YAML either fails or becomes one valid JSON value.
func FuzzYAMLToJSON(f *testing.F) {
	addSpecSeeds(f, "jobs", false, func(b []byte) { f.Add(b) })
	addSpecSeeds(f, "workflows", false, func(b []byte) { f.Add(b) })
	addSpecSeeds(f, "schedules", false, func(b []byte) { f.Add(b) })
	for _, b := range []string{"a: &a [*a]\n", "? [a, b]\n: c\n", "1: a\n'1': b\n", "t: 2030-01-02T03:04:05+01:00\n",
		"x: !!float .nan\n", "x: !!binary aGk=\n", "x: !!set {a, b}\n", "<<: {a: 1}\nb: 2\n", "x: 0x1F\ny: 0o17\nz: 1_000\n",
		"a: &a {b: *a}\n", "- [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\n"} {
		f.Add([]byte(b))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := YAMLToJSON(in)
		if err != nil {
			return
		}
		if !json.Valid(out) {
			t.Fatalf("YAMLToJSON gave invalid JSON %q", out)
		}
	})
}

// FuzzUnits: CPU and memory quantities parse to a value within bounds or
// fail, and the formatted value parses back to itself.
func FuzzUnits(f *testing.F) {
	for _, s := range []string{"500m", "0.5", "2", "64", "63", "500", "64000m", "64.0", "1000", "0", "0m", "-1", "-0", "1e3",
		"1e-9", "NaN", "Inf", "+Inf", "0x10", "1_000", " 2 ", "2 m", "m", "", "9223372036854775807m", "9223372036854775808",
		"256MiB", "1GiB", "1.5G", "512M", "512", "1b", "1B", "0.0001", "1TiB", "16TiB", "16.0001TiB", "1e308kib", "5 Ki",
		"1.7976931348623157e308", "4.9e-324", "mib", "1Mi", "1mb"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if m, err := ParseCPU(s); err == nil {
			if m < 0 {
				t.Fatalf("ParseCPU(%q) = %d", s, m)
			}
			if m <= MaxCPUMillis {
				txt := FormatCPU(m)
				if back, err := ParseCPU(txt); err != nil || back != m {
					t.Fatalf("ParseCPU(%q) = %d, formatted %q, parsed back as %d (%v)", s, m, txt, back, err)
				}
			}
		}
		if mib, err := ParseMemory(s); err == nil {
			if mib < 0 || mib > MaxMemoryMiB {
				t.Fatalf("ParseMemory(%q) = %d, outside 0..%d", s, mib, MaxMemoryMiB)
			}
			txt := FormatMemory(mib)
			if back, err := ParseMemory(txt); err != nil || back != mib {
				t.Fatalf("ParseMemory(%q) = %d, formatted %q, parsed back as %d (%v)", s, mib, txt, back, err)
			}
		}
		// The JSON field path: a quantity as a string or a bare number.
		for _, raw := range []json.RawMessage{JSONString(s), json.RawMessage(s)} {
			for _, q := range []struct {
				parse func(string) (int64, error)
				limit int64
			}{{ParseCPU, MaxCPUMillis}, {ParseMemory, MaxMemoryMiB}} {
				v, err := parseQuantity("resources.x", raw, q.parse, q.limit, "units")
				if err != nil {
					checkRefusal(t, err)
				} else if v < 0 || v > q.limit || v == math.MinInt64 {
					t.Fatalf("parseQuantity(%s) = %d, outside 0..%d", raw, v, q.limit)
				}
			}
		}
	})
}
