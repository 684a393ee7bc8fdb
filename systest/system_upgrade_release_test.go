package systest

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/foreman-sched/foreman/api"
	"github.com/foreman-sched/foreman/fsm"
	"github.com/foreman-sched/foreman/httpapi"
)

// releaseSource is foreman v0.1.0's source as `git archive v0.1.0` gives
// it, tests, docs and fixtures left out (docs/operations.md, "Upgrade
// test", has the command): the test builds the previous release itself, so
// it needs neither the git history nor a download.
const releaseSource = "testdata/prevbuild/v0.1.0-src.tar.gz" // TestMain runs in the repository root

var (
	releaseOnce sync.Once
	releaseBin  string
	releaseErr  error
)

// previousRelease builds foreman v0.1.0 once per source tarball (kept in
// the temp dir under its hash, so later runs reuse it) and returns its path.
func previousRelease(t testing.TB) string {
	t.Helper()
	releaseOnce.Do(func() {
		b, err := os.ReadFile(releaseSource)
		if err != nil {
			releaseErr = err
			return
		}
		dir := filepath.Join(os.TempDir(), fmt.Sprintf("foreman-v0.1.0-%x", sha256.Sum256(b))[:len("foreman-v0.1.0-")+12])
		releaseBin = filepath.Join(dir, "foreman")
		if out, err := exec.Command(releaseBin, "version").Output(); err == nil && strings.HasPrefix(string(out), "foreman v0.1.0\n") {
			return
		}
		work, err := os.MkdirTemp("", "foreman-release-build-")
		if err != nil {
			releaseErr = err
			return
		}
		defer os.RemoveAll(work)
		src, _ := filepath.Abs(releaseSource)
		steps := [][]string{
			{"tar", "-xzf", src, "-C", work},
			{"go", "build", "-C", filepath.Join(work, "foreman-v0.1.0"), "-trimpath", "-tags", "netgo osusergo urfave_cli_no_docs",
				"-ldflags", "-X main.version=v0.1.0", "-o", filepath.Join(work, "foreman"), "."},
		}
		for _, s := range steps {
			cmd := exec.Command(s[0], s[1:]...)
			cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
			if out, err := cmd.CombinedOutput(); err != nil {
				releaseErr = fmt.Errorf("build v0.1.0: %s: %v\n%s", strings.Join(s, " "), err, out)
				return
			}
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			releaseErr = err
			return
		}
		releaseErr = os.Rename(filepath.Join(work, "foreman"), releaseBin)
	})
	if releaseErr != nil {
		t.Fatal(releaseErr)
	}
	return releaseBin
}

func versionOf(t testing.TB, bin string) string {
	t.Helper()
	out, err := exec.Command(bin, "version", "--json").Output()
	var v struct{ Version string }
	if err != nil || json.Unmarshal(out, &v) != nil || v.Version == "" {
		t.Fatalf("%s version --json: %v %q", bin, err, out)
	}
	return v.Version
}

