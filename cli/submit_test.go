package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	ucli "github.com/urfave/cli/v2"

	"github.com/foreman-sched/foreman/api"
	"github.com/foreman-sched/foreman/fsm"
	"github.com/foreman-sched/foreman/httpapi"
)

// recorder is an API stand-in that records what the CLI sends and answers
// with a fixed status and body.
type recorder struct {
	mu     sync.Mutex
	bodies []map[string]any
	hdrs   []http.Header
	status int
	reply  string
}

func (r *recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	b, _ := io.ReadAll(req.Body)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	r.mu.Lock()
	r.bodies = append(r.bodies, m)
	r.hdrs = append(r.hdrs, req.Header.Clone())
	r.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(r.status)
	_, _ = io.WriteString(w, r.reply)
}

// runCLI runs the client commands with args and returns stdout and the error.
func runCLI(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	app := &ucli.App{
		Name:           "foreman",
		Commands:       clientCommands(),
		Writer:         &out,
		ErrWriter:      io.Discard,
		ExitErrHandler: func(*ucli.Context, error) {},
	}
	err := Run(context.Background(), app, append([]string{"foreman"}, args...))
	return out.String(), err
}

func TestSubmitFlags(t *testing.T) {
	rec := &recorder{status: http.StatusCreated, reply: `{"id":"01JOB","duplicate":false}`}
	srv := httptest.NewServer(rec)
	defer srv.Close()

	tests := []struct {
		name string
		args []string
		want map[string]any // expected top-level fields (JSON-decoded)
		res  map[string]any // expected resources
	}{
		{"cores and GiB", []string{"--cpu", "0.5", "--memory", "1GiB"}, nil, map[string]any{"cpu": 500.0, "memory": 1024.0}},
		{"millicores and MiB", []string{"--cpu", "500m", "--memory", "256MiB"}, nil, map[string]any{"cpu": 500.0, "memory": 256.0}},
		{"bare numbers", []string{"--cpu", "500", "--memory", "256"}, nil, map[string]any{"cpu": 500.0, "memory": 256.0}},
		{"whole cores", []string{"--cpu", "2", "--memory", "1.5G"}, nil, map[string]any{"cpu": 2000.0, "memory": 1536.0}},
		{"policy", []string{"--priority", "0", "--max-attempts", "5", "--timeout", "90s", "--queue", "etl"},
			map[string]any{"priority": 0.0, "max_attempts": 5.0, "timeout": "1m30s", "queue": "etl"}, nil},
		{"repeatables keep commas", []string{"--env", "A=1,2", "--env", "B=x", "--label", "team=a", "--constraint", "gpu in (a100,h100)"},
			map[string]any{"env": map[string]any{"A": "1,2", "B": "x"}, "labels": map[string]any{"team": "a"}, "constraints": []any{"gpu in (a100,h100)"}}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"submit", "--addr", srv.URL}, tc.args...)
			out, err := runCLI(t, append(args, "--", "echo", "hi")...)
			if err != nil {
				t.Fatal(err)
			}
			if strings.TrimSpace(out) != "01JOB" {
				t.Fatalf("stdout %q, want the job ID", out)
			}
			body := rec.bodies[len(rec.bodies)-1]
			if cmd, _ := json.Marshal(body["command"]); string(cmd) != `["echo","hi"]` {
				t.Errorf("command %s", cmd)
			}
			if _, ok := body["priority"]; ok && tc.want == nil {
				t.Errorf("priority sent although not given: %v", body["priority"])
			}
			for k, v := range tc.want {
				if got, _ := json.Marshal(body[k]); string(got) != mustMarshal(v) {
					t.Errorf("%s = %s, want %s", k, got, mustMarshal(v))
				}
			}
			if tc.res != nil {
				if got, _ := json.Marshal(body["resources"]); string(got) != mustMarshal(tc.res) {
					t.Errorf("resources = %s, want %s", got, mustMarshal(tc.res))
				}
			}
		})
	}

	_, err := runCLI(t, "submit", "--addr", srv.URL, "--idempotency-key", "k1", "--", "true")
	if err != nil || rec.hdrs[len(rec.hdrs)-1].Get(httpapi.HeaderIdempotencyKey) != "k1" {
		t.Fatalf("idempotency key header: %v %v", err, rec.hdrs[len(rec.hdrs)-1])
	}
	_, err = runCLI(t, "submit", "--addr", srv.URL, "--", "echo hi | wc -c")
	if err != nil || rec.bodies[len(rec.bodies)-1]["command"] != "echo hi | wc -c" {
		t.Fatalf("shell line: %v %v", err, rec.bodies[len(rec.bodies)-1]["command"])
	}
}

