package systest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestSystemRollingRestart restarts every agent of a 3-node cluster one at a
// time (SIGTERM, start again from the same data dir, wait until it is ready
// and the cluster whole again: the procedure of scripts/rolling-restart.sh)
// while one long job runs on each node and a client keeps submitting to the
// agents that are up. No running job is killed (each attempt is adopted by
// its restarted agent: same attempt, PID and fencing token), no acknowledged
// job is lost, each restart costs at most one election, and the test logs
// how long each restart blocked submits.
func TestSystemRollingRestart(t *testing.T) {
	c := newSysCluster(t, 3)
	leader := c.leader()

	// One long job pinned to each node.
	type longJob struct {
		id  string
		d   jobDir
		pid int
		tok uint64
	}
	var long []longJob
	for _, a := range c.agents {
		d := newJobDir(t, c.root)
		long = append(long, longJob{id: submitJob(t, leader, d.waitingJob("long-"+a.name, "sysnode == "+a.name)), d: d})
	}
	for i := range long {
		j := waitJobState(t, leader, long[i].id, "running")
		long[i].pid, long[i].tok = long[i].d.pid(t, 1), j.attempt(1).FencingToken
	}

	// The client: submits a short job every 20ms to the next agent that is up.
	var down atomic.Int32
	down.Store(-1)
	sub := &submitter{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		sub.run(c, &down, stop)
	}()
	t.Cleanup(func() { close(stop); wg.Wait() }) // on a t.Fatal too

	// Let the client reach its steady pace first.
	eventually(t, systemTimeout, "the client's first acknowledged submits", func() error {
		if n := len(sub.snapshot()); n < 10 {
			return fmt.Errorf("%d acknowledged", n)
		}
		return nil
	})

	type window struct {
		name       string
		from, to   time.Time
		termBefore uint64
		termAfter  uint64
	}
	var windows []window
	for i, a := range c.agents {
		w := window{name: a.name, termBefore: termOf(t, c.others(a)[0])}
		down.Store(int32(i))
		w.from = time.Now()
		a.term(t)
		a.restart(t)
		waitWhole(t, c, a)
		w.to = time.Now()
		down.Store(-1)
		w.termAfter = termOf(t, a)
		windows = append(windows, w)
		// Submits flow again before the next restart, so that each
		// restart's blocking is measured apart from the next one's.
		n := len(sub.snapshot())
		eventually(t, systemTimeout, "submits accepted after restarting "+a.name, func() error {
			if len(sub.snapshot()) < n+5 {
				return fmt.Errorf("waiting")
			}
			return nil
		})
	}
	close(stop)
	wg.Wait()
	stop = make(chan struct{}) // for the cleanup's close

	acks := sub.snapshot()
	for _, w := range windows {
		gap := longestGap(acks, w.from, w.to)
		elections := w.termAfter - w.termBefore
		t.Logf("restart of %s: %.2fs until ready and whole; submits blocked at most %.2fs (longest gap between acknowledged submits); %d election(s)",
			w.name, w.to.Sub(w.from).Seconds(), gap.Seconds(), elections)
		if elections > 1 {
			t.Errorf("restart of %s cost %d elections (term %d -> %d), want at most one", w.name, elections, w.termBefore, w.termAfter)
		}
		// A hang bound (a restart costs one election, 2–4 s, and its
		// catch-up); how long it blocked is the figure logged above.
		if gap > 30*time.Second {
			t.Errorf("restart of %s blocked submits for %s", w.name, gap)
		}
	}
	t.Logf("%d submits acknowledged, %d refused or failed during the restarts; the first failures:\n%s",
		len(acks), sub.failures.Load(), strings.Join(sub.errs, "\n"))

	// Every long job kept its one attempt, process and token.
	leader = c.leader()
	for _, l := range long {
		j, err := getJob(leader, l.id)
		if err != nil {
			t.Fatal(err)
		}
		if !processAlive(l.pid) || j.Job.State != "running" || j.Job.Attempts != 1 || j.attempt(1).FencingToken != l.tok {
			// The supervisor's log says when renewals came late and why it
			// killed the job.
			slog, _ := os.ReadFile(filepath.Join(c.root, j.attempt(1).Node, "data", "attempts", l.id+"-1", "supervisor.log"))
			t.Fatalf("after the rolling restart (pid %d alive=%v, token was %d, executions %v): %s\nsupervisor.log:\n%s",
				l.pid, processAlive(l.pid), l.tok, l.d.runs(1), j, slog)
		}
		l.d.release(t)
	}
	for _, l := range long {
		j := waitJobState(t, leader, l.id, "succeeded")
		if runs := l.d.runs(1); j.Job.Attempts != 1 || len(runs) != 1 {
			t.Fatalf("long job ran %d times in %d attempts: %s", len(runs), j.Job.Attempts, j)
		}
	}
	// No acknowledged submit is lost, and none failed an attempt because an
	// agent restarted (an agent stopped in the middle of a start once left
	// a task file without a supervisor, reported failed after the restart).
	for _, a := range acks {
		if _, err := getJob(leader, a.id); err != nil {
			t.Errorf("acknowledged job %s (at %s): %v", a.id, a.at.Format(time.StampMilli), err)
			continue
		}
		if j := waitJobState(t, leader, a.id, "succeeded"); j.Job.Attempts != 1 {
			t.Errorf("job %s (submitted at %s) needed more than one attempt: %s", a.id, a.at.Format(time.StampMilli), j)
		}
	}

	// Every node reports the binary's version (what a rolling upgrade watches).
	want := runForeman(t, c.bin, leader.url(""), "version", "--json")
	var self struct{ Version string }
	if err := json.Unmarshal([]byte(want.stdout), &self); err != nil || self.Version == "" {
		t.Fatalf("foreman version --json: %v %q", err, want.stdout)
	}
	r := runForeman(t, c.bin, strings.TrimPrefix(leader.url(""), "http://"), "version", "--cluster", "--json")
	var got struct {
		Version string
		Nodes   []struct{ Name, Status, Version string }
	}
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || len(got.Nodes) != 3 {
		t.Fatalf("foreman version --cluster --json: %v\n%s%s", err, r.stdout, r.stderr)
	}
	for _, n := range got.Nodes {
		if n.Version != self.Version || n.Status != "alive" {
			t.Errorf("version --cluster: %+v, want version %q alive", n, self.Version)
		}
	}
}