// TestSystemUpgradeFromRelease upgrades a running cluster from the
// previous release (v0.1.0) to this build, one agent at a time as
// scripts/rolling-restart.sh does (the servers, followers first, then the
// clients): three servers and two clients on v0.1.0 hold a running job on
// every node, a finished job's artifact, a workflow half done and a
// schedule firing every second, while a client keeps submitting. After
// the upgrade: no acknowledged job lost, every running job adopted by its
// upgraded agent (same attempt, process and fencing token) and run once,
// every cron tick fired once, the workflow's child run once; between the
// restarts both versions serve reads and writes, and the features the
// older servers lack are held back. Then starting v0.1.0 again on an
// upgraded server's data dir is refused in one line and changes nothing.
func TestSystemUpgradeFromRelease(t *testing.T) {
	old, bin := previousRelease(t), foremanBin(t)
	oldVer, newVer := versionOf(t, old), versionOf(t, bin)
	c := newSysClusterOf(t, old, 3, "n")
	clients := startClients(t, c, 2)
	all := append(append([]*agentProc{}, c.agents...), clients...)
	leader := c.leader()

	// Before the upgrade, on v0.1.0.
	art := submitJob(t, leader, map[string]any{"name": "artifact", "driver": "process",
		"command": []string{"/bin/sh", "-c", `printf kept > "$FOREMAN_ARTIFACTS/a.txt"`}})
	waitJobState(t, leader, art, "succeeded")

	type longJob struct {
		id  string
		d   jobDir
		pid int
		tok uint64
	}
	var long []longJob
	for _, a := range all {
		d := newJobDir(t, c.root)
		long = append(long, longJob{id: submitJob(t, leader, d.waitingJob("long-"+a.name, "sysnode == "+a.name)), d: d})
	}
	for i := range long {
		j := waitJobState(t, leader, long[i].id, "running")
		long[i].pid, long[i].tok = long[i].d.pid(t, 1), j.attempt(1).FencingToken
	}

	wf := newJobDir(t, c.root)
	env := map[string]string{"SYSDIR": string(wf), "PATH": "/usr/local/bin:/usr/bin:/bin"}
	var sub struct {
		Jobs []struct{ Name, ID string } `json:"jobs"`
	}
	err := postJSON(leader.url("/v1/workflows"), map[string]any{"name": "across-upgrade", "jobs": []map[string]any{
		wf.waitingJob("parent"),
		{"name": "child", "driver": "process", "depends_on": []string{"parent"}, "env": env,
			"command": []string{"/bin/sh", "-c", `echo "$FOREMAN_ATTEMPT" >> "$SYSDIR/child-runs"`}},
	}}, &sub)
	if err != nil || len(sub.Jobs) != 2 {
		t.Fatalf("submit the workflow: %v (%+v)", err, sub)
	}

	cron := newJobDir(t, c.root)
	err = postJSON(leader.url("/v1/schedules"), map[string]any{
		"name": "tick", "cron": "@every 1s", "catch_up": "all", "overlap": "allow",
		"job": map[string]any{"driver": "process",
			"env":     map[string]string{"SYSDIR": string(cron), "PATH": "/usr/local/bin:/usr/bin:/bin"},
			"command": []string{"/bin/sh", "-c", `echo "$FOREMAN_SCHEDULED_TIME" >> "$SYSDIR/fires"`}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}

	var down atomic.Int32
	down.Store(-1)
	subm := &submitter{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); subm.run(c, &down, stop) }()
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			close(stop)
		}
		wg.Wait()
	})
	eventually(t, systemTimeout, "the client's first acknowledged submits", func() error {
		if n := len(subm.snapshot()); n < 10 {
			return fmt.Errorf("%d acknowledged", n)
		}
		return nil
	})

	// The upgrade: followers, the leader, then the clients. The long form
	// (make jepsen: FOREMAN_UPGRADE=full) keeps each mixed step a minute
	// under the submitting client.
	var hold time.Duration
	if os.Getenv("FOREMAN_UPGRADE") == "full" {
		hold = time.Minute
	}
	order := c.followers()
	order = append(order, c.leader())
	for i, a := range order {
		down.Store(int32(slices.Index(c.agents, a)))
		a.term(t)
		a.bin = bin
		a.restart(t)
		waitAllAlive(t, c, a, len(all), newVer)
		down.Store(-1)
		if i == 0 {
			checkMixed(t, c, a, c.others(a)[0], oldVer, newVer)
		}
		time.Sleep(hold) // not a synchronisation: how long the mixed cluster serves the load
	}
	for _, cl := range clients {
		cl.term(t)
		cl.bin = bin
		cl.restart(t)
		waitAllAlive(t, c, cl, len(all), newVer)
	}
	leader = c.leader()
	eventually(t, systemTimeout, "every node on "+newVer+", no feature held", func() error {
		var v struct {
			Nodes []struct{ Name, Version string }
		}
		r := runForeman(t, bin, leader.url(""), "version", "--cluster", "--json")
		if err := json.Unmarshal([]byte(r.stdout), &v); err != nil || len(v.Nodes) != len(c.agents) { // the servers (clients: waitAllAlive)
			return fmt.Errorf("%v %s", err, r.stdout)
		}
		for _, n := range v.Nodes {
			if n.Version != newVer {
				return fmt.Errorf("%s at %s", n.Name, n.Version)
			}
		}
		var ri api.RaftInfo
		if err := getJSON(leader.url("/v1/cluster/raft"), &ri); err != nil {
			return err
		}
		if ri.Features == nil || len(ri.Features.Held) > 0 {
			return fmt.Errorf("features %+v", ri.Features)
		}
		return nil
	})
	close(stop)
	stopped = true
	wg.Wait()

	// Every running job was adopted: one attempt, its process, its token.
	for _, l := range long {
		j, err := getJob(leader, l.id)
		if err != nil {
			t.Fatal(err)
		}
		if !processAlive(l.pid) || j.Job.State != "running" || j.Job.Attempts != 1 || j.attempt(1).FencingToken != l.tok {
			t.Fatalf("after the upgrade (pid %d alive=%v, token was %d): %s", l.pid, processAlive(l.pid), l.tok, j)
		}
		l.d.release(t)
	}
	for _, l := range long {
		if j := waitJobState(t, leader, l.id, "succeeded"); j.Job.Attempts != 1 || len(l.d.runs(1)) != 1 {
			t.Fatalf("long job ran %d times in %d attempts: %s", len(l.d.runs(1)), j.Job.Attempts, j)
		}
	}
	// The workflow goes on where it was: its child runs once.
	wf.release(t)
	for _, jr := range sub.Jobs {
		if jr.Name == "child" {
			waitJobState(t, leader, jr.ID, "succeeded")
		}
	}
	if b, _ := os.ReadFile(filepath.Join(string(wf), "child-runs")); strings.TrimSpace(string(b)) != "1" {
		t.Errorf("the workflow's child ran %q, want once", b)
	}
	// The artifact written on v0.1.0 is served by this build.
	if r := runForeman(t, bin, leader.url(""), "artifacts", "get", art, "a.txt", "-o", "-"); r.code != 0 || r.stdout != "kept" {
		t.Errorf("artifacts get after the upgrade: exit %d %q %s", r.code, r.stdout, r.stderr)
	}
	// No acknowledged submit lost; each ran once.
	acks := subm.snapshot()
	for _, a := range acks {
		if j := waitJobState(t, leader, a.id, "succeeded"); j.Job.Attempts != 1 {
			t.Errorf("job %s (submitted at %s) needed more than one attempt: %s", a.id, a.at.Format(time.StampMilli), j)
		}
	}
	// Every tick fired once across the upgrades (catch_up all: a tick the
	// cluster missed while its leader restarted fires later), and the
	// fires' jobs ran once each: the ticks the jobs saw are consecutive
	// seconds, none missing, none twice.
	upgraded := time.Now()
	eventually(t, systemTimeout, "ticks after the upgrade", func() error {
		var info httpapi.ScheduleInfo
		if err := getJSON(leader.url("/v1/schedules/tick"), &info); err != nil {
			return err
		}
		if info.Cursor.Before(upgraded.Add(2 * time.Second)) {
			return fmt.Errorf("cursor at %s", info.Cursor)
		}
		return nil
	})
	if err := postJSON(leader.url("/v1/schedules/tick/pause"), nil, nil); err != nil {
		t.Fatal(err)
	}
	var info httpapi.ScheduleInfo
	eventually(t, systemTimeout, "every fire's job done", func() error {
		if err := getJSON(leader.url("/v1/schedules/tick"), &info); err != nil {
			return err
		}
		for _, f := range info.Fires {
			if f.JobID != "" && f.Outcome != "succeeded" {
				return fmt.Errorf("fire %s: %s", f.Tick, f.Outcome)
			}
		}
		return nil
	})
	b, _ := os.ReadFile(filepath.Join(string(cron), "fires"))
	var ticks []time.Time
	for _, tk := range strings.Fields(string(b)) {
		at, err := time.Parse(time.RFC3339Nano, tk)
		if err != nil {
			t.Fatalf("a fire's job saw tick %q: %v", tk, err)
		}
		ticks = append(ticks, at)
	}
	slices.SortFunc(ticks, time.Time.Compare)
	for i := 1; i < len(ticks); i++ {
		if d := ticks[i].Sub(ticks[i-1]); d != time.Second {
			t.Errorf("ticks %s then %s: a tick ran twice or not at all", ticks[i-1].Format(time.TimeOnly), ticks[i].Format(time.TimeOnly))
		}
	}
	if len(ticks) == 0 || !ticks[len(ticks)-1].After(upgraded) || int64(len(ticks)) != int64(info.Fired) {
		t.Errorf("%d ticks ran, the schedule fired %d, the last after the upgrade (%s)? %v", len(ticks), info.Fired, upgraded, ticks)
	}
	t.Logf("upgrade %s -> %s of 3 servers and 2 clients: %d submits acknowledged (%d refused during restarts), 0 lost; %d running jobs adopted and finished once; %d cron ticks, each fired once",
		oldVer, newVer, len(acks), subm.failures.Load(), len(long), len(ticks))

	// A downgrade of one server is refused in one line, and changes nothing.
	f := c.followers()[0]
	f.term(t)
	before := dirSums(t, f.dir)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, old, f.args...).CombinedOutput()
	var exit *exec.ExitError
	line := strings.TrimSpace(string(out))
	if !errors.As(err, &exit) || !strings.Contains(line, "newer foreman") || !strings.Contains(line, "foreman "+newVer) || strings.Count(line, "\n") > 0 {
		t.Fatalf("v0.1.0 on %s's upgraded data dir: %v\n%s", f.name, err, out)
	}
	if after := dirSums(t, f.dir); !maps.Equal(before, after) {
		t.Fatal("the refused downgrade changed the data dir")
	}
	t.Logf("downgrade refused: %s", line)
	f.restart(t)
	waitAllAlive(t, c, f, len(all), newVer)
}

