package systest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// gangScript records the gang variables of each task's attempt in
// gang-<attempt> and its PID in pid-<attempt>, then waits for release.
const gangScript = `echo "$GANG_ID $GANG_SIZE $GANG_INDEX $GANG_PORT $GANG_PEERS $FOREMAN_FENCING_TOKEN $FOREMAN_NODE" > "$SYSDIR/gang-$FOREMAN_ATTEMPT.tmp" && mv "$SYSDIR/gang-$FOREMAN_ATTEMPT.tmp" "$SYSDIR/gang-$FOREMAN_ATTEMPT"
cat "$FOREMAN_CHECKPOINT/checkpoint" > "$SYSDIR/ck-$FOREMAN_ATTEMPT" 2>/dev/null
echo $$ > "$SYSDIR/pid-$FOREMAN_ATTEMPT.tmp" && mv "$SYSDIR/pid-$FOREMAN_ATTEMPT.tmp" "$SYSDIR/pid-$FOREMAN_ATTEMPT"
while [ ! -e "$SYSDIR/release" ]; do sleep 0.2; done`

// gangRun is one task's recorded variables.
type gangRun struct {
	id, node    string
	size, index int
	port        int
	peers       []string
	token       string
}

func (d jobDir) gangRun(t *testing.T, attempt int) gangRun {
	t.Helper()
	var r gangRun
	eventually(t, systemTimeout, fmt.Sprintf("attempt %d records its gang variables", attempt), func() error {
		b, err := os.ReadFile(filepath.Join(string(d), fmt.Sprintf("gang-%d", attempt)))
		if err != nil {
			return err
		}
		f := strings.Fields(string(b))
		if len(f) != 7 {
			return fmt.Errorf("gang-%d: %q", attempt, b)
		}
		r.id, r.token, r.node = f[0], f[5], f[6]
		r.peers = strings.Split(f[4], ",")
		_, err = fmt.Sscan(f[1]+" "+f[2]+" "+f[3], &r.size, &r.index, &r.port)
		return err
	})
	return r
}

// checkGang checks the three tasks of the placement whose first attempt is
// base: one per node, indexes 0..2, one token, and GANG_PEERS naming each
// task's node address and port in task order.
func checkGang(t *testing.T, c *sysCluster, d jobDir, id string, base int) []gangRun {
	t.Helper()
	runs := make([]gangRun, 3)
	nodes := map[string]bool{}
	for i := range 3 {
		r := d.gangRun(t, base+i)
		if r.id != id || r.size != 3 || r.index != i {
			t.Fatalf("attempt %d: GANG_ID %s GANG_SIZE %d GANG_INDEX %d, want %s 3 %d", base+i, r.id, r.size, r.index, id, i)
		}
		runs[i] = r
		nodes[r.node] = true
	}
	if len(nodes) != 3 {
		t.Fatalf("gang tasks share nodes: %+v", runs)
	}
	for i, r := range runs {
		if r.token != runs[0].token {
			t.Fatalf("tasks have different fencing tokens: %+v", runs)
		}
		if strings.Join(r.peers, ",") != strings.Join(runs[0].peers, ",") || len(r.peers) != 3 {
			t.Fatalf("task %d peers %v, task 0 %v", i, r.peers, runs[0].peers)
		}
		want := net.JoinHostPort(c.byName(r.node).host(), fmt.Sprint(r.port))
		if r.peers[i] != want {
			t.Fatalf("GANG_PEERS[%d] = %s, want %s (task %d's node and port)", i, r.peers[i], want, i)
		}
	}
	return runs
}

