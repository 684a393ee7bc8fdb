package httpapi

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/foreman-sched/foreman/api"
	"github.com/foreman-sched/foreman/fsm"
)

// hostExec is an Exec that runs the command as a child of the test on
// the host: the stream, the exit code and the kill are real, only the
// attempt around the command is not (exec/ and the system tests cover
// containers and process jobs).
type hostExec struct {
	started []string // job/attempt of each start
}

func (h *hostExec) StartExec(jobID string, attempt int, req ExecRequest) (ExecSession, error) {
	h.started = append(h.started, jobID)
	cmd := exec.Command(req.Command[0], req.Command[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	s := &hostSession{cmd: cmd, done: make(chan struct{})}
	var err error
	if req.Stdin {
		if s.stdin, err = cmd.StdinPipe(); err != nil {
			return nil, err
		}
	}
	// Pipes of our own, not StdoutPipe: Wait would close those before
	// the relay read them.
	or, ow, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	er, ew, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr, s.stdout, s.stderr = ow, ew, or, er
	err = cmd.Start()
	ow.Close()
	ew.Close()
	if err != nil {
		return nil, errors.Join(ErrExecCommand, err)
	}
	go func() {
		err := cmd.Wait()
		s.code = 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			s.code = ee.ExitCode()
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				s.code = 128 + int(ws.Signal())
			}
		}
		close(s.done)
	}()
	return s, nil
}

type hostSession struct {
	cmd            *exec.Cmd
	stdin          io.WriteCloser
	stdout, stderr io.Reader
	done           chan struct{}
	code           int
}

func (s *hostSession) Stdin() io.WriteCloser       { return s.stdin }
func (s *hostSession) Stdout() io.Reader           { return s.stdout }
func (s *hostSession) Stderr() io.Reader           { return s.stderr }
func (s *hostSession) Resize(uint16, uint16) error { return nil }
func (s *hostSession) Kill()                       { _ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL) }
func (s *hostSession) Wait() int                   { <-s.done; return s.code }

// newExecAPI is newACLAPI whose node n1 runs commands with hostExec, plus
// a token with exec on namespace a only and one with submit and exec.
func newExecAPI(t *testing.T) (*testAPI, *hostExec) {
	t.Helper()
	f := openFSM(t)
	cfg := DefaultConfig()
	cfg.ACL = true
	a := &testAPI{t: t, f: f, logs: &fakeLogs{logs: map[string]string{}}}
	a.cluster = &fakeCluster{t: t, name: "n1", f: f, leader: true}
	he := &hostExec{}
	h := New(cfg, Deps{Cluster: a.cluster, State: f, Logs: a.logs, Exec: he, Clock: fixedClock{t0}, Logger: slog.New(slog.DiscardHandler)})
	a.srv = httptest.NewServer(h)
	t.Cleanup(a.srv.Close)
	a.cluster.leaderName, a.cluster.leaderAddr = "n1", strings.TrimPrefix(a.srv.URL, "http://")
	tokens := map[string][]fsm.ACLRole{
		"management":    {{Role: RoleManagement}},
		"submit":        {{Role: RoleSubmit, Namespace: AllNamespaces}},
		"write":         {{Role: RoleWrite, Namespace: AllNamespaces}},
		"exec-a":        {{Role: RoleExec, Namespace: "a"}},
		"submit-exec-a": {{Role: RoleSubmit, Namespace: "a"}, {Role: RoleExec, Namespace: "a"}},
	}
	for name, roles := range tokens {
		a.cluster.must(fsm.CmdACLCreateToken, fsm.ACLCreateToken{Token: fsm.ACLToken{
			AccessorID: "acc-" + name, Name: name, SecretHash: HashSecret(secretFor(name)), Roles: roles}})
	}
	a.addNode("n1", a.cluster.leaderAddr, 4000, 4096)
	return a, he
}

// runningJob submits a job in ns, places it on n1 and reports it running.
func (a *testAPI) runningJob(ns string) (string, uint64) {
	a.t.Helper()
	code, body := a.do("POST", "/v1/jobs?namespace="+ns, `{"command":"sleep 300"}`, "Authorization", "Bearer "+secretFor("management"))
	if code != http.StatusCreated {
		a.t.Fatalf("submit: %d %s", code, body)
	}
	var sr SubmitResponse
	mustJSON(a.t, body, &sr)
	tok := a.place(sr.ID, "n1")
	a.cluster.must(fsm.CmdReport, fsm.ReportAttempt{JobID: sr.ID, Attempt: 1, FencingToken: tok, Node: "n1", State: fsm.AttemptRunning, StartedAt: t0})
	return sr.ID, tok
}