// checkMixed: with up on this build and old still on the release, both
// serve reads and writes, version --cluster shows both versions, and the
// upgraded agent holds back every feature the older servers lack.
func checkMixed(t *testing.T, c *sysCluster, up, old *agentProc, oldVer, newVer string) {
	t.Helper()
	for _, a := range []*agentProc{up, old} {
		id := submitJob(t, a, map[string]any{"name": "mixed-" + a.name, "driver": "process", "command": []string{"true"}})
		for _, b := range []*agentProc{up, old} {
			eventually(t, systemTimeout, "read "+id+" through "+b.name, func() error { _, err := getJob(b, id); return err })
		}
		waitJobState(t, a, id, "succeeded")
	}
	var v struct {
		Nodes []struct{ Name, Version string }
	}
	r := runForeman(t, up.bin, up.url(""), "version", "--cluster", "--json")
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
		t.Fatalf("version --cluster: %v %s", err, r.stdout)
	}
	versions := map[string]int{}
	for _, n := range v.Nodes {
		versions[n.Version]++
	}
	if versions[newVer] != 1 || versions[oldVer] != len(v.Nodes)-1 {
		t.Errorf("version --cluster while mixed: %v, want one %s, the rest %s", versions, newVer, oldVer)
	}
	// What the release's servers advertise, as the upgraded agent sees it;
	// this build's other features must be held back, lacking those servers.
	var ri api.RaftInfo
	eventually(t, systemTimeout, "the gate as "+up.name+" sees it", func() error {
		if err := getJSON(up.url("/v1/cluster/raft"), &ri); err != nil {
			return err
		}
		if ri.Features == nil || len(ri.Servers) != 3 {
			return fmt.Errorf("%+v", ri)
		}
		return nil
	})
	var oldHas []string
	for _, s := range ri.Servers {
		if s.ID == old.name {
			oldHas = s.Features
		}
	}
	var want, held []string
	for _, f := range fsm.Features {
		if !slices.Contains(oldHas, f.Name) {
			want = append(want, f.Name)
		}
	}
	for _, h := range ri.Features.Held {
		held = append(held, h.Name)
		if len(h.Lacking) != 2 {
			t.Errorf("feature %s held for %v, want the two servers on %s", h.Name, h.Lacking, oldVer)
		}
	}
	if !slices.Equal(held, want) {
		t.Errorf("features held while mixed: %v, want %v (this build's beyond what %s advertises: %v)", held, want, oldVer, oldHas)
	}
	t.Logf("while mixed: %s advertises %v; held back: %v", oldVer, oldHas, held)
}

// waitAllAlive waits until a (restarted) runs version ver as the leader's
// view says, every one of the n nodes is alive, and a server is ready.
func waitAllAlive(t *testing.T, c *sysCluster, a *agentProc, n int, ver string) {
	t.Helper()
	if slices.Contains(c.agents, a) { // a client serves no API
		eventually(t, systemTimeout, a.name+" ready", func() error {
			var r struct{}
			return getJSON(a.url("/v1/ready"), &r)
		})
	}
	leader := c.leader()
	eventually(t, systemTimeout, fmt.Sprintf("%d nodes alive, %s at %s", n, a.name, ver), func() error {
		var v struct {
			Nodes []struct{ Name, Gossip, Version string }
		}
		if err := getJSON(leader.url("/v1/nodes?consistent=true"), &v); err != nil {
			return err
		}
		alive := 0
		for _, nd := range v.Nodes {
			if nd.Gossip == "alive" {
				alive++
			}
			if nd.Name == a.name && nd.Version != ver {
				return fmt.Errorf("%s at %q", a.name, nd.Version)
			}
		}
		if alive != n {
			return fmt.Errorf("%d of %d alive: %+v", alive, n, v.Nodes)
		}
		return nil
	})
}
