package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/foreman-sched/foreman/api"
)

// The examples run against a real dev agent (`foreman agent --dev`) that
// TestMain starts: $FOREMAN_BIN, or the binary built from this
// repository. FOREMAN_ADDR points the examples' clients at it, as it
// would a user's program.
func TestMain(m *testing.M) {
	a, err := startDevAgent()
	if err != nil {
		fmt.Fprintln(os.Stderr, "api: starting a dev agent for the examples:", err)
		os.Exit(2)
	}
	code := m.Run()
	if code != 0 {
		fmt.Fprintf(os.Stderr, "--- the examples' agent's log (tail) ---\n%s\n", a.logTail())
	}
	a.stop()
	os.RemoveAll(a.dir)
	os.Exit(code)
}

// agentStartTimeout is generous for a loaded 2-core machine (a cold build
// included).
const agentStartTimeout = 5 * time.Minute

type devAgent struct {
	dir  string
	cmd  *exec.Cmd
	log  *os.File
	done chan struct{} // closed when the process has exited
}

func (a *devAgent) logTail() string {
	b, _ := os.ReadFile(a.log.Name())
	return string(b[max(0, len(b)-4000):])
}

func (a *devAgent) stop() {
	_ = a.cmd.Process.Signal(os.Interrupt)
	select {
	case <-a.done:
	case <-time.After(30 * time.Second):
		_ = a.cmd.Process.Kill()
		<-a.done
	}
	a.log.Close()
}

func startDevAgent() (*devAgent, error) {
	dir, err := os.MkdirTemp("", "foreman-api-test-")
	if err != nil {
		return nil, err
	}
	// A root agent runs process jobs as nobody, who must reach the data
	// dir (MkdirTemp makes it 0700).
	if err := os.Chmod(dir, 0o755); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	bin := os.Getenv("FOREMAN_BIN")
	if bin == "" {
		bin = filepath.Join(dir, "bin", "foreman")
		build := exec.Command("go", "build", "-tags", "netgo osusergo", "-o", bin, "..")
		if out, err := build.CombinedOutput(); err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("go build: %v\n%s", err, out)
		}
	}
	// Another process may take the ports between freeBase and the agent's
	// start: then the agent exits and the next try takes other ports.
	for try := 1; ; try++ {
		a, err := tryDevAgent(dir, bin, try)
		if err == nil || try == 3 {
			if err != nil {
				os.RemoveAll(dir)
			}
			return a, err
		}
		fmt.Fprintf(os.Stderr, "api: dev agent, try %d: %v\n", try, err)
	}
}

func tryDevAgent(dir, bin string, try int) (*devAgent, error) {
	base, err := freeBase()
	if err != nil {
		return nil, err
	}
	logf, err := os.Create(filepath.Join(dir, fmt.Sprintf("agent-%d.log", try)))
	if err != nil {
		return nil, err
	}
	// The name tells our agent from another process that took the port.
	name := fmt.Sprintf("api-examples-%d-%d", os.Getpid(), try)
	// Process jobs: the examples run echo and true, no image.
	cmd := exec.Command(bin, "agent", "--dev", "--name", name, "--port", fmt.Sprint(base),
		"--data-dir", filepath.Join(dir, fmt.Sprintf("data-%d", try)), "--default-driver", "process")
	cmd.Stdout, cmd.Stderr = logf, logf
	dieWithTest(cmd)
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	a := &devAgent{dir: dir, cmd: cmd, log: logf, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(a.done) }()
	addr := fmt.Sprintf("http://127.0.0.1:%d", base)
	deadline := time.Now().Add(agentStartTimeout)
	for {
		var ready struct {
			Node string `json:"node"`
		}
		resp, err := http.Get(addr + "/v1/ready")
		if err == nil {
			err = json.NewDecoder(resp.Body).Decode(&ready)
			resp.Body.Close()
			if err == nil && resp.StatusCode == http.StatusOK && ready.Node == name {
				break
			}
		}
		select {
		case <-a.done:
			logf.Close()
			return nil, fmt.Errorf("agent on port %d exited:\n%s", base, a.logTail())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			a.stop()
			return nil, fmt.Errorf("agent at %s not ready after %v", addr, agentStartTimeout)
		}
	}
	os.Setenv(api.EnvAddress, addr)
	return a, nil
}

// freeBase finds a base port whose three ports (HTTP, raft, gossip) are
// free on 127.0.0.1, TCP and UDP.
func freeBase() (int, error) {
	for range 50 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		base := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if base <= 65000 && portsFree(base) {
			return base, nil
		}
	}
	return 0, errors.New("no free port range")
}