func mustMarshal(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestSubmitBadUnits(t *testing.T) {
	rec := &recorder{status: http.StatusCreated, reply: `{"id":"x"}`}
	srv := httptest.NewServer(rec)
	defer srv.Close()
	for _, args := range [][]string{
		{"--cpu", "lots"}, {"--memory", "big"}, {"--timeout", "soon"}, {"--run-at", "tomorrow"},
		{"--env", "NOEQUALS"}, {"--in", "5m", "--run-at", "2030-01-01T00:00:00Z"},
	} {
		_, err := runCLI(t, append(append([]string{"submit", "--addr", srv.URL}, args...), "--", "true")...)
		assertOneLineExit(t, err, args[0])
	}
	if len(rec.bodies) != 0 {
		t.Fatalf("bad flags still sent %d requests", len(rec.bodies))
	}
	_, err := runCLI(t, "submit", "--addr", srv.URL)
	assertOneLineExit(t, err, "no command")
}

// assertOneLineExit checks an error is a one-line ucli.ExitCoder with a
// non-zero code that mentions want.
func assertOneLineExit(t *testing.T, err error, want string) {
	t.Helper()
	var ec ucli.ExitCoder
	if !errors.As(err, &ec) || ec.ExitCode() == 0 {
		t.Fatalf("err %v (%T), want a ucli.ExitCoder with a non-zero code", err, err)
	}
	msg := err.Error()
	if strings.Contains(msg, "\n") || msg == "" || !strings.Contains(msg, want) {
		t.Fatalf("message %q: want one line mentioning %q", msg, want)
	}
}

func TestCLIErrorsAreOneLine(t *testing.T) {
	rec := &recorder{status: http.StatusBadRequest, reply: `{"error":"priority: must be between 0 and 100 (got 200)","code":"invalid"}`}
	srv := httptest.NewServer(rec)
	_, err := runCLI(t, "submit", "--addr", srv.URL, "--priority", "200", "--", "true")
	assertOneLineExit(t, err, "priority: must be between 0 and 100")

	rec.status, rec.reply = http.StatusServiceUnavailable, `{"error":"no leader:\nelection in progress","code":"no_leader"}`
	_, err = runCLI(t, "job", "ls", "--addr", srv.URL)
	assertOneLineExit(t, err, "no leader")

	rec.status, rec.reply = http.StatusBadGateway, `<html>bad gateway</html>`
	_, err = runCLI(t, "node", "ls", "--addr", srv.URL)
	assertOneLineExit(t, err, "bad gateway")

	srv.Close()
	_, err = runCLI(t, "job", "status", "--addr", srv.URL, "01X")
	assertOneLineExit(t, err, "connection refused")

	_, err = runCLI(t, "job", "status", "--addr", srv.URL)
	assertOneLineExit(t, err, "JOB_ID")
}

func TestSpecFile(t *testing.T) {
	dir := t.TempDir()
	yml := filepath.Join(dir, "job.yaml")
	if err := os.WriteFile(yml, []byte(`
name: nightly
command: "echo hi"
resources: {cpu: 500m, memory: 1GiB}
priority: 70
timeout: 10m
run_at: 2030-01-02T03:04:05Z
labels: {team: data}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	specs, batch, err := readSpecFile(yml)
	if err != nil || batch || len(specs) != 1 {
		t.Fatalf("%v %v %d", err, batch, len(specs))
	}
	norm, err := specs[0].Normalize()
	if err != nil {
		t.Fatal(err)
	}
	if norm.Name != "nightly" || norm.Priority != 70 || norm.Resources.CPU != 500 || norm.Resources.MemoryMB != 1024 ||
		norm.Timeout.D().String() != "10m0s" || norm.RunAt == nil || norm.RunAt.Year() != 2030 || norm.Command[2] != "echo hi" {
		t.Fatalf("normalised %+v", norm)
	}

	bad := filepath.Join(dir, "bad.yaml")
	_ = os.WriteFile(bad, []byte("command: true\nprioritty: 3\n"), 0o644)
	if _, _, err := readSpecFile(bad); err == nil || !strings.Contains(err.Error(), "prioritty") {
		t.Fatalf("unknown field: %v", err)
	}

	js := filepath.Join(dir, "batch.json")
	_ = os.WriteFile(js, []byte(`{"jobs":[{"command":["true"]},{"command":"false","priority":1}]}`), 0o644)
	specs, batch, err = readSpecFile(js)
	if err != nil || !batch || len(specs) != 2 {
		t.Fatalf("batch: %v %v %d", err, batch, len(specs))
	}
}

func TestJobOutcome(t *testing.T) {
	three, zero := 3, 0
	tests := []struct {
		name string
		job  fsm.JobState
		att  fsm.Attempt
		code int
		msg  string
	}{
		{"succeeded", fsm.JobSucceeded, fsm.Attempt{Num: 1, State: fsm.AttemptSucceeded, ExitCode: &zero}, 0, ""},
		{"exit code", fsm.JobFailed, fsm.Attempt{Num: 3, State: fsm.AttemptFailed, ExitCode: &three}, 3, ""},
		{"oom", fsm.JobFailed, fsm.Attempt{Num: 1, State: fsm.AttemptKilled, Reason: fsm.ReasonOOM}, exitOOM, "killed (oom)"},
		{"timeout", fsm.JobFailed, fsm.Attempt{Num: 2, State: fsm.AttemptKilled, Reason: fsm.ReasonTimeout}, exitTimeout, "killed (timeout)"},
		{"cancelled", fsm.JobCancelled, fsm.Attempt{Num: 1, State: fsm.AttemptKilled, Reason: fsm.ReasonCancelled}, exitCancelled, "killed (cancelled)"},
		{"lost then failed", fsm.JobFailed, fsm.Attempt{Num: 1, State: fsm.AttemptLost}, exitOther, "attempt 1 lost"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := &httpapi.JobDetail{Job: fsm.Job{ID: "J", State: tc.job}, Attempts: []fsm.Attempt{tc.att}}
			err := jobOutcome(d)
			if tc.code == 0 {
				if err != nil {
					t.Fatalf("err %v", err)
				}
				return
			}
			var ec ucli.ExitCoder
			if !errors.As(err, &ec) || ec.ExitCode() != tc.code || !strings.Contains(err.Error(), tc.msg) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("err %q code %v, want %d with %q", err, ec, tc.code, tc.msg)
			}
		})
	}
}

// TestAddrResolution: an explicit --addr on the command wins over one on
// the App, which wins over FOREMAN_ADDR.
func TestAddrResolution(t *testing.T) {
	hit := func(name string) (*httptest.Server, *int) {
		n := new(int)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			*n++
			_, _ = io.WriteString(w, `{"jobs":[]}`)
		}))
		t.Cleanup(srv.Close)
		return srv, n
	}
	env, envHits := hit("env")
	app, appHits := hit("app")
	cmd, cmdHits := hit("cmd")
	t.Setenv(api.EnvAddress, env.URL)
	run := func(args ...string) {
		t.Helper()
		a := &ucli.App{Name: "foreman", Flags: clientFlags(), Commands: clientCommands(), Writer: io.Discard, ExitErrHandler: func(*ucli.Context, error) {}}
		if err := Run(context.Background(), a, append([]string{"foreman"}, args...)); err != nil {
			t.Fatal(err)
		}
	}
	run("job", "ls")
	run("--addr", app.URL, "job", "ls")
	run("--addr", app.URL, "job", "ls", "--addr", cmd.URL)
	if *envHits != 1 || *appHits != 1 || *cmdHits != 1 {
		t.Fatalf("hits env=%d app=%d cmd=%d, want 1 each", *envHits, *appHits, *cmdHits)
	}
}

func TestParseInputFlag(t *testing.T) {
	for in, want := range map[string]httpapi.InputSourceInput{
		"https://h:8080/d/data.csv":     {Source: "https://h:8080/d/data.csv"},
		"https://h:8080/d/data.csv:in/": {Source: "https://h:8080/d/data.csv", Dest: "in/"},
		"s3://bucket/key.tar:model.tar": {Source: "s3://bucket/key.tar", Dest: "model.tar"},
		"s3://bucket/a:b/c.txt:x.txt":   {Source: "s3://bucket/a:b/c.txt", Dest: "x.txt"},
		"http://h:99":                   {Source: "http://h:99"},
		"relative:dest":                 {Source: "relative", Dest: "dest"},
	} {
		if got := parseInputFlag(in); got != want {
			t.Errorf("%s: %+v, want %+v", in, got, want)
		}
	}
}