// TestExecPermission: exec needs the exec permission on the job's
// namespace; submit and write do not imply it; management does.
func TestExecPermission(t *testing.T) {
	a, he := newExecAPI(t)
	inA, _ := a.runningJob("a")
	inB, _ := a.runningJob("b")
	ctx := context.Background()
	run := func(secret, id string) (int, string, error) {
		var out, errOut bytes.Buffer
		code, err := apiClient(t, a.srv.URL, secret).Exec(ctx, id, 0,
			api.ExecRequest{Command: []string{"sh", "-c", "echo out; echo err >&2; exit 3"}}, api.ExecStreams{Stdout: &out, Stderr: &errOut})
		return code, out.String() + errOut.String(), err
	}
	for _, tc := range []struct {
		token, id, want string
	}{
		{"submit", inA, "needs the exec permission"},
		{"write", inA, "needs the exec permission"},
		{"exec-a", inB, `needs the exec permission on namespace \"b\"`},
	} {
		_, _, err := run(secretFor(tc.token), tc.id)
		var ae *api.Error
		if !errors.As(err, &ae) || ae.Status != http.StatusForbidden || !strings.Contains(ae.Message, strings.ReplaceAll(tc.want, `\"`, `"`)) {
			t.Errorf("%s token on %s: %v, want 403 naming %q", tc.token, tc.id, err, tc.want)
		}
	}
	if len(he.started) != 0 {
		t.Fatalf("refused execs started commands: %v", he.started)
	}
	for _, tok := range []string{"exec-a", "submit-exec-a", "management"} {
		code, out, err := run(secretFor(tok), inA)
		if err != nil || code != 3 || out != "out\nerr\n" {
			t.Errorf("%s token: code %d, output %q, err %v; want 3 and out/err", tok, code, out, err)
		}
	}
	// stdin goes through and its end reaches the command.
	var out bytes.Buffer
	code, err := apiClient(t, a.srv.URL, secretFor("exec-a")).Exec(ctx, inA, 1,
		api.ExecRequest{Command: []string{"sh", "-c", "tr a-z A-Z; exit 0"}, Stdin: true}, api.ExecStreams{Stdin: strings.NewReader("hello\n"), Stdout: &out})
	if err != nil || code != 0 || out.String() != "HELLO\n" {
		t.Errorf("stdin: code %d, %q, %v", code, out.String(), err)
	}
}

// TestExecClientGoneKillsCommand: the client going away kills the
// command (and the handler returns), as foreman exec's Ctrl-C does.
func TestExecClientGoneKillsCommand(t *testing.T) {
	a, _ := newExecAPI(t)
	id, _ := a.runningJob("a")
	ctx, cancel := context.WithCancel(context.Background())
	r, w := io.Pipe()
	done := make(chan error, 1)
	go func() {
		_, err := apiClient(t, a.srv.URL, secretFor("exec-a")).Exec(ctx, id, 0,
			api.ExecRequest{Command: []string{"sh", "-c", "echo ready; exec sleep 300"}}, api.ExecStreams{Stdout: w})
		done <- err
	}()
	buf := make([]byte, 6)
	if _, err := io.ReadFull(r, buf); err != nil || string(buf) != "ready\n" {
		t.Fatalf("first output: %q %v", buf, err)
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled exec: %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the exec did not end when its context was cancelled")
	}
}

// TestExecBadInput: each refusal is a 4xx naming the field or the cause,
// and nothing is started.
func TestExecBadInput(t *testing.T) {
	a, he := newExecAPI(t)
	running, _ := a.runningJob("a")
	done, tok := a.runningJob("a")
	zero := 0
	a.cluster.must(fsm.CmdReport, fsm.ReportAttempt{JobID: done, Attempt: 1, FencingToken: tok, Node: "n1", State: fsm.AttemptSucceeded, ExitCode: &zero, FinishedAt: t0})
	code, body := a.do("POST", "/v1/jobs?namespace=a", `{"command":"true"}`, "Authorization", "Bearer "+secretFor("management"))
	if code != http.StatusCreated {
		t.Fatalf("submit: %d %s", code, body)
	}
	var sr SubmitResponse
	mustJSON(t, body, &sr)
	assigned := sr.ID
	a.place(assigned, "n1")
	upgrade := []string{"Authorization", "Bearer " + secretFor("exec-a"), "Connection", "Upgrade", "Upgrade", api.ExecUpgrade}
	for _, tc := range []struct {
		name, path, body string
		hdr              []string
		status           int
		want             string
	}{
		{"no command", "/v1/jobs/" + running + "/exec", `{"command":[]}`, upgrade, 400, "command: required"},
		{"unknown field", "/v1/jobs/" + running + "/exec", `{"cmd":["sh"]}`, upgrade, 400, "cmd"},
		{"size without tty", "/v1/jobs/" + running + "/exec", `{"command":["sh"],"width":80}`, upgrade, 400, "width"},
		{"bad attempt", "/v1/jobs/" + running + "/exec?attempt=x", `{"command":["sh"]}`, upgrade, 400, "attempt"},
		{"no upgrade", "/v1/jobs/" + running + "/exec", `{"command":["sh"]}`, upgrade[:2], 400, "Upgrade: exec streams over an HTTP/1.1 upgrade"},
		{"finished job", "/v1/jobs/" + done + "/exec", `{"command":["sh"]}`, upgrade, 409, "is succeeded: nothing to exec into"},
		{"finished attempt", "/v1/jobs/" + done + "/exec?attempt=1", `{"command":["sh"]}`, upgrade, 409, "attempt 1 of job " + done + " is succeeded: nothing to exec into"},
		{"not started", "/v1/jobs/" + assigned + "/exec", `{"command":["sh"]}`, upgrade, 409, "has not started yet"},
		{"no such attempt", "/v1/jobs/" + running + "/exec?attempt=2", `{"command":["sh"]}`, upgrade, 404, "has 1 attempt(s), not 2"},
		{"no such job", "/v1/jobs/nope/exec", `{"command":["sh"]}`, upgrade, 404, "nope"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := a.do("POST", tc.path, tc.body, tc.hdr...)
			if code != tc.status || !strings.Contains(body, tc.want) {
				t.Errorf("%d %s, want %d naming %q", code, body, tc.status, tc.want)
			}
		})
	}
	if len(he.started) != 0 {
		t.Fatalf("refused execs started commands: %v", he.started)
	}
}