// TestSystemGang: a gang of 3 on three agents gets the right GANG_*
// variables; killing one task stops the other two and re-places all three
// as a unit, using up an attempt of the failed task only.
func TestSystemGang(t *testing.T) {
	c := newSysCluster(t, 3)
	leader := c.leader()
	d := newJobDir(t, c.root)
	spec := map[string]any{
		"name":         "gang",
		"command":      []string{"/bin/sh", "-c", gangScript},
		"env":          map[string]string{"SYSDIR": string(d), "PATH": "/usr/local/bin:/usr/bin:/bin"},
		"driver":       "process",
		"gang":         map[string]any{"size": 3},
		"kill_timeout": "2s",
		"backoff":      map[string]any{"initial": "1s"},
	}
	id := submitJob(t, leader, spec)
	eventually(t, systemTimeout, "the gang's three tasks start", func() error {
		j, err := getJob(leader, id)
		if err != nil {
			return err
		}
		running := 0
		for _, a := range j.Attempts {
			if a.State == "running" {
				running++
			}
		}
		if running != 3 {
			return fmt.Errorf("%d running: %s", running, j)
		}
		return nil
	})
	checkGang(t, c, d, id, 1)
	// A checkpoint kept in raft is restored into every task of the next
	// placement, on whichever node it lands.
	var ck struct {
		Bytes int `json:"bytes"`
	}
	if err := postRaw(leader.url("/v1/jobs/"+id+"/checkpoint"), []byte("epoch=7"), &ck); err != nil || ck.Bytes != 7 {
		t.Fatalf("post checkpoint: %+v %v", ck, err)
	}

	// Kill task 1: the gang stops tasks 0 and 2 and is placed again.
	pids := []int{d.pid(t, 1), d.pid(t, 2), d.pid(t, 3)}
	killed := time.Now()
	if err := syscall.Kill(pids[1], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	eventually(t, systemTimeout, "the siblings of the killed task stop", func() error {
		for _, p := range pids {
			if processAlive(p) {
				return fmt.Errorf("pid %d still runs", p)
			}
		}
		return nil
	})
	t.Logf("all three tasks gone %.1fs after one was killed", time.Since(killed).Seconds())
	runs := checkGang(t, c, d, id, 4)
	for n := 4; n <= 6; n++ {
		d.pid(t, n) // written after the checkpoint was read
		b, err := os.ReadFile(filepath.Join(string(d), fmt.Sprintf("ck-%d", n)))
		if err != nil || string(b) != "epoch=7" {
			t.Fatalf("attempt %d found checkpoint %q (%v), want the posted one", n, b, err)
		}
	}
	j := waitJobState(t, leader, id, "running")
	for n := 1; n <= 3; n++ {
		a := j.attempt(n)
		if a == nil || a.State == "running" || a.State == "assigned" {
			t.Fatalf("attempt %d of the first placement still live: %s", n, j)
		}
		if (n == 2) != a.Counted {
			t.Fatalf("attempt %d counted=%v (only the killed task's attempt counts): %s", n, a.Counted, j)
		}
	}
	if j.Job.CountedAttempts != 1 {
		t.Fatalf("counted %d, want 1: %s", j.Job.CountedAttempts, j)
	}
	var tasks struct {
		Token uint64 `json:"token"`
		Tasks []struct {
			Index   int          `json:"index"`
			Counted int          `json:"counted"`
			Latest  *attemptView `json:"latest"`
		} `json:"tasks"`
	}
	if err := getJSON(leader.url("/v1/jobs/"+id+"/tasks"), &tasks); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(tasks.Token) != runs[0].token || len(tasks.Tasks) != 3 || tasks.Tasks[1].Counted != 1 || tasks.Tasks[0].Counted != 0 {
		t.Fatalf("tasks %+v (token of the second placement %s)", tasks, runs[0].token)
	}
	d.release(t)
	waitJobState(t, leader, id, "succeeded")
}

// TestSystemPreemption: three agents of one CPU each, full of priority-10
// jobs; a priority-90 job preempts one of them (killed: preempted, not
// counted, re-queued), runs, and the victim completes later.
func TestSystemPreemption(t *testing.T) {
	c := newSysCluster(t, 3, "--cpu", "1", "--reserve-cpu", "0")
	leader := c.leader()
	low := newJobDir(t, c.root)
	var lows []string
	for i := range 3 {
		spec := low.waitingJob(fmt.Sprintf("low-%d", i))
		spec["priority"] = 10
		spec["resources"] = map[string]any{"cpu": "1"}
		spec["kill_timeout"] = "1s"
		lows = append(lows, submitJob(t, leader, spec))
	}
	for _, id := range lows {
		waitJobState(t, leader, id, "running")
	}
	hi := newJobDir(t, c.root)
	spec := hi.waitingJob("high")
	spec["priority"] = 90
	spec["resources"] = map[string]any{"cpu": "1"}
	submitted := time.Now()
	hid := submitJob(t, leader, spec)
	waitJobState(t, leader, hid, "running")
	t.Logf("priority-90 job running %.2fs after submit", time.Since(submitted).Seconds())

	var victim string
	for _, id := range lows {
		j, err := getJob(leader, id)
		if err != nil {
			t.Fatal(err)
		}
		if a := j.attempt(1); a.State == "killed" {
			if a.Reason != "preempted" || a.Counted || victim != "" {
				t.Fatalf("low job %s attempt 1 %+v (victim so far %q)", id, a, victim)
			}
			victim = id
		}
	}
	if victim == "" {
		t.Fatal("no low-priority job was preempted")
	}
	var evs []struct {
		Reason string `json:"reason"`
	}
	if err := getJSON(leader.url("/v1/jobs/"+victim+"/events"), &evs); err != nil {
		var wrapped struct {
			Events []struct {
				Reason string `json:"reason"`
			} `json:"events"`
		}
		if err2 := getJSON(leader.url("/v1/jobs/"+victim+"/events"), &wrapped); err2 != nil {
			t.Fatal(err, err2)
		}
		evs = wrapped.Events
	}
	said := false
	for _, e := range evs {
		said = said || strings.Contains(e.Reason, "preempted by job "+hid)
	}
	if !said {
		t.Fatalf("the victim's timeline does not name its preemptor %s: %+v", hid, evs)
	}
	var list struct {
		Jobs []struct {
			ID string `json:"id"`
		} `json:"jobs"`
	}
	if err := getJSON(leader.url("/v1/jobs?state=preempted"), &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Jobs) != 1 || list.Jobs[0].ID != victim {
		t.Fatalf("state=preempted lists %+v, want %s", list.Jobs, victim)
	}
	// The README's form: foreman job ls --state preempted.
	r := runForeman(t, c.bin, leader.url(""), "job", "ls", "--state", "preempted")
	if r.code != 0 || !strings.Contains(r.stdout, victim) || strings.Contains(r.stdout, hid) {
		t.Fatalf("foreman job ls --state preempted: exit %d, stdout %q, stderr %q; want %s only", r.code, r.stdout, r.stderr, victim)
	}
	// The victim waits (queued) while the cluster is full, then completes.
	hi.release(t)
	waitJobState(t, leader, hid, "succeeded")
	low.release(t)
	for _, id := range lows {
		waitJobState(t, leader, id, "succeeded")
	}
	j, _ := getJob(leader, victim)
	if j.Job.CountedAttempts != 1 || j.Job.Attempts != 2 {
		t.Fatalf("victim %s, want 2 attempts of which 1 counted", j)
	}
}

// postRaw POSTs raw bytes and decodes the JSON reply.
func postRaw(url string, body []byte, v any) error {
	resp, err := http.Post(url, "application/octet-stream", bytes.NewReader(body))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("POST %s: %d %s", url, resp.StatusCode, b)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// drainGangScript: each task copies what its checkpoint directory holds
// into ck-<attempt> at start, and on its kill signal writes
// "<index>-<attempt>" there (what a training job saves in its grace).
const drainGangScript = `cat "$FOREMAN_CHECKPOINT/state" > "$SYSDIR/ck-$FOREMAN_ATTEMPT" 2>/dev/null
trap 'echo "$GANG_INDEX-$FOREMAN_ATTEMPT" > "$FOREMAN_CHECKPOINT/state"; exit 143' TERM
echo "$GANG_INDEX $FOREMAN_NODE" > "$SYSDIR/gang-$FOREMAN_ATTEMPT.tmp" && mv "$SYSDIR/gang-$FOREMAN_ATTEMPT.tmp" "$SYSDIR/gang-$FOREMAN_ATTEMPT"
while [ ! -e "$SYSDIR/release" ]; do sleep 0.2; done`

// TestSystemGangDrain: draining (with a deadline) the node of one task of
// a gang of two on three agents stops both tasks as a unit with their
// grace (each writes its checkpoint), re-places the gang on the two other
// nodes, and each task's next attempt finds its own checkpoint — fetched
// from the node that ran the previous attempt whenever it moved (the
// drained node's task always moves), through /v1/internal/checkpoints.
func TestSystemGangDrain(t *testing.T) {
	c := newSysCluster(t, 3)
	leader := c.leader()
	d := newJobDir(t, c.root)
	id := submitJob(t, leader, map[string]any{
		"name":         "gang-drain",
		"command":      []string{"/bin/sh", "-c", drainGangScript},
		"env":          map[string]string{"SYSDIR": string(d), "PATH": "/usr/local/bin:/usr/bin:/bin"},
		"driver":       "process",
		"gang":         map[string]any{"size": 2},
		"kill_timeout": "5s",
		"backoff":      map[string]any{"initial": "200ms"},
	})
	first := map[int]string{} // task index -> node, placement 1
	for n := 1; n <= 2; n++ {
		var idx int
		var node string
		d.scan(t, fmt.Sprintf("gang-%d", n), &idx, &node)
		first[idx] = node
	}
	drained := first[1]
	if err := postJSON(c.byName(drained).url("/v1/nodes/"+drained+"/drain"), map[string]any{"deadline": "1s"}, nil); err != nil {
		t.Fatalf("drain %s: %v", drained, err)
	}
	// Placement 2: attempts 3 and 4, on the two nodes left.
	second := map[int]string{}
	for n := 3; n <= 4; n++ {
		var idx int
		var node string
		d.scan(t, fmt.Sprintf("gang-%d", n), &idx, &node)
		second[idx] = node
		if node == drained {
			t.Fatalf("attempt %d placed on the drained node %s", n, node)
		}
		// Task idx of placement 1 was attempt idx+1; its checkpoint says so.
		b, err := os.ReadFile(filepath.Join(string(d), fmt.Sprintf("ck-%d", n)))
		want := fmt.Sprintf("%d-%d", idx, idx+1)
		if err != nil || strings.TrimSpace(string(b)) != want {
			t.Fatalf("task %d attempt %d on %s (previous attempt on %s) found checkpoint %q (%v), want %q",
				idx, n, node, first[idx], b, err, want)
		}
	}
	if second[1] == first[1] || second[0] == second[1] {
		t.Fatalf("placements %v then %v", first, second)
	}
	t.Logf("placement 1 %v, drained %s, placement 2 %v: every task found its checkpoint", first, drained, second)
	j, err := getJob(leader, id)
	if err != nil {
		t.Fatal(err)
	}
	for n := 1; n <= 2; n++ {
		a := j.attempt(n)
		if a == nil || a.State != "killed" || a.Counted {
			t.Fatalf("attempt %d of the drained placement: %+v (want killed, not counted): %s", n, a, j)
		}
	}
	d.release(t)
	waitJobState(t, leader, id, "succeeded")
}

// scan waits for file name in the job dir and reads its fields into vs.
func (d jobDir) scan(t *testing.T, name string, vs ...any) {
	t.Helper()
	eventually(t, systemTimeout, name+" written", func() error {
		b, err := os.ReadFile(filepath.Join(string(d), name))
		if err != nil {
			return err
		}
		_, err = fmt.Sscan(string(b), vs...)
		return err
	})
}