// waitWhole waits until the restarted agent is ready, every agent agrees on
// one leader, and gossip on the restarted agent sees every member alive.
func waitWhole(t *testing.T, c *sysCluster, a *agentProc) {
	t.Helper()
	eventually(t, systemTimeout, a.name+" ready", func() error {
		var r struct{}
		return getJSON(a.url("/v1/ready"), &r)
	})
	c.leader()
	eventually(t, systemTimeout, "every member alive as "+a.name+" sees it", func() error {
		var ms struct {
			Members []struct{ Name, Status string }
		}
		if err := getJSON(a.url("/v1/cluster/members"), &ms); err != nil {
			return err
		}
		alive := 0
		for _, m := range ms.Members {
			if m.Status == "alive" {
				alive++
			}
		}
		if alive != len(c.agents) {
			return fmt.Errorf("%+v", ms.Members)
		}
		return nil
	})
}

type ack struct {
	id string
	at time.Time
}

// submitter submits short jobs in a loop, skipping the agent being
// restarted (a client of a real cluster would be pointed elsewhere too).
type submitter struct {
	mu       sync.Mutex
	acks     []ack
	errs     []string // the first few failures, for the log
	failures atomic.Int64
}

func (s *submitter) run(c *sysCluster, down *atomic.Int32, stop <-chan struct{}) {
	spec := map[string]any{"name": "tick", "command": []string{"true"}, "driver": "process"}
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		case <-time.After(20 * time.Millisecond):
		}
		k := i % len(c.agents)
		if int32(k) == down.Load() {
			continue
		}
		var r struct {
			ID string `json:"id"`
		}
		key := fmt.Sprintf("rolling-%d-%d", mypid, submitSeq.Add(1))
		err := postJSONTimeout(c.agents[k].url("/v1/jobs"), key, spec, &r)
		s.mu.Lock()
		if err == nil && r.ID != "" {
			s.acks = append(s.acks, ack{id: r.ID, at: time.Now()})
		} else {
			s.failures.Add(1)
			if len(s.errs) < 5 {
				s.errs = append(s.errs, fmt.Sprintf("%s %s: %v", time.Now().Format("15:04:05.000"), c.agents[k].name, err))
			}
		}
		s.mu.Unlock()
	}
}

func (s *submitter) snapshot() []ack {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]ack(nil), s.acks...)
}

// postJSONTimeout is one submit with a short timeout: a submit stuck behind
// an election counts as blocked, not as a slow success.
func postJSONTimeout(url, key string, body, v any) error {
	b, _ := json.Marshal(body)
	c := http.Client{Timeout: 3 * time.Second}
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(string(b)))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		rb, _ := io.ReadAll(io.LimitReader(resp.Body, 300))
		return fmt.Errorf("%d %s", resp.StatusCode, rb)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// longestGap is the longest time between consecutive acknowledged submits
// (or a window edge) within [from, to]: how long submits were blocked.
func longestGap(acks []ack, from, to time.Time) time.Duration {
	times := []time.Time{from}
	for _, a := range acks {
		if a.at.After(from) && a.at.Before(to) {
			times = append(times, a.at)
		}
	}
	// The window ends at the first acknowledgement after it.
	end := to
	for _, a := range acks {
		if !a.at.Before(to) {
			end = a.at
			break
		}
	}
	times = append(times, end)
	sort.Slice(times, func(i, j int) bool { return times[i].Before(times[j]) })
	var longest time.Duration
	for i := 1; i < len(times); i++ {
		longest = max(longest, times[i].Sub(times[i-1]))
	}
	return longest
}

// scripts/rolling-restart.sh is the procedure above for operators; it must
// at least parse, and refuse to run without hosts.
func TestRollingRestartScript(t *testing.T) {
	if out, err := exec.Command("bash", "-n", "scripts/rolling-restart.sh").CombinedOutput(); err != nil {
		t.Fatalf("bash -n scripts/rolling-restart.sh: %v\n%s", err, out)
	}
	out, err := exec.Command("scripts/rolling-restart.sh").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "usage:") {
		t.Fatalf("rolling-restart.sh without hosts: %v\n%s", err, out)
	}
}