func portsFree(base int) bool {
	for p := base; p < base+3; p++ {
		addr := fmt.Sprintf("127.0.0.1:%d", p)
		l, err := net.Listen("tcp", addr)
		if err != nil {
			return false
		}
		l.Close()
		u, err := net.ListenPacket("udp", addr)
		if err != nil {
			return false
		}
		u.Close()
	}
	return true
}

// Submit a job, wait for it and print its output: the README's example.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := api.NewClient(api.Config{}) // FOREMAN_ADDR, else 127.0.0.1:7070
	if err != nil {
		log.Fatal(err)
	}
	sub, err := c.SubmitJob(ctx, api.JobSpec{
		Name:    "hello",
		Command: []string{"echo", "hello from foreman"},
	})
	if err != nil {
		log.Fatal(err)
	}
	job, err := c.WaitJob(ctx, sub.ID, nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(job.Job.Spec.Name, job.Job.State)
	if err := c.Logs(ctx, sub.ID, api.LogQuery{}, os.Stdout); err != nil {
		log.Fatal(err)
	}
	// Output:
	// hello succeeded
	// hello from foreman
}

// A submit carries an idempotency key: sending it again (here on purpose;
// the client does it itself after a broken connection or a 503) answers
// with the first job.
func ExampleClient_SubmitJob_idempotencyKey() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := api.NewClient(api.Config{})
	if err != nil {
		log.Fatal(err)
	}
	spec := api.JobSpec{
		Command:        api.Shell("echo report"),
		Priority:       api.Int(70),
		Timeout:        api.Duration(time.Minute),
		IdempotencyKey: "report-2030-01-02",
	}
	first, err := c.SubmitJob(ctx, spec)
	if err != nil {
		log.Fatal(err)
	}
	again, err := c.SubmitJob(ctx, spec)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(first.Duplicate, again.Duplicate, again.ID == first.ID)
	// Output: false true true
}

// Follow the event stream of one job until it finishes. A broken
// connection is resumed from the last event seen.
func ExampleClient_Events() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := api.NewClient(api.Config{})
	if err != nil {
		log.Fatal(err)
	}
	sub, err := c.SubmitJob(ctx, api.JobSpec{Command: []string{"true"}})
	if err != nil {
		log.Fatal(err)
	}
	// After "0": from the start of what the server keeps, so the events
	// from before the stream opened are there too.
	for e, err := range c.Events(ctx, api.EventQuery{Job: sub.ID, After: "0"}) {
		if err != nil {
			log.Fatal(err)
		}
		// Attempts' events (attempt.placed, attempt.started, ...) come
		// too; whether a job passes through queued depends on timing.
		if e.Type == "job.submitted" {
			fmt.Println(e.Type)
		}
		if strings.HasPrefix(e.Type, "job.") && api.JobState(e.State).Terminal() {
			fmt.Println(e.Type)
			break
		}
	}
	// Output:
	// job.submitted
	// job.succeeded
}

// Errors carry the server's status, code and field.
func ExampleError() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := api.NewClient(api.Config{})
	if err != nil {
		log.Fatal(err)
	}
	_, err = c.SubmitJob(ctx, api.JobSpec{Command: []string{"true"}, Priority: api.Int(200)})
	var ae *api.Error
	if errors.As(err, &ae) {
		fmt.Println(ae.Status, ae.Code, ae.Field)
	}
	_, err = c.GetJob(ctx, "01JD3ZQ5R0M0V4X7YB9K2N8C1E")
	fmt.Println(errors.Is(err, api.ErrNotFound))
	// Output:
	// 400 invalid priority
	// true
}

// A workflow: all its jobs or none; report runs once both extracts have
// succeeded.
func ExampleClient_SubmitWorkflow() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := api.NewClient(api.Config{})
	if err != nil {
		log.Fatal(err)
	}
	sub, err := c.SubmitWorkflow(ctx, api.WorkflowSpec{
		Name: "etl",
		Jobs: []api.JobSpec{
			{Name: "extract-a", Command: []string{"true"}},
			{Name: "extract-b", Command: []string{"true"}},
			{Name: "report", Command: []string{"true"}, DependsOn: []string{"extract-a", "extract-b"}},
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	report := sub.Jobs[2].ID
	if _, err := c.WaitJob(ctx, report, nil); err != nil {
		log.Fatal(err)
	}
	wf, err := c.Consistent().GetWorkflow(ctx, sub.ID)
	if err != nil {
		log.Fatal(err)
	}
	for _, j := range wf.JobList {
		fmt.Println(j.Name, j.State)
	}
	// Output:
	// extract-a succeeded
	// extract-b succeeded
	// report succeeded
}
